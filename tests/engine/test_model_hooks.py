"""The model's own hooks in a library trace: every firing recorded in PyTorch's real order,
the numbers those hooks change equal to a clean run, the model's hook dicts restored exactly.

The oracle is the model itself run without gradtrace: every hook appends its name to a log,
so the clean run's log is PyTorch's own firing order.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch
from engine_checks import check_engine_order, check_node_states
from torch import nn
from torch.utils.checkpoint import checkpoint

import gradtrace

MODULE_DICTS = (
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_backward_pre_hooks",
    "_backward_hooks",
)
TENSOR_DICTS = ("_backward_hooks", "_post_accumulate_grad_hooks")


def _named(log: list[str], name: str, result: Any = None):
    """A hook that logs ``name`` and returns ``result(args)`` (None: changes nothing)."""

    def hook(*args: Any) -> Any:
        log.append(name)
        return None if result is None else result(*args)

    hook.__qualname__ = name
    return hook


class Block(nn.Module):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log
        self.inner = nn.Linear(3, 4)
        self.out = nn.Linear(4, 2)
        self.late: Any = None
        self.late_bias: Any = None

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        # a forward hook registered on a child just before calling it, removed right after
        once = self.inner.register_forward_hook(_named(self.log, "in_forward.inner.forward"))
        h = torch.tanh(self.inner(x)) * scale
        once.remove()
        # a tensor hook on an intermediate, registered while the forward runs, that replaces
        # the gradient
        h.register_hook(_named(self.log, "in_forward.h.tensor", lambda g: g * 3))
        y = self.out(h)
        if self.late is None:  # registered inside forward, kept afterwards
            # fires from the next call on
            self.late = self.out.register_forward_pre_hook(_named(self.log, "in_forward.out.late_pre"))
            # fires in this backward: a parameter that had no post-accumulate hook before
            self.late_bias = self.out.bias.register_post_accumulate_grad_hook(
                _named(self.log, "in_forward.out.bias.post_accumulate")
            )
        return y


class Net(nn.Module):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.block = Block(log)
        self.head = nn.Linear(2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(x, scale=0.5))


def build(log: list[str]) -> Net:
    """The same model (weights and hooks) every time; every hook kind PyTorch has."""
    torch.manual_seed(7)
    net = Net(log)
    block, inner, out, head = net.block, net.block.inner, net.block.out, net.head
    block.register_forward_pre_hook(_named(log, "block.forward_pre"))
    block.register_forward_pre_hook(_named(log, "block.forward_pre_kwargs"), with_kwargs=True)
    block.register_forward_hook(_named(log, "block.forward_kwargs"), with_kwargs=True)
    block.register_forward_hook(_named(log, "block.forward_always"), always_call=True)
    out.register_forward_pre_hook(_named(log, "out.forward_pre"))
    out.register_forward_pre_hook(_named(log, "out.forward_pre_first"), prepend=True)
    # a forward hook that replaces the output
    out.register_forward_hook(_named(log, "out.forward_double", lambda m, a, o: o * 2))
    inner.register_full_backward_pre_hook(_named(log, "inner.backward_pre"))
    # a full backward hook that replaces grad_input
    inner.register_full_backward_hook(
        _named(log, "inner.backward_halve", lambda m, gi, go: tuple(None if g is None else g / 2 for g in gi))
    )
    inner.register_full_backward_hook(_named(log, "inner.backward_first"), prepend=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        head.register_backward_hook(_named(log, "head.backward_deprecated"))
    inner.weight.register_hook(_named(log, "inner.weight.tensor"))
    out.bias.register_post_accumulate_grad_hook(_named(log, "out.bias.post_accumulate"))
    return net


def hook_state(net: nn.Module) -> list[tuple]:
    """Every hook dict of the model: the dict object, its keys in order, the very values
    (functions compare by identity)."""
    state: list[tuple] = []
    for path, module in net.named_modules():
        for name in MODULE_DICTS:
            d = getattr(module, name)
            state.append((path, name, id(d), list(d.items())))
    for name, p in net.named_parameters():
        for attr in TENSOR_DICTS:
            d = getattr(p, attr)
            state.append((name, attr, id(d), None if d is None else list(d.items())))
    return state


def loss_fn(y: torch.Tensor) -> torch.Tensor:
    return (y**2).sum()


X = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])


def clean_run() -> tuple[list[str], Net]:
    log: list[str] = []
    net = build(log)
    loss_fn(net(X.clone().requires_grad_())).backward()
    return log, net


def traced_run() -> tuple[list[str], Net, gradtrace.Trace]:
    log: list[str] = []
    net = build(log)
    return log, net, gradtrace.trace(net, X.clone().requires_grad_(), loss_fn)


def hook_events(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["events"] if e["hook"] is not None]


def test_every_firing_is_an_event_in_pytorchs_order() -> None:
    clean_log, _ = clean_run()
    log, _net, trace = traced_run()
    doc = trace.to_dict()
    assert log == clean_log  # gradtrace changed nothing about which hooks fired when
    check_engine_order(trace.doc)
    check_node_states(trace.doc)
    fired = [e["payload"]["hook_name"] for e in hook_events(doc)]
    assert fired == clean_log
    # every kind is there, with the event kind of a spec hook of the same type
    kinds = {e["payload"]["hook_name"]: e["kind"] for e in hook_events(doc)}
    assert kinds["block.forward_pre_kwargs"] == "module_forward_pre"
    assert kinds["block.forward_always"] == "module_forward"
    assert kinds["inner.backward_pre"] == "module_backward_pre"
    assert kinds["head.backward_deprecated"] == "module_backward"
    assert kinds["inner.weight.tensor"] == "tensor_hook"
    assert kinds["out.bias.post_accumulate"] == "post_accumulate_grad"
    assert kinds["in_forward.h.tensor"] == "tensor_hook"
    assert kinds["in_forward.inner.forward"] == "module_forward"
    assert kinds["in_forward.out.bias.post_accumulate"] == "post_accumulate_grad"


def test_events_say_where_what_and_whether_it_changed_anything() -> None:
    _log, _net, trace = traced_run()
    doc = trace.to_dict()
    by_name = {e["payload"]["hook_name"]: e for e in hook_events(doc)}
    changed = {name for name, e in by_name.items() if e["payload"]["changed"]}
    assert changed == {"out.forward_double", "inner.backward_halve", "in_forward.h.tensor"}
    double = by_name["out.forward_double"]
    assert double["target"] == "block.out" and double["module"] == "block.out"
    out_value = double["payload"]["outputs"][0]
    returned = double["payload"]["returned"][0]
    assert returned["shape"] == out_value["shape"] == [2, 2]
    assert returned["stats"]["norm"] == pytest.approx(2 * out_value["stats"]["norm"])
    kwargs = by_name["block.forward_pre_kwargs"]["payload"]
    assert kwargs["inputs"][0]["shape"] == [2, 3] and "kwargs" in kwargs
    assert by_name["inner.weight.tensor"]["target"] == "block.inner.weight"
    assert by_name["out.bias.post_accumulate"]["target"] == "block.out.bias"
    halve = by_name["inner.backward_halve"]
    assert halve["phase"] == "backward" and halve["node"] is not None
    assert halve["payload"]["returned"][0]["stats"]["norm"] == pytest.approx(
        halve["payload"]["grad_input"][0]["stats"]["norm"] / 2
    )
    # module hooks are listed on their module, with the index their events carry
    listed = {(m["path"], h["type"], h["index"]) for m in doc["graph"]["modules"] for h in m["hooks"]}
    assert ("block.out", "forward", by_name["out.forward_double"]["hook"]) in listed
    assert ("head", "backward", by_name["head.backward_deprecated"]["hook"]) in listed


def test_numbers_equal_a_clean_run() -> None:
    _, clean = clean_run()
    _log, net, trace = traced_run()
    for name, p in clean.named_parameters():
        traced = dict(net.named_parameters())[name].grad
        assert torch.equal(traced, p.grad), name
        np.testing.assert_array_equal(trace.grads[name], p.grad.numpy(), err_msg=name)


def test_hook_dicts_are_restored_exactly() -> None:
    log: list[str] = []
    net = build(log)
    net.block.late = "not yet"  # no registration inside forward: the state must not change
    before = hook_state(net)
    gradtrace.trace(net, X, loss_fn)
    assert hook_state(net) == before


def test_a_hook_registered_inside_forward_is_left_as_the_user_registered_it() -> None:
    log: list[str] = []
    net = build(log)
    gradtrace.trace(net, X, loss_fn)
    late = net.block.out._forward_pre_hooks[net.block.late.id]
    assert late.__qualname__ == "in_forward.out.late_pre" and not hasattr(late, "__wrapped__")
    late_bias = net.block.out.bias._post_accumulate_grad_hooks[net.block.late_bias.id]
    assert late_bias.__qualname__ == "in_forward.out.bias.post_accumulate"
    assert not hasattr(late_bias, "__wrapped__")
    log.clear()
    net(X)  # the model works as before, unwrapped
    assert "in_forward.out.late_pre" in log


class Failing(nn.Module):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.lin.register_forward_hook(_named(log, "lin.forward"))
        self.lin.register_forward_pre_hook(_named(log, "lin.pre_first"), prepend=True)
        self.lin.weight.register_hook(_named(log, "lin.weight.tensor"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.lin(x)
        raise ValueError("the model's own error")


def test_hook_dicts_are_restored_after_a_forward_that_raises() -> None:
    log: list[str] = []
    net = Failing(log)
    before = hook_state(net)
    with pytest.raises(ValueError, match="the model's own error"):
        gradtrace.trace(net, X)
    assert log == ["lin.pre_first", "lin.forward"]
    assert hook_state(net) == before


def test_hook_dicts_are_restored_when_installing_gradtraces_hooks_fails(monkeypatch: Any) -> None:
    """A step of the set-up failing after the model's hooks were wrapped (here the forward
    capture's module hooks, installed right after) leaves nothing behind on the model."""
    from gradtrace.engine.forward_capture import ForwardCapture

    def refuse(self: Any) -> Any:
        raise RuntimeError("set-up failed")

    log: list[str] = []
    net = build(log)
    net.block.late = "not yet"
    before = hook_state(net)
    monkeypatch.setattr(ForwardCapture, "hooks_installed", refuse)
    with pytest.raises(RuntimeError, match="set-up failed"):
        gradtrace.trace(net, X, loss_fn)
    assert hook_state(net) == before
    monkeypatch.undo()
    assert gradtrace.trace(net, X, loss_fn).grads  # and the model traces as before


