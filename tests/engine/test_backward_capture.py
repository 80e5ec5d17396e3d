"""The backward recording against PyTorch: .grad as the engine leaves it, norms as torch
computes them."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import gradtrace
from gradtrace.engine.grad_norms import grad_norm, grad_norms


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))


def test_a_leaf_takes_its_incoming_gradient_as_grad_as_without_the_trace() -> None:
    """Recording does not make AccumulateGrad copy the gradient into a new .grad (it copies
    when someone else holds the tensor): grad_write's "after" is the very record node_pre of
    the AccumulateGrad saw, and the final .grad values are PyTorch's."""
    x = torch.randn(5, 4)
    model = _mlp()
    oracle = torch.autograd.grad(model(x).pow(2).sum(), list(model.parameters()))
    model.zero_grad(set_to_none=True)
    trace = gradtrace.trace(model, x, lambda out: out.pow(2).sum())
    events = trace.doc.events
    writes = [e for e in events if e.kind == "grad_write"]
    assert len(writes) == 4
    for write in writes:
        pre = next(e for e in reversed(events[: write.seq]) if e.kind == "node_pre")
        assert trace.doc.graph.nodes[int(pre.node[1:])].variable == write.node
        assert write.payload["after"] is pre.payload["grad_outputs"][0]
    for (name, p), expected in zip(model.named_parameters(), oracle, strict=True):
        assert torch.equal(p.grad, expected), name


class _SparseAndDense(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(10, 4, sparse=True)  # a sparse .grad: norms one by one
        self.head = nn.Linear(4, 2)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(idx))


def _expected_norms(model: nn.Module) -> dict[str, float]:
    return {
        name: float(torch.linalg.vector_norm(p.grad.to_dense().to(torch.float64)))
        for name, p in model.named_parameters()
    }


def test_grad_norms_per_pass_are_torchs_float64_norms() -> None:
    for model, x in [(_mlp(), torch.randn(5, 4)), (_SparseAndDense(), torch.tensor([[1, 3, 3]]))]:
        model.zero_grad(set_to_none=True)
        model(x).pow(2).sum().backward()
        expected = _expected_norms(model)
        model.zero_grad(set_to_none=True)
        trace = gradtrace.trace(model, x, lambda out: out.pow(2).sum())
        backward = next(p.index for p in trace.doc.passes if p.phase == "backward")
        got = {n.name: n.norm for n in trace.doc.analyses.grad_norms if n.pass_index == backward}
        assert got == expected


def test_batched_grad_norms_equal_one_by_one_bit_for_bit() -> None:
    """Stacked rows (same shape, small), a float64 reduction each (the rest), one by one
    (sparse): the same float64 numbers as torch.linalg.vector_norm of each gradient."""
    torch.manual_seed(0)
    grads = []
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        for shape in [(8, 8)] * 3 + [(8,)] * 3 + [(), (0, 4), (3, 5), (70, 70)]:
            grads.append(torch.randn(shape).to(dtype) * 7)
        grads.append(torch.randn(400, 300).to(dtype).t() * 7)  # large, not contiguous
    grads.append(torch.tensor([float("inf"), 1.0]))
    grads.append(torch.tensor([float("nan"), 1.0]))
    named = [(f"p{k}", None, g) for k, g in enumerate(grads)]
    expected = [grad_norm(name, module, 3, g) for name, module, g in named]
    assert grad_norms(named, 3) == expected
    mixed = [*named, ("sparse", None, torch.eye(3).to_sparse())]
    assert grad_norms(mixed, 3) == [*expected, grad_norm("sparse", None, 3, torch.eye(3))]
    # a create_graph gradient (requires grad) and shapes of its group's
    graph_grads = [(f"g{k}", "m", torch.randn(8, 8, requires_grad=True) * 3) for k in range(3)]
    assert grad_norms(graph_grads, None) == [grad_norm(n, m, None, g) for n, m, g in graph_grads]


