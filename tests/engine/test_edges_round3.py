"""True at the edges, round three (issue 36): forward-mode AD, tensors without a storage of their
own, and more. The oracle is always the same program run without gradtrace: the same seed, the
same model, its gradients compared with torch.equal; or, where gradtrace cannot follow, a refusal
that names what it refused with the partial trace attached.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from edge_models import Logged, PartlyCompiled
from torch import nn

import gradtrace
from gradtrace.engine import UnreadableTensor


def _same_as_plain(model: nn.Module, x: torch.Tensor, loss_fn: Callable | None = None) -> gradtrace.Trace:
    """Trace ``model(x)`` and check every final gradient against a plain run of a copy."""
    plain, x_plain = copy.deepcopy(model), x.detach().clone().requires_grad_(x.requires_grad)
    out = plain(x_plain)
    (loss_fn(out) if loss_fn else out if out.numel() == 1 else out.sum()).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the diagnostics' warnings: not what is compared)
        trace = gradtrace.trace(model, x, loss_fn)
    expected = {name: p.grad for name, p in plain.named_parameters()}
    if x.requires_grad:
        expected["x"] = x_plain.grad
    assert set(trace.grads) == set(expected)
    for name, grad in expected.items():
        assert grad is not None, name
        assert torch.equal(torch.from_numpy(trace.grads[name]), grad), name
    return trace


# ---- 1. forward-mode AD: ZeroTensor tangents --------------------------------------------------
class _DualInForward(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with fwAD.dual_level():
            primal, tangent = fwAD.unpack_dual(self.lin(fwAD.make_dual(x, torch.ones_like(x))).tanh())
        return (primal * tangent).sum()


class _Jvp(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, tangent = torch.func.jvp(lambda z: self.lin(z).tanh(), (x,), (torch.ones_like(x),))
        return (out * tangent).sum()


class _Jacfwd(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.func.jacfwd(lambda z: self.lin(z).tanh().sum(-1))(x).sum()


class _Hessian(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.lin = nn.Linear(n, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.func.hessian(lambda z: self.lin(z).tanh().sum())(x).sum()


@pytest.mark.parametrize("n", [3, 40])  # (40: past the summarizer's small-tensor batches)
@pytest.mark.parametrize("model_class", [_DualInForward, _Jvp, _Jacfwd, _Hessian])
def test_forward_mode_ad_traces_with_the_plain_runs_grads(model_class: type[nn.Module], n: int) -> None:
    torch.manual_seed(0)
    model = model_class(n)
    x = (
        torch.randn(n, requires_grad=True)
        if model_class is _Hessian
        else torch.randn(2, n, requires_grad=True)
    )
    _same_as_plain(model, x)


def test_a_zero_tensor_is_summarised_as_zeros() -> None:
    from gradtrace.engine.summarize import Summarizer

    summarize = Summarizer(10_000, 10_000)
    small, large = torch._efficientzerotensor(3), torch._efficientzerotensor(50, 40)
    records = [summarize(small), summarize(large), summarize.final(small)]
    summarize.finalize()
    assert records[0].values == [0.0, 0.0, 0.0]
    for record in records:
        assert (record.stats.min, record.stats.max, record.stats.norm) == (0.0, 0.0, 0.0)


# ---- 1 and 2. tensors with no storage of their own: refused by name, the partial trace attached --
class _WrapperParameter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from torch.testing._internal.two_tensor import TwoTensor

        w = torch.randn(3, 3)
        self.w = nn.Parameter(TwoTensor(w, w.clone()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.w).relu().sum()


class _Jagged(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = torch.nested.nested_tensor_from_jagged(self.lin(x), offsets=torch.tensor([0, 2, 5]))
        return rows.relu().values().sum()


def test_a_wrapper_subclass_parameter_is_refused_by_name_with_the_partial_trace() -> None:
    torch.manual_seed(0)
    model, x = _WrapperParameter(), torch.randn(2, 3)
    plain = copy.deepcopy(model)
    plain(x).backward()  # (plain PyTorch runs it)
    assert plain.w.grad is not None
    with pytest.raises(UnreadableTensor, match="TwoTensor .a __torch_dispatch__ wrapper subclass") as caught:
        gradtrace.trace(model, x)
    partial = caught.value.gradtrace_trace
    assert [e.kind for e in partial.doc.events if e.kind == "error"] == ["error"]
    assert model.w.grad is None  # (stopped in the forward, as the refusal says)


def test_a_jagged_nested_tensor_is_refused_by_name_with_the_partial_trace() -> None:
    torch.manual_seed(0)
    model, x = _Jagged(), torch.randn(5, 4)
    plain = copy.deepcopy(model)
    plain(x).backward()
    assert plain.lin.weight.grad is not None
    with pytest.raises(UnreadableTensor, match=r"a nested tensor \(layout jagged\)") as caught:
        gradtrace.trace(model, x)
    partial = caught.value.gradtrace_trace
    # the partial trace holds what ran before the nested tensor: the Linear layer's call
    assert any(e.kind == "module_forward" and e.module == "lin" for e in partial.doc.events)
    assert [e.kind for e in partial.doc.events if e.kind == "error"] == ["error"]


def test_a_jagged_nested_input_is_refused_with_the_partial_trace_it_can_assemble() -> None:
    lin = nn.Linear(4, 4)
    x = torch.nested.nested_tensor_from_jagged(torch.randn(5, 4), offsets=torch.tensor([0, 2, 5]))
    x.requires_grad_()
    with pytest.raises(UnreadableTensor, match="nested tensor") as caught:
        gradtrace.trace(lin, x, loss_fn=lambda out: out.values().sum())
    partial = caught.value.gradtrace_trace
    assert "x" not in partial.doc.values  # (left out, and said so)
    assert any(d.code == "unreadable_tensor" for d in partial.doc.analyses.diagnostics)


# ---- 4. a __torch_function__ subclass sees the calls of a plain run, no more ----------------------


def _double_its_gradient(module: nn.Module, args: tuple, out: torch.Tensor) -> None:
    out.register_hook(lambda g: g * 2)


class _LoggedModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.lin.register_forward_hook(_double_its_gradient)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.lin(x.as_subclass(Logged)) * 2).sum()


def test_a_torch_function_subclass_sees_the_call_list_of_a_plain_run() -> None:
    torch.manual_seed(0)
    model, x = _LoggedModel(), torch.randn(4, 3)
    plain_model = copy.deepcopy(model)
    Logged.calls = []
    plain_model(x).backward()
    plain = Logged.calls
    Logged.calls = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = gradtrace.trace(model, x)
    assert plain == ["linear", "register_hook", "mul", "sum", "backward"]
    assert Logged.calls == plain, Logged.calls
    for name, p in plain_model.named_parameters():
        assert torch.equal(torch.from_numpy(trace.grads[name]), p.grad), name


# ---- 5. a look-only tensor hook on a parameter: .grad is the engine's gradient, not a copy -------
def _grad_buffer(traced: bool) -> tuple[list[int], int, torch.Tensor]:
    """The data pointer of the gradient a look-only hook on ``weight`` saw, of the final
    ``weight.grad``, and that gradient."""
    torch.manual_seed(0)
    model, x = nn.Linear(30, 20), torch.randn(4, 30)
    seen: list[int] = []
    model.weight.register_hook(lambda g: seen.append(g.data_ptr()))
    if traced:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gradtrace.trace(model, x)
    else:
        model(x).sum().backward()
    assert model.weight.grad is not None
    return seen, model.weight.grad.data_ptr(), model.weight.grad


def test_a_look_only_tensor_hook_on_a_parameter_leaves_grad_the_engines_buffer() -> None:
    plain_seen, plain_ptr, plain_grad = _grad_buffer(traced=False)
    traced_seen, traced_ptr, traced_grad = _grad_buffer(traced=True)
    assert plain_seen == [plain_ptr]  # PyTorch steals the incoming gradient: no copy
    assert traced_seen == [traced_ptr]  # and so it does under the trace
    assert torch.equal(traced_grad, plain_grad)


# ---- 6. the optimizer stepped in post-accumulate-grad hooks (PyTorch's tutorial) ---------------
def _fused_optimizer(traced: bool) -> tuple[nn.Module, dict[str, torch.Tensor], gradtrace.Trace | None]:
    """The model after one fused step, and each parameter's gradient as its hook saw it."""
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)), torch.randn(5, 3)
    names = {p: name for name, p in model.named_parameters()}
    optimizers = {p: torch.optim.SGD([p], lr=0.1, momentum=0.9) for p in model.parameters()}
    seen: dict[str, torch.Tensor] = {}

    def step(p: torch.Tensor) -> None:
        assert p.grad is not None
        seen[names[p]] = p.grad.clone()
        optimizers[p].step()
        optimizers[p].zero_grad()  # (set_to_none: .grad is None again)

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(step)
    trace = None
    if traced:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trace = gradtrace.trace(model, x)
    else:
        model(x).sum().backward()
    return model, seen, trace