class LateHook(nn.Module):
    """Registers, once, a hook PyTorch collects before gradtrace can wrap it: a full backward
    hook on a child right before calling it, or a forward hook on itself inside its forward."""

    def __init__(self, log: list[str], where: str) -> None:
        super().__init__()
        torch.manual_seed(2)
        self.child = nn.Linear(3, 1)
        self.log = log
        self.where = where
        self.handle: Any = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.handle is None and self.where == "child":
            self.handle = self.child.register_full_backward_hook(_named(self.log, "late"))
        y = self.child(x)
        if self.handle is None and self.where == "self":
            self.handle = self.register_forward_hook(_named(self.log, "late"))
        return y


@pytest.mark.parametrize(("where", "module"), [("child", "child"), ("self", "")])
def test_a_hook_pytorch_collected_before_it_could_be_wrapped_is_named_in_a_diagnostic(
    where: str, module: str
) -> None:
    log: list[str] = []
    net = LateHook(log, where)
    first = gradtrace.trace(net, X.clone().requires_grad_()).to_dict()
    assert log == ["late"]  # it fired, as in any run
    assert not hook_events(first)
    missed = [d for d in first["analyses"]["diagnostics"] if d["code"] == "hook_unrecorded"]
    assert [d["module"] for d in missed] == [module] and "late" in missed[0]["message"]
    # from then on it is the model's hook like any other: recorded
    second = gradtrace.trace(net, X.clone().requires_grad_()).to_dict()
    assert [e["payload"]["hook_name"] for e in hook_events(second)] == ["late"]
    assert not [d for d in second["analyses"]["diagnostics"] if d["code"] == "hook_unrecorded"]


