"""The backward recording against PyTorch: .grad as the engine leaves it, norms as torch
computes them."""

from __future__ import annotations

import torch
from torch import nn

import gradtrace


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