def test_an_optimizer_stepped_in_post_accumulate_hooks_is_told_not_read_as_no_gradient() -> None:
    plain, plain_seen, _ = _fused_optimizer(traced=False)
    model, seen, trace = _fused_optimizer(traced=True)
    assert trace is not None
    for (name, p), q in zip(model.named_parameters(), plain.parameters(), strict=True):
        assert torch.equal(p, q), name  # stepped exactly as the plain run steps
        assert p.grad is None and q.grad is None
        assert trace.grads[name] is None  # PyTorch's final .grad ...
        assert torch.equal(seen[name], plain_seen[name])
    # ... and a diagnostic that says it is not "no gradient"
    [cleared] = [d for d in trace.doc.analyses.diagnostics if d.code == "grad_cleared"]
    assert all(name in cleared.message for name in trace.grads)
    # the gradients written are in the trace, equal to what the hooks saw
    nodes = {n.id: n.tensor for n in trace.doc.graph.nodes}
    writes = {nodes[e.target]: e.payload["after"] for e in trace.doc.events if e.kind == "grad_write"}
    for name, grad in plain_seen.items():
        assert torch.equal(torch.from_numpy(trace.array(writes[name])), grad), name


# ---- 7. grad modes: PyTorch's own errors, the partial trace attached ----------------------------
def _plain_error(model: nn.Module, x: torch.Tensor) -> Exception:
    with pytest.raises(RuntimeError) as caught:
        model(x).sum().backward()
    return caught.value