class SiblingHook(nn.Module):
    """Registers a forward hook on ``b`` before calling ``a``, then a forward-pre hook on
    ``a`` before calling ``b`` and ``a`` again: hooks registered on modules that are not
    running, between other modules' calls."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)
        self.log = log
        self.handles: list[Any] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.handles.append(self.b.register_forward_hook(_named(self.log, "b.forward")))
        h = self.a(x)
        self.handles.append(self.a.register_forward_pre_hook(_named(self.log, "a.pre")))
        return self.a(self.b(h))


def test_hooks_registered_on_modules_that_are_not_running_are_wrapped_before_they_fire() -> None:
    log: list[str] = []
    net = SiblingHook(log)
    doc = gradtrace.trace(net, X.clone().requires_grad_()).to_dict()
    assert log == ["b.forward", "a.pre"]
    # b's forward hook is collected when b's forward returns: wrapped in time, recorded
    fired = [(e["kind"], e["target"], e["payload"]["hook_name"]) for e in hook_events(doc)]
    assert fired == [("module_forward", "b", "b.forward")]
    # a's pre hook was collected as a's second call began, before gradtrace saw it: named
    missed = [d for d in doc["analyses"]["diagnostics"] if d["code"] == "hook_unrecorded"]
    assert [d["module"] for d in missed] == ["a"] and "a.pre" in missed[0]["message"]
    for handle in net.handles:
        handle.remove()


class ResidualBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(h)) + x)


def _conv_net() -> tuple[nn.Module, torch.Tensor]:
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), ResidualBlock(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
    return net, torch.randn(2, 3, 6, 6)


def _transformer() -> tuple[nn.Module, torch.Tensor]:
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), torch.randn(2, 5, 8)


def _lstm() -> tuple[nn.Module, torch.Tensor]:
    return nn.Sequential(nn.LSTM(4, 6, batch_first=True)), torch.randn(2, 3, 4)


def _hook_everything(net: nn.Module, log: list[str]) -> None:
    for path, module in net.named_modules():
        module.register_forward_pre_hook(_named(log, f"{path}:forward_pre"))
        module.register_forward_hook(_named(log, f"{path}:forward"))
        if not isinstance(module, nn.LSTM | nn.Sequential | nn.TransformerEncoder):  # tuple outputs
            module.register_full_backward_pre_hook(_named(log, f"{path}:backward_pre"))
            module.register_full_backward_hook(_named(log, f"{path}:backward"))
    for name, p in net.named_parameters():
        p.register_hook(_named(log, f"{name}:tensor"))
        p.register_post_accumulate_grad_hook(_named(log, f"{name}:post_accumulate"))


def _first_output(out: Any) -> torch.Tensor:
    return (out[0] if isinstance(out, tuple) else out).pow(2).sum()


@pytest.mark.parametrize(
    "make", [_conv_net, _transformer, _lstm], ids=["resnet_block", "transformer", "lstm"]
)
def test_every_module_hooked_on_real_architectures(make: Any) -> None:
    runs = []
    for traced in (False, True):
        torch.manual_seed(11)
        net, x = make()
        log: list[str] = []
        _hook_everything(net, log)
        if traced:
            trace = gradtrace.trace(net, x, _first_output)
        else:
            _first_output(net(x)).backward()
        runs.append((log, net))
    (clean_log, clean), (log, net) = runs
    assert log == clean_log and len(log) >= 10
    assert [e["payload"]["hook_name"] for e in hook_events(trace.to_dict())] == clean_log
    check_engine_order(trace.doc)
    for (name, p), q in zip(clean.named_parameters(), net.parameters(), strict=True):
        assert torch.equal(q.grad, p.grad), name
        np.testing.assert_array_equal(trace.grads[name], p.grad.numpy(), err_msg=name)


class NonReentrant(nn.Module):
    """A non-reentrant checkpoint: its saved tensors unpack by recomputing the segment."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 1)
        self.a.register_forward_hook(_named(log, "a.forward"))
        self.a.weight.register_hook(_named(log, "a.weight.tensor"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(checkpoint(lambda t: torch.tanh(self.a(t)), x, use_reentrant=False))


def test_reading_saved_tensors_never_runs_the_models_unpack_hooks() -> None:
    clean_log: list[str] = []
    clean = NonReentrant(clean_log)
    clean(X.clone().requires_grad_()).sum().backward()
    assert clean_log == ["a.forward", "a.forward", "a.weight.tensor"]  # forward, recomputation

    log: list[str] = []
    net = NonReentrant(log)
    trace = gradtrace.trace(net, X.clone().requires_grad_())
    doc = trace.to_dict()
    assert log == clean_log  # gradtrace unpacked nothing: no extra recomputation
    assert [e["payload"]["hook_name"] for e in hook_events(doc)] == clean_log
    packed = [
        s for n in doc["graph"]["nodes"] for s in n["saved"] if "saved_tensors_hooks" in str(s["scalar"])
    ]
    assert packed  # said, not silently left out
    for (name, p), q in zip(clean.named_parameters(), net.parameters(), strict=True):
        assert torch.equal(q.grad, p.grad), name


def test_process_wide_module_hooks_are_said_to_fire_unrecorded() -> None:
    log: list[str] = []
    handle = torch.nn.modules.module.register_module_forward_hook(_named(log, "global.forward"))
    try:
        doc = gradtrace.trace(nn.Linear(3, 1), X).to_dict()
    finally:
        handle.remove()
    assert log == ["global.forward"] and not hook_events(doc)
    codes = [d["code"] for d in doc["analyses"]["diagnostics"]]
    assert "global_hooks_unrecorded" in codes
    assert "global_hooks_unrecorded" not in [
        d["code"] for d in gradtrace.trace(nn.Linear(3, 1), X).to_dict()["analyses"]["diagnostics"]
    ]


def _process_wide_hooks() -> list[dict]:
    m = torch.nn.modules.module
    return [
        dict(m._global_forward_pre_hooks),
        dict(m._global_forward_hooks),
        dict(m._global_forward_hooks_always_called),
    ]


class _Chain(nn.Module):
    """Two layers, the second with a forward-pre hook of its own from the start."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.a, self.b = nn.Linear(3, 4), nn.Linear(4, 2)
        self.b.register_forward_pre_hook(_named(log, "b.pre"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def test_modules_are_recorded_through_one_process_wide_pair_and_only_the_models() -> None:
    """gradtrace records the model's modules with one process-wide hook pair (a pair of
    their own for modules that already had forward hooks, after those); a module outside
    the model (a loss module) gets no events, and the process-wide dicts end as they began."""
    log: list[str] = []
    net = _Chain(log)
    before = _process_wide_hooks()
    mse = nn.MSELoss()
    seen_during: list[int] = []

    def loss(y: torch.Tensor) -> torch.Tensor:
        seen_during.append(len(torch.nn.modules.module._global_forward_hooks))
        return mse(y, torch.zeros_like(y))

    doc = gradtrace.trace(net, X, loss).to_dict()
    assert _process_wide_hooks() == before and seen_during == [len(before[1]) + 1]
    assert "global_hooks_unrecorded" not in [d["code"] for d in doc["analyses"]["diagnostics"]]
    kinds = [(e["kind"], e["module"]) for e in doc["events"] if e["kind"].startswith("module_forward")]
    assert kinds == [
        ("module_forward_pre", ""),
        ("module_forward_pre", "a"),
        ("module_forward", "a"),
        ("module_forward_pre", "b"),  # the model's own hook first, as PyTorch runs it
        ("module_forward_pre", "b"),
        ("module_forward", "b"),
        ("module_forward", ""),
    ]
    b_pre = [e for e in doc["events"] if e["kind"] == "module_forward_pre" and e["module"] == "b"]
    assert b_pre[0]["hook"] is not None and b_pre[1]["hook"] is None and log == ["b.pre"]
    # the loss module's op is recorded (outside any module), the module itself is not
    assert {m["path"] for m in doc["graph"]["modules"]} == {"", "a", "b"}
    mse_node = next(n for n in doc["graph"]["nodes"] if n["op"] == "MseLossBackward0")
    assert mse_node["module"] is None


def test_another_traces_process_wide_hooks_are_not_reported_as_the_users() -> None:
    """Another trace running (e.g. in another thread) has its process-wide pair registered:
    it is gradtrace's, not the user's, so no global_hooks_unrecorded diagnostic."""
    from gradtrace.engine.forward_capture import ForwardCapture
    from gradtrace.engine.recorder import Recorder
    from gradtrace.engine.summarize import Summarizer

    other = ForwardCapture(Recorder(Summarizer(), 0, 100), [], {}, {})
    handle = torch.nn.modules.module.register_module_forward_pre_hook(other._global_pre_hook)
    try:
        doc = gradtrace.trace(nn.Linear(3, 1), X).to_dict()
    finally:
        handle.remove()
    assert "global_hooks_unrecorded" not in [d["code"] for d in doc["analyses"]["diagnostics"]]
    assert [e["module"] for e in doc["events"] if e["kind"] == "module_forward"] == [""]
