"""The pass only keeps device-side data: no host transfer and no device sync while the
forward and the backward run; every read to the host happens after them (the Summarizer's
finalize()).

For the duration of each pass (a spec's: the ``run`` of ``TraceSession.forward`` and the
``call`` of ``TraceSession.backward_pass``, the session's pass boundaries, wrapped here, the
pass itself unchanged; ``trace()``'s block, its forward and backward, as a whole, as a
``record()`` block is) ``Tensor.item``, ``.tolist``, ``.numpy``, ``.cpu`` and ``.to(<a CPU device>)``
raise. (After each, the session reads the pass's large copies to the host, and whether the
model's hooks wrote a device's tensors through ``.data``: see TraceSession._settle.) Large CPU tensors, which by default are read where they are seen (no transfer
for them), take the device tensors' path under the guard. Each trace must still complete and be,
byte for byte (``Trace.to_json``), the trace made without the guard (by the default path). Where CUDA is present the
same traces run on the GPU under ``torch.cuda.set_sync_debug_mode("error")`` for the passes too.
A program inside ``gradtrace.record()`` is guarded as a whole block (it reads nothing to the host
itself), but for the moments between its passes (``TraceSession._settle``).
"""

from __future__ import annotations

import base64
import contextlib
import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import torch
from engine_specs import SEED001_RETAIN, SEED001_TENSOR_HOOKS
from torch import nn

import gradtrace
from gradtrace.engine import run
from gradtrace.engine.session import TraceSession
from gradtrace.engine.summarize import BATCH_STATS, Summarizer
from gradtrace.examples import get_example

CUDA = torch.cuda.is_available()
DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not CUDA, reason="no CUDA device: sync_debug_mode needs one")
    ),
]


class HostTransfer(AssertionError):
    """A tensor was read to the host while a pass ran."""


def _is_cpu(target: Any) -> bool:
    """Whether an argument of ``Tensor.to`` names the CPU (a device, its name, a CPU tensor)."""
    if isinstance(target, torch.Tensor):
        return target.device.type == "cpu"
    if isinstance(target, str | torch.device):
        return torch.device(target).type == "cpu"
    return False  # (a dtype, a flag)


class PassGuard:
    """Counts the passes it saw; while one runs, host reads raise :class:`HostTransfer`."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.depth = 0
        self.passes: list[str] = []

    @contextmanager
    def during(self, kind: str) -> Iterator[None]:
        self.passes.append(kind)
        self.depth += 1
        sync = self.device == "cuda" and self.depth == 1
        if sync:
            torch.cuda.set_sync_debug_mode("error")
        try:
            yield
        finally:
            self.depth -= 1
            if sync:
                torch.cuda.set_sync_debug_mode("default")

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Host reads allowed inside this block (a pass has just ended; with record() the
        program's block, guarded as a whole, is still running)."""
        depth, self.depth = self.depth, 0
        sync = self.device == "cuda" and depth > 0
        if sync:
            torch.cuda.set_sync_debug_mode("default")
        try:
            yield
        finally:
            self.depth = depth
            if sync:
                torch.cuda.set_sync_debug_mode("error")

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        guard = self

        def refusing(name: str, original: Callable, when: Callable[..., bool] | None = None) -> Callable:
            def method(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
                if guard.depth and (when is None or when(*args, **kwargs)):
                    raise HostTransfer(f"Tensor.{name} during a pass")
                return original(self, *args, **kwargs)

            return method

        for name in ("item", "tolist", "numpy", "cpu"):
            monkeypatch.setattr(torch.Tensor, name, refusing(name, getattr(torch.Tensor, name)))

        def to_cpu(*args: Any, **kwargs: Any) -> bool:
            return any(_is_cpu(a) for a in args) or _is_cpu(kwargs.get("device"))

        monkeypatch.setattr(torch.Tensor, "to", refusing("to", torch.Tensor.to, to_cpu))
        forward, backward_pass = TraceSession.forward, TraceSession.backward_pass

        def guarded_forward(session: TraceSession, run: Callable[[], Any], *args: Any, **kwargs: Any) -> Any:
            def inside() -> Any:
                with guard.during("forward"):
                    return run()

            return forward(session, inside, *args, **kwargs)

        def guarded_backward(
            session: TraceSession, kind: str, of: str, step: Any, call: Callable, **kwargs: Any
        ) -> Any:
            def inside() -> Any:
                with guard.during("backward"):
                    return call()

            return backward_pass(session, kind, of, step, inside, **kwargs)

        settle = TraceSession._settle

        def settled(session: TraceSession) -> None:
            with guard.paused():  # (a pass is over: its reads to the host happen here)
                settle(session)

        block = run._capture

        def guarded_block(session: TraceSession, **kwargs: Any) -> None:
            # trace()'s block (its forward and backward, as a program writes them) is guarded as
            # a whole, as a record() block is, but for the moments between passes (_settle)
            with guard.during("forward"):
                block(session, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(TraceSession, "forward", guarded_forward)
        monkeypatch.setattr(run, "_capture", guarded_block)
        monkeypatch.setattr(TraceSession, "backward_pass", guarded_backward)
        monkeypatch.setattr(TraceSession, "_settle", settled)
        # large CPU tensors take a device tensor's path (by default they are read where they are
        # seen: for them that is no transfer): the path a GPU pass takes, run here on the CPU
        monkeypatch.setattr(Summarizer, "large_host_tensors_now", False)


def _same_trace_under_the_guard(
    make: Callable[[], gradtrace.Trace], monkeypatch: pytest.MonkeyPatch, device: str = "cpu"
) -> gradtrace.Trace:
    """The trace ``make()`` gives, made first as it is and then under the guard: the same
    bytes, and the guard saw a forward and a backward pass."""
    plain = make().to_json()
    guard = PassGuard(device)
    with monkeypatch.context() as patch:
        guard.install(patch)
        guarded = make()
    assert "forward" in guard.passes and "backward" in guard.passes, guard.passes
    assert guarded.to_json() == plain
    return guarded


# ---- the guard itself -------------------------------------------------------------------
def test_the_guard_catches_a_host_read_inside_the_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """(What the other tests rely on: a host read in the pass fails the trace.)"""

    class Reads(nn.Module):
        def __init__(self, read: Callable[[torch.Tensor], Any]) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 2)
            self.read = read

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.lin(x)
            self.read(y)
            return y.sum()

    x = torch.randn(4, 3)
    reads = [
        lambda y: y.sum().item(),
        lambda y: y.tolist(),
        lambda y: y.detach().numpy(),
        lambda y: y.cpu(),
        lambda y: y.to("cpu"),
        lambda y: y.to(torch.device("cpu")),
        lambda y: y.to(device="cpu"),
    ]
    guard = PassGuard("cpu")
    guard.install(monkeypatch)
    for read in reads:
        with pytest.raises(HostTransfer):
            gradtrace.trace(Reads(read), x)
    assert guard.depth == 0
    gradtrace.trace(Reads(lambda y: y.to(torch.float64)), x)  # (a dtype: no transfer)


# ---- the traces ---------------------------------------------------------------------------
def _mlp(width: int, device: str) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(width, width), nn.LayerNorm(width), nn.GELU(), nn.Linear(width, width), nn.GELU()
    ).to(device)