def test_an_input_made_in_inference_mode_gets_pytorchs_own_error() -> None:
    model = nn.Linear(3, 2)
    with torch.inference_mode():
        x = torch.randn(4, 3)
    expected = _plain_error(copy.deepcopy(model), x)
    assert "Inference tensors cannot be saved for backward" in str(expected)
    with pytest.raises(RuntimeError) as caught:
        gradtrace.trace(model, x)
    assert (type(caught.value), str(caught.value)) == (type(expected), str(expected))
    partial = caught.value.gradtrace_trace
    assert [e.message for e in partial.doc.events if e.kind == "error"] == [str(expected)]


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_a_trace_under_a_no_grad_mode_stops_where_a_plain_run_stops(mode: Callable) -> None:
    model, x = nn.Linear(3, 2), torch.randn(4, 3)
    with mode():
        expected = _plain_error(copy.deepcopy(model), x)
        with pytest.raises(RuntimeError) as caught:
            gradtrace.trace(model, x)
    assert str(expected) == "element 0 of tensors does not require grad and does not have a grad_fn"
    assert (type(caught.value), str(caught.value)) == (type(expected), str(expected))
    partial = caught.value.gradtrace_trace
    assert partial.grads == {"weight": None, "bias": None}
    assert model.weight.grad is None


# ---- 8. warnings from a model whose code is in no file --------------------------------------------
_WARNING_PROGRAM = """
import torch, warnings
from torch import nn
import gradtrace
class Warns(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 1)
    def forward(self, x):
        warnings.warn("the model warns")
        return self.lin(x).sum()
torch.manual_seed(0)
Warns()(torch.randn(2, 3)).backward()
print("plain done", file=__import__("sys").stderr, flush=True)
gradtrace.trace(Warns(), torch.randn(2, 3))
print("traced done", file=__import__("sys").stderr, flush=True)
model = Warns()
with gradtrace.record():
    model(torch.randn(2, 3)).backward()
"""


