"""At the edges of what a model's forward may use: torch.func transforms, parametrizations and
torch.compile'd submodules. The oracle is always a clean run of the same model without gradtrace.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import torch
from edge_models import PartlyCompiled
from torch import nn
from torch.nn.utils import parametrizations, parametrize

import gradtrace


def _plain(model: nn.Module, x: torch.Tensor, loss_fn: Callable[[Any], torch.Tensor]) -> dict[str, Any]:
    """A clean run: every parameter's and the input's .grad, and the node types of its graph."""
    x = x.detach().clone().requires_grad_(x.requires_grad)
    loss = loss_fn(model(x))
    nodes: Counter[str] = Counter()
    seen: set[Any] = set()
    stack = [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        nodes[type(fn).__name__] += 1
        stack += [next_fn for next_fn, _ in fn.next_functions]
    loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    if x.requires_grad:
        grads["x"] = x.grad
    return {"grads": grads, "nodes": nodes}


def _same_grads(trace: gradtrace.Trace, expected: dict[str, torch.Tensor | None]) -> None:
    assert set(trace.grads) == set(expected)
    for name, grad in expected.items():
        assert grad is not None
        assert torch.equal(torch.from_numpy(trace.grads[name]), grad), name


def _op_counts(trace: gradtrace.Trace) -> Counter[str]:
    """The trace's op nodes the loss's backward reaches, by type (the forward may make others,
    e.g. orthogonal's parametrization, that no gradient reaches: the plain graph has them too,
    unreachable)."""
    doc = trace.doc
    [loss] = [n.id for n in doc.graph.nodes if n.tensor == "loss" and n.kind == "op"]
    inputs: dict[str, list[str]] = {}
    for edge in doc.graph.edges:
        if edge.kind in ("data", "leaf"):
            inputs.setdefault(edge.target, []).append(edge.source)
    reached, stack = set(), [loss]
    while stack:
        node = stack.pop()
        if node not in reached:
            reached.add(node)
            stack += inputs.get(node, [])
    return Counter(n.op for n in doc.graph.nodes if n.id in reached and n.kind == "op" and n.op is not None)


# ---- torch.func inside forward --------------------------------------------------------------
class _FunctionalCall(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(self.lin, dict(self.lin.named_parameters()), (x,))


class _Vmap(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.vmap(lambda row: self.lin(row).tanh())(x)


class _Jacrev(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        jacobian = torch.func.jacrev(lambda row: self.lin(row).tanh())(x[0])
        return jacobian.sum() * x.sum()


@pytest.mark.parametrize("model_class", [_FunctionalCall, _Vmap, _Jacrev])
def test_torch_func_inside_forward_traces_with_the_plain_runs_grads(model_class: type[nn.Module]) -> None:
    torch.manual_seed(0)
    model = model_class()
    x = torch.randn(4, 3, requires_grad=True)
    plain = _plain(copy.deepcopy(model), x, lambda out: out.sum())
    trace = gradtrace.trace(model, x, lambda out: out.sum())
    _same_grads(trace, plain["grads"])
    if model_class is not _Jacrev:  # (jacrev's own inner graph is recorded too: more nodes)
        assert _op_counts(trace) == plain["nodes"]
    assert gradtrace.Trace.from_json(trace.to_json()).to_json() == trace.to_json()


def test_a_vmapped_module_shows_the_whole_batch_it_ran_on_and_says_so() -> None:
    torch.manual_seed(0)
    model = _Vmap()
    x = torch.randn(4, 3)
    trace = gradtrace.trace(model, x, lambda out: out.sum())
    [pre] = [e for e in trace.doc.events if e.kind == "module_forward_pre" and e.module == "lin"]
    [value] = pre.payload["inputs"]
    # the wrapper stands for one row; what it wraps, the batch, is what is read
    assert value["shape"] == [4, 3]
    assert torch.equal(torch.from_numpy(trace.array(value)), x)
    [note] = [d for d in trace.doc.analyses.diagnostics if d.code == "functorch_value"]
    assert note.module == "lin" and "vmap (batch dim 0 of size 4)" in note.message


def test_values_inside_jacrev_are_the_numbers_their_wrappers_hold_and_name_their_nodes() -> None:
    torch.manual_seed(0)
    model = _Jacrev()
    x = torch.randn(4, 3)
    trace = gradtrace.trace(model, x, lambda out: out.sum())
    pre = next(e for e in trace.doc.events if e.kind == "module_forward_pre" and e.module == "lin")
    [value] = pre.payload["inputs"]
    assert value["shape"] == [3]
    assert torch.equal(torch.from_numpy(trace.array(value)), x[0])  # a grad wrapper: the same numbers
    notes = [d for d in trace.doc.analyses.diagnostics if d.code == "functorch_value"]
    named = {d.node for d in notes if d.node is not None}
    assert named and named <= {n.id for n in trace.doc.graph.nodes}
    ops = {n.id: n.op for n in trace.doc.graph.nodes}
    assert "TanhBackward0" in {ops[node] for node in named}  # the inner graph's nodes, by id
    assert any(d.module == "lin" for d in notes)


# ---- parametrizations -----------------------------------------------------------------------
class _Counted(nn.Module):
    """An identity parametrization that counts how often the model computes its weight."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return weight * 1.0