class _Tied(nn.Module):
    """One Linear applied twice: its AccumulateGrad sums two incoming gradients."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(torch.tanh(self.layer(x)))


def test_a_shared_weight_sums_both_gradients_and_records_the_sum() -> None:
    x = torch.randn(3, 4)
    model = _Tied()
    oracle = torch.autograd.grad(model(x).pow(2).sum(), list(model.parameters()))
    trace = gradtrace.trace(model, x, lambda out: out.pow(2).sum())
    nodes = trace.doc.graph.nodes
    writes = {nodes[int(e.target[1:])].tensor: e for e in trace.doc.events if e.kind == "grad_write"}
    assert sorted(writes) == ["layer.bias", "layer.weight"]
    for (name, p), expected in zip(model.named_parameters(), oracle, strict=True):
        assert torch.equal(p.grad, expected), name
        write = writes[name]
        assert write.payload["before"] is None and not write.payload["accumulated"]
        after = trace.array(write.payload["after"])
        assert np.array_equal(after, expected.numpy()), name


def test_a_models_own_post_accumulate_hook_fires_after_the_write_is_recorded() -> None:
    """A post-accumulate hook the model registered before the trace (it doubles ``.grad``):
    the grad_write comes first, with the gradient PyTorch wrote (autograd.grad as oracle),
    then the hook's event; the final ``.grad`` is the doubled one; no hook is left behind."""
    x = torch.randn(5, 4)
    model = _mlp()
    weight = model[0].weight
    oracle = torch.autograd.grad(model(x).pow(2).sum(), weight)[0]
    model.zero_grad(set_to_none=True)

    def double(p: torch.Tensor) -> None:
        p.grad.mul_(2)

    handle = weight.register_post_accumulate_grad_hook(double)
    before = dict(weight._post_accumulate_grad_hooks)
    trace = gradtrace.trace(model, x, lambda out: out.pow(2).sum())
    assert dict(weight._post_accumulate_grad_hooks) == before  # (the model's wrapper restored)
    events = trace.doc.events
    leaf = next(n.id for n in trace.doc.graph.nodes if n.tensor == "0.weight")
    kinds = [e.kind for e in events if e.node == leaf and e.kind in ("grad_write", "post_accumulate_grad")]
    assert kinds == ["grad_write", "post_accumulate_grad"]
    write = next(e for e in events if e.node == leaf and e.kind == "grad_write")
    np.testing.assert_allclose(trace.array(write.payload["after"]), oracle.numpy(), rtol=1e-6)
    assert torch.allclose(weight.grad, 2 * oracle)
    handle.remove()
    assert not weight._post_accumulate_grad_hooks


def _incoming_gradient_addresses(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, list]]:
    """A graph kept alive (its AccumulateGrad nodes are the ones the next forward uses) and a
    pre-hook on each parameter's AccumulateGrad noting the address of the gradient the engine
    hands it (the address only: holding the tensor would make PyTorch copy it)."""
    kept = model(x)
    seen: dict[str, list] = {}
    for name, p in model.named_parameters():
        node = p.view_as(p).grad_fn.next_functions[0][0]  # (the parameter's AccumulateGrad)
        seen[name] = []
        node.register_prehook(lambda go, out=seen[name]: out.append(go[0].data_ptr()))
    return kept, seen


def test_accumulate_grad_still_takes_the_engines_gradient_itself_as_grad() -> None:
    """The recording keeps no reference to a gradient on its way to a leaf (it summarizes a
    detached alias, and the AccumulateGrad's hooks recognize the tensor by a weak reference):
    each .grad lies where the engine's gradient lay, as in a backward without the trace."""
    x = torch.randn(5, 4)
    model = _mlp()
    kept, seen = _incoming_gradient_addresses(model, x)
    model(x).pow(2).sum().backward()
    plain = {name: p.grad.data_ptr() for name, p in model.named_parameters()}
    assert plain == {name: addresses[-1] for name, addresses in seen.items()}  # (the oracle holds)
    model.zero_grad(set_to_none=True)
    trace = gradtrace.trace(model, x, lambda out: out.pow(2).sum())
    assert {name: p.grad.data_ptr() for name, p in model.named_parameters()} == {
        name: addresses[-1] for name, addresses in seen.items()
    }
    assert len(trace.doc.passes) == 2 and kept is not None


def _triple_data(g: torch.Tensor) -> None:
    g.data = g * 3


class _HookedBias(nn.Module):
    """A tensor hook on a leaf changes the gradient between its producer and its
    AccumulateGrad: it returns a new tensor, writes into the engine's tensor in place, or
    gives the engine's tensor other memory (``.data``: no version bump)."""

    def __init__(self, how: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer = nn.Linear(4, 3)
        hooks = {"new": lambda g: g * 3, "in place": lambda g: g.mul_(3), "data": _triple_data}
        self.layer.bias.register_hook(hooks[how])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


def test_a_gradient_a_tensor_hook_changed_reaches_the_accumulate_grad_as_changed() -> None:
    """The producer's node_post shows the gradient it sent, the AccumulateGrad's node_pre and
    the grad_write the one the hook made of it (new, or the same tensor changed): autograd.grad
    of the unhooked model as oracle."""
    x = torch.randn(5, 4)
    plain = nn.Linear(4, 3)
    for how in ("new", "in place", "data"):
        model = _HookedBias(how)
        plain.load_state_dict(model.layer.state_dict())
        sent = torch.autograd.grad(plain(x).pow(2).sum(), plain.bias)[0]
        trace = gradtrace.trace(model, x, lambda out: out.pow(2).sum())
        nodes = trace.doc.graph.nodes
        events = trace.doc.events
        accumulate = next(n for n in nodes if n.op == "AccumulateGrad" and n.tensor == "layer.bias")
        edge = next(e for e in trace.doc.graph.edges if e.source == accumulate.id)
        post = next(e for e in events if e.kind == "node_post" and e.node == edge.target)
        np.testing.assert_array_equal(trace.array(post.payload["grad_inputs"][edge.slot]), sent.numpy())
        pre = next(e for e in events if e.kind == "node_pre" and e.node == accumulate.id)
        np.testing.assert_array_equal(trace.array(pre.payload["grad_outputs"][0]), 3 * sent.numpy())
        write = next(e for e in events if e.kind == "grad_write" and e.node == accumulate.variable)
        np.testing.assert_array_equal(trace.array(write.payload["after"]), 3 * sent.numpy())
        assert torch.equal(model.layer.bias.grad, 3 * sent)