@pytest.mark.parametrize("where", ["file", "-c", "stdin"])
def test_a_models_warning_reaches_the_caller_wherever_its_code_is(where: str, tmp_path: Path) -> None:
    """The same program warns once in a plain run, once in the trace and once under record():
    all reach stderr, as the same line (``-W always``: every warning shown)."""
    script = tmp_path / "model.py"
    script.write_text(_WARNING_PROGRAM)
    command = [sys.executable, "-W", "always::UserWarning"]
    command += {"file": [str(script)], "-c": ["-c", _WARNING_PROGRAM], "stdin": ["-"]}[where]
    env = {**os.environ, "PYTHONPATH": str(Path(gradtrace.__file__).parents[1])}
    done = subprocess.run(
        command,
        input=_WARNING_PROGRAM if where == "stdin" else None,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    plain, rest = done.stderr.split("plain done\n")
    traced, recorded = rest.split("traced done\n")
    name = {"file": str(script), "-c": "<string>", "stdin": "<stdin>"}[where]
    expected = f"{name}:10: UserWarning: the model warns"
    warned = [line for line in plain.splitlines() if "the model warns" in line]
    assert warned[0] == expected  # (then, from a file, its source line)
    assert [line for line in traced.splitlines() if "the model warns" in line] == warned
    assert [line for line in recorded.splitlines() if "the model warns" in line] == warned  # record() too


# ---- 9. the spec's zero_grad, and its program at one thread -------------------------------------
_TWO_STEPS = {
    "spec_version": 1,
    "title": "Two steps with an input that requires grad",
    "seed": 3,
    "modules": {"lin": {"type": "Linear", "in_features": 3, "out_features": 2}},
    "inputs": {"x": {"shape": [4, 3], "requires_grad": True}},
    "forward": ["y = lin(x)", "loss = (y * y).sum()"],
    "steps": [
        {"do": "backward", "of": "loss"},
        {"do": "sgd_step", "lr": 0.1},
        {"do": "zero_grad"},
        {"do": "forward"},
        {"do": "backward", "of": "loss"},
    ],
}


def test_the_specs_zero_grad_clears_the_inputs_too_and_its_program_says_so() -> None:
    """The spec's zero_grad clears every leaf: its PyTorch program writes ``x.grad = None``, and,
    run at one thread (the service's), gives the trace's gradients exactly. The same program with
    only ``optimizer.zero_grad()`` accumulates the input's gradient (README: "The spec's
    zero_grad step clears every leaf's .grad")."""
    from gradtrace.spec.translate import spec_to_python

    trace = gradtrace.trace_spec(_TWO_STEPS)
    source = spec_to_python(_TWO_STEPS)
    assert "x.grad = None" in source
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        program: dict = {}
        exec(compile(source, "<translated>", "exec"), program)  # noqa: S102 - our own program
        as_optimizer: dict = {}
        exec(compile(source.replace("x.grad = None", "pass"), "<optimizer>", "exec"), as_optimizer)  # noqa: S102
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(torch.from_numpy(trace.grads["x"]), program["x"].grad)
    for name, p in program["lin"].named_parameters():
        assert torch.equal(torch.from_numpy(trace.grads[f"lin.{name}"]), p.grad), name
    # optimizer.zero_grad() alone leaves the input's first gradient to accumulate onto
    assert not torch.equal(as_optimizer["x"].grad, program["x"].grad)
    assert torch.equal(as_optimizer["lin"].weight.grad, program["lin"].weight.grad)


# ---- 3. a warm torch.compile'd submodule: no recompile, the plain run's engine order ---------------


def _engine_order(model: nn.Module, x: torch.Tensor) -> tuple[list[str], list[str]]:
    """A plain backward's op nodes in the engine's order (pre-hooks), and the order in which
    the parameters' gradients were written (post-accumulate-grad hooks)."""
    out = model(x).sum()
    ops: list[str] = []
    seen: set[Any] = set()
    stack = [out.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen or type(fn).__name__ == "AccumulateGrad":
            continue
        seen.add(fn)
        fn.register_prehook(lambda grads, name=type(fn).__name__: ops.append(name))
        stack += [next_fn for next_fn, _ in fn.next_functions]
    written: list[str] = []
    handles = [
        p.register_post_accumulate_grad_hook(lambda p, name=name: written.append(name))
        for name, p in model.named_parameters()
    ]
    out.backward()
    for handle in handles:
        handle.remove()
    return ops, written


@pytest.fixture
def fresh_dynamo() -> Any:
    """Dynamo's caches emptied before and after: its code caches are shared by every compiled
    module of the process (its recompile limit counts them all), and a test that reaches the
    limit on purpose must not leave later tests' modules running eagerly."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _dynamo_graphs() -> tuple[int, int]:
    from torch._dynamo.utils import counters

    return counters["frames"]["total"], counters["stats"]["unique_graphs"]


def _codes(trace: gradtrace.Trace) -> list[str]:
    return [d.code for d in trace.doc.analyses.diagnostics]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_warm_compiled_submodule_is_not_recompiled_and_keeps_the_plain_engine_order(
    backend: str, fresh_dynamo: None
) -> None:
    torch.manual_seed(0)
    model, x = PartlyCompiled(backend), torch.randn(3, 4)
    # a hook of the model's inside the compiled module: left as it is (no recording state in
    # it: Dynamo would guard on that state, in a plain run too)
    model.b._orig_mod[0].register_forward_hook(lambda module, args, out: None)
    model(x).sum().backward()  # warm: compiled once, as a plain program would be
    ops, written = _engine_order(model, x)
    before = _dynamo_graphs()
    for _ in range(10):
        model.zero_grad()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trace = gradtrace.trace(model, x, lambda out: out.sum())
        assert "compiled_during_trace" not in _codes(trace) and "compiled_fell_back" not in _codes(trace)
    assert _dynamo_graphs() == before  # no new Dynamo frame, no new graph over 10 traces
    nodes = {n.id: n for n in trace.doc.graph.nodes}
    pres = [nodes[e.node] for e in trace.doc.events if e.kind == "node_pre"]
    assert [n.op for n in pres if n.op != "AccumulateGrad"] == ops
    writes = [nodes[e.target].tensor for e in trace.doc.events if e.kind == "grad_write"]
    assert writes == written
    if backend == "aot_eager":
        assert "CompiledFunctionBackward" in ops
    plain = copy.deepcopy(model)
    plain.zero_grad()
    plain(x).sum().backward()
    for name, p in plain.named_parameters():
        assert torch.equal(torch.from_numpy(trace.grads[name]), p.grad), name


@pytest.mark.slow
def test_a_compiled_submodule_that_falls_back_to_eager_in_the_trace_says_so(fresh_dynamo: None) -> None:
    torch.manual_seed(0)
    model = PartlyCompiled("eager")
    model(torch.randn(3, 4)).sum().backward()  # warm, for one shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # a new shape needs a new graph, past a recompile limit of 1: Dynamo runs eager code
        with torch._dynamo.config.patch(recompile_limit=1):
            fell_back = gradtrace.trace(model, torch.randn(6, 4), lambda out: out.sum())
    assert "compiled_fell_back" in _codes(fell_back)
    assert "TanhBackward0" in {n.op for n in fell_back.doc.graph.nodes}  # the eager code's nodes


class _Scaled(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * 3


@pytest.mark.slow
def test_a_compiled_submodule_compiled_in_the_trace_says_so(fresh_dynamo: None) -> None:
    model = nn.Sequential(nn.Linear(4, 4), torch.compile(_Scaled(), backend="eager"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cold = gradtrace.trace(model, torch.randn(2, 4))
        warm = gradtrace.trace(model, torch.randn(2, 4))
    assert "compiled_during_trace" in _codes(cold)  # its first call: compiled then, as in a plain run
    assert "compiled_during_trace" not in _codes(warm)