def _parametrized(kind: str) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3))
    for layer in (model[0], model[2]):
        if kind == "counted":
            parametrize.register_parametrization(layer, "weight", _Counted())
        else:
            getattr(parametrizations, kind)(layer)
    return model


@pytest.mark.parametrize("kind", ["weight_norm", "spectral_norm", "orthogonal", "counted"])
def test_parametrized_model_leaves_the_trace_as_a_plain_run_leaves_it(kind: str) -> None:
    model = _parametrized(kind)
    twin = copy.deepcopy(model)
    for counted in [m for m in [*model.modules(), *twin.modules()] if isinstance(m, _Counted)]:
        counted.calls = 0  # (registering computed the weight once)
    x = torch.randn(6, 4)

    def loss_fn(out: torch.Tensor) -> torch.Tensor:
        return out.pow(2).sum()

    plain = _plain(twin, x, loss_fn)
    trace = gradtrace.trace(model, x, loss_fn)
    _same_grads(trace, plain["grads"])
    for (name, mine), (_, theirs) in zip(model.named_parameters(), twin.named_parameters(), strict=True):
        assert torch.equal(mine.grad, theirs.grad), name
    # the buffers too: spectral_norm's _u and _v step once per forward, orthogonal's base
    buffers = dict(twin.named_buffers())
    assert [name for name, _ in model.named_buffers()] == list(buffers)
    for name, buffer in model.named_buffers():
        assert torch.equal(buffer, buffers[name]), name
    if kind == "counted":  # the model's code ran exactly as often as in the plain run
        counts = [m.calls for m in model.modules() if isinstance(m, _Counted)]
        assert counts == [m.calls for m in twin.modules() if isinstance(m, _Counted)] == [1, 1]
    assert _op_counts(trace) == plain["nodes"]


# ---- torch.compile'd submodules ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_compiled_submodule_traces_to_the_plain_runs_graph(backend: str) -> None:
    torch.manual_seed(0)
    model = PartlyCompiled(backend)
    twin = copy.deepcopy(model)
    x = torch.randn(3, 4)
    plain = _plain(twin, x, lambda out: out.sum())
    if backend == "aot_eager":  # one compiled region: one node for its backward
        assert plain["nodes"]["CompiledFunctionBackward"] == 1
    trace = gradtrace.trace(model, x, lambda out: out.sum())
    _same_grads(trace, plain["grads"])
    assert _op_counts(trace) == plain["nodes"]
    codes = [d.code for d in trace.doc.analyses.diagnostics]
    assert "torch_warning" not in codes  # neither Dynamo's nor torch's: gradtrace stayed invisible
    [compiled] = [d for d in trace.doc.analyses.diagnostics if d.code == "compiled_module"]
    assert compiled.module == "b"
    # gradtrace's hooks are gone afterwards: the compiled module runs as before
    again = _plain(model, x, lambda out: out.sum())
    assert again["nodes"] == plain["nodes"]