def _total(out: torch.Tensor) -> torch.Tensor:
    return out.sum()


@pytest.mark.parametrize("device", DEVICES)
def test_an_mlp(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    def make() -> gradtrace.Trace:
        x = torch.randn(3, 8, generator=torch.Generator().manual_seed(1)).to(device)
        return gradtrace.trace(_mlp(8, device), x, _total)

    _same_trace_under_the_guard(make, monkeypatch, device)


@pytest.mark.parametrize("device", DEVICES)
def test_a_recorded_program_with_optimizer_steps(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    """``gradtrace.record()`` around a training loop: its block is guarded as a whole (the
    program reads nothing to the host), but for the moments between passes (_settle)."""
    guard: PassGuard | None = None

    def make() -> gradtrace.Trace:
        model = _mlp(40, device)  # (past BATCH_STATS: the large tensors' path too)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = torch.randn(30, 40, generator=torch.Generator().manual_seed(1)).to(device)
        with gradtrace.record() as rec:
            with guard.during("forward") if guard is not None else contextlib.nullcontext():
                for _step in range(2):
                    optimizer.zero_grad()
                    loss = model(x).square().mean()
                    loss.backward()
                    optimizer.step()
        assert {f"model.{n}" for n, _p in model.named_parameters()} <= set(rec.trace.grads)
        return rec.trace

    plain = make().to_json()
    guard = PassGuard(device)
    with monkeypatch.context() as patch:
        guard.install(patch)
        guarded = make()
    assert guard.passes.count("backward") == 2, guard.passes
    assert guarded.to_json() == plain


@pytest.mark.parametrize("device", DEVICES)
def test_tensors_larger_than_a_batch_of_stats(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    """Activations, weights and gradients past BATCH_STATS elements: the large-tensor path."""
    width = 64
    assert width * width > BATCH_STATS and 32 * width > BATCH_STATS

    def make() -> gradtrace.Trace:
        x = torch.randn(32, width, generator=torch.Generator().manual_seed(2)).to(device)
        return gradtrace.trace(_mlp(width, device), x, _total)

    trace = _same_trace_under_the_guard(make, monkeypatch, device)
    big = [n for n in trace.doc.graph.nodes if n.value is not None and n.value.stats.numel > BATCH_STATS]
    assert big and all(n.value.data is not None for n in big)


@pytest.mark.parametrize("device", DEVICES)
def test_a_budget_truncated_trace(monkeypatch: pytest.MonkeyPatch, device: str) -> None:
    def make() -> gradtrace.Trace:
        x = torch.randn(32, 64, generator=torch.Generator().manual_seed(3)).to(device)
        return gradtrace.trace(_mlp(64, device), x, _total, value_budget=5000)

    trace = _same_trace_under_the_guard(make, monkeypatch, device)
    assert trace.doc.limits.values_truncated > 0


def test_a_spec_with_user_hooks_and_retain_grad(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tensor hook and a module's full backward hook (each with an action), retain_grad."""
    spec = copy.deepcopy(get_example("retain-grad-intermediate"))
    spec["hooks"] = [
        {"tensor": "a0", "type": "tensor", "action": {"op": "scale", "by": 3}},
        {"module": "W1", "type": "full_backward", "action": {"op": "scale", "by": 2}},
    ]
    trace = _same_trace_under_the_guard(lambda: gradtrace.trace_spec(spec), monkeypatch)
    kinds = {e.kind for e in trace.events}
    assert {"tensor_hook", "module_backward", "hook_action", "grad_write"} <= kinds


@pytest.mark.parametrize("spec", [SEED001_TENSOR_HOOKS, SEED001_RETAIN], ids=["tensor_hooks", "retain_graph"])
def test_specs_of_several_steps(monkeypatch: pytest.MonkeyPatch, spec: dict[str, Any]) -> None:
    """Backwards, a forward step, zero_grad, a backward that fails: each a pass of its own."""
    _same_trace_under_the_guard(lambda: gradtrace.trace_spec(spec), monkeypatch)


class _WritesInPlace(nn.Module):
    """A Linear whose output is then scaled in place (after the Linear's event saw it)."""

    def __init__(self, width: int, device: str) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.lin = nn.Linear(width, width).to(device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        h.mul_(3)  # bumps h's version: what module_forward recorded must stay what it saw
        return torch.tanh(h).sum()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rows", [2, 40])  # the output small (a JSON list) and large (past BATCH_STATS)
def test_an_in_place_write_after_a_snapshot(monkeypatch: pytest.MonkeyPatch, device: str, rows: int) -> None:
    width = 32
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(5))

    def make() -> gradtrace.Trace:
        return gradtrace.trace(_WritesInPlace(width, device), x.to(device))

    trace = _same_trace_under_the_guard(make, monkeypatch, device)
    model = _WritesInPlace(width, device)
    with torch.no_grad():
        seen = model.lin(x.to(device)).cpu().numpy()
    (event,) = [e for e in trace.events if e.kind == "module_forward" and e.module == "lin"]
    (output,) = event.payload["outputs"]
    assert (rows * width > BATCH_STATS) == (output["stats"]["numel"] > BATCH_STATS)
    recorded = trace.array(output)
    assert recorded.tobytes() == seen.tobytes()  # before the write, bit for bit
    assert output["stats"]["max"] == float(seen.max())


def _doubles_output_through_data(_module: nn.Module, _args: tuple, output: torch.Tensor) -> None:
    output.data.mul_(2)  # (no version bump: gradtrace sees it by comparing the bits)


def test_a_data_write_in_a_forward_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    def model() -> nn.Module:
        torch.manual_seed(6)
        net = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 1))
        net[0].register_forward_hook(_doubles_output_through_data)
        return net

    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(7))
    trace = _same_trace_under_the_guard(lambda: gradtrace.trace(model(), x, _total), monkeypatch)
    plain = model()
    with torch.no_grad():
        written = plain[0](x)  # (the hook doubled it)
    fired = {(e.kind, e.target): e for e in trace.events if e.hook is not None}
    assert fired[("module_forward", "0")].payload["changed"] is True
    (given,) = [e for e in trace.events if e.kind == "module_forward_pre" and e.module == "1"]
    assert np.array_equal(trace.array(given.payload["inputs"][0]), written.numpy())


# ---- read later, the numbers seen then ----------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_large_views_read_later_have_the_stats_of_numpys_view_then(dtype: torch.dtype) -> None:
    """A large tensor is read by finalize(), from a copy laid out as the tensor was: its stats
    are those of numpy's view of the tensor when it was seen (the order of the elements, and
    so the float64 sum's rounding, included), though the tensor was written since."""
    from gradtrace.engine.summarize import Summarizer, native_and_numeric
    from gradtrace.engine.tensor_stats import stats_of

    base = (torch.randn(6, 40, 30, generator=torch.Generator().manual_seed(8)) * 1000 + 0.1).to(dtype)
    views = [
        base,
        base.permute(2, 0, 1),
        base[:, ::2, 1::3],
        base[:1].expand(4, 40, 30),
        base[:, :, :1].expand(6, 40, 20).transpose(0, 2),
        base[2:3, 5:6].expand(3, 400, 30)[:, ::2],
    ]
    summarizer = Summarizer()
    records = [summarizer(v) for v in views]
    expected = [stats_of(native_and_numeric(v)[1]) for v in views]
    rows = [v.contiguous().numpy().tobytes() for v in views]
    with torch.no_grad():
        base.zero_()  # (after every snapshot)
    summarizer.finalize()
    for record, stats, row in zip(records, expected, rows, strict=True):
        assert record.stats.numel > BATCH_STATS
        got = (record.stats.min, record.stats.max, record.stats.mean, record.stats.std, record.stats.norm)
        assert got == stats[:5]
        assert base64.b64decode(summarizer.tensor_data[record.data]) == row


class _TripledGradient(nn.Module):
    """tanh, with a tensor hook on its output that triples the gradient through ``.data``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.tanh(x)
        out.register_hook(_triples_through_data)
        return out


def _triples_through_data(grad: torch.Tensor) -> None:
    grad.data.mul_(3)  # (no version bump)


def _halves_grad_through_data(param: torch.Tensor) -> None:
    param.grad.data.mul_(0.5)  # (no version bump either)


@pytest.mark.parametrize("device", DEVICES)
def test_writes_through_data_found_on_the_device_after_the_pass(
    monkeypatch: pytest.MonkeyPatch, device: str
) -> None:
    """Hooks given a device's tensors (a forward hook, a tensor hook, a post-accumulate-grad
    hook, each writing through ``.data``): their bits are compared on the device and the
    answer read after the pass; no sync in it. On the CPU that path is taken here by force (a
    CPU tensor's answer is read at once), with the read refused inside the passes. Either way each event's ``changed``, the values seen after the writes and the gradients
    are those of the CPU's own path."""
    from gradtrace.engine import model_hooks

    def model() -> nn.Module:
        torch.manual_seed(6)
        net = nn.Sequential(nn.Linear(4, 5), _TripledGradient(), nn.Linear(5, 1)).to(device)
        net[0].register_forward_hook(_doubles_output_through_data)
        net[2].weight.register_post_accumulate_grad_hook(_halves_grad_through_data)
        return net

    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(7)).to(device)

    def make() -> gradtrace.Trace:
        return gradtrace.trace(model(), x, _total)

    at_once = gradtrace.trace(model().cpu(), x.cpu(), _total)
    with monkeypatch.context() as patch:
        if device == "cpu":
            patch.setattr(model_hooks, "_compared_now", lambda _given: False)
            passes = PassGuard(device)
            read = model_hooks._read

            def refusing_read(differs: list[Any]) -> list[bool]:
                if passes.depth:
                    raise HostTransfer("the hooks' comparisons read during a pass")
                return read(differs)

            patch.setattr(model_hooks, "_read", refusing_read)
            block, backward_pass, settle = run._capture, TraceSession.backward_pass, TraceSession._settle
            # (trace()'s block guarded as a whole, but for the moments between passes, _settle)
            patch.setattr(run, "_capture", lambda s, **k: _during(passes, "forward", lambda: block(s, **k)))
            patch.setattr(
                TraceSession,
                "backward_pass",
                lambda s, kind, of, step, call, **k: backward_pass(
                    s, kind, of, step, lambda: _during(passes, "backward", call), **k
                ),
            )
            patch.setattr(TraceSession, "_settle", lambda s: _paused(passes, lambda: settle(s)))
        later = _same_trace_under_the_guard(make, patch, device)
    changed = [(e.kind, e.target, e.payload["changed"]) for e in later.events if e.hook is not None]
    assert changed == [(e.kind, e.target, e.payload["changed"]) for e in at_once.events if e.hook is not None]
    assert ("module_forward", "0", True) in changed
    assert ("post_accumulate_grad", "2.weight", True) in changed
    assert sum(kind == "tensor_hook" and was for kind, _target, was in changed) == 1
    (given,) = [e for e in later.events if e.kind == "module_forward_pre" and e.module == "1"]
    (then,) = [e for e in at_once.events if e.kind == "module_forward_pre" and e.module == "1"]
    assert np.array_equal(later.array(given.payload["inputs"][0]), at_once.array(then.payload["inputs"][0]))
    for name, grad in at_once.grads.items():
        assert np.array_equal(later.grads[name], grad), name


def _during(guard: PassGuard, kind: str, run: Callable[[], Any]) -> Any:
    with guard.during(kind):
        return run()


def _paused(guard: PassGuard, run: Callable[[], Any]) -> Any:
    with guard.paused():
        return run()
