"""Spec hooks and their declarative actions, against the same hooks written in plain torch."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import gradtrace

W = [[0.5, -0.3], [0.2, 0.8]]
B = [0.1, -0.2]
X = [[1.0, -2.0]]


def _spec(hook: dict[str, Any]) -> dict[str, Any]:
    return {
        "spec_version": 1,
        "title": "hooks",
        "modules": {
            "lin": {"type": "Linear", "in_features": 2, "out_features": 2, "init": {"weight": W, "bias": B}}
        },
        "inputs": {"x": {"value": X, "requires_grad": True}},
        "forward": ["h = lin(x)", "loss = (tanh(h) ** 2).sum()"],
        "hooks": [hook],
    }


def _apply(action: dict[str, Any], t: torch.Tensor) -> torch.Tensor:
    op = action["op"]
    if op == "scale":
        return t * action["by"]
    if op == "add":
        return t + action["by"]
    if op == "zero":
        return torch.zeros_like(t)
    return t.clamp(min=action.get("min"), max=action.get("max"))


def _oracle(hook: dict[str, Any]) -> dict[str, torch.Tensor]:
    lin = nn.Linear(2, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(W))
        lin.bias.copy_(torch.tensor(B))
    x = torch.tensor(X, requires_grad=True)
    act = hook["action"]
    kind = hook["type"]
    if kind == "forward_pre":
        lin.register_forward_pre_hook(lambda m, args: (_apply(act, args[0]),))
    elif kind == "forward":
        lin.register_forward_hook(lambda m, args, out: _apply(act, out))
    elif kind == "full_backward_pre":
        lin.register_full_backward_pre_hook(lambda m, go: (_apply(act, go[0]),))
    elif kind == "full_backward":
        lin.register_full_backward_hook(lambda m, gi, go: (_apply(act, gi[0]),))
    elif kind == "tensor":
        x.register_hook(lambda g: _apply(act, g))
    elif kind == "post_accumulate_grad":

        def post(p: torch.Tensor) -> None:
            with torch.no_grad():
                p.grad.copy_(_apply(act, p.grad))

        x.register_post_accumulate_grad_hook(post)
    (torch.tanh(lin(x)) ** 2).sum().backward()
    return {"x": x.grad, "lin.weight": lin.weight.grad, "lin.bias": lin.bias.grad}


CASES = [
    {"module": "lin", "type": "forward_pre", "action": {"op": "scale", "by": 0.5}},
    {"module": "lin", "type": "forward", "action": {"op": "add", "by": 1.0}},
    {"module": "lin", "type": "full_backward_pre", "action": {"op": "clamp", "min": -0.1, "max": 0.1}},
    {"module": "lin", "type": "full_backward", "action": {"op": "zero"}},
    {"tensor": "x", "type": "tensor", "action": {"op": "scale", "by": -3.0}},
    {"tensor": "x", "type": "post_accumulate_grad", "action": {"op": "add", "by": 10.0}},
]


@pytest.mark.parametrize("hook", CASES, ids=[c["type"] for c in CASES])
def test_hook_action_matches_plain_torch(hook: dict[str, Any]) -> None:
    trace = gradtrace.trace_spec(_spec(hook))
    expected = _oracle(hook)
    for name, grad in expected.items():
        got = torch.from_numpy(trace.grads[name])
        assert torch.equal(got, grad), (name, got, grad)
    doc = trace.doc
    [action] = [e for e in doc.events if e.kind == "hook_action"]
    assert action.hook == 0 and action.payload["action"]["op"] == hook["action"]["op"]
    before = action.payload["before"][0]["values"]
    after = action.payload["after"][0]["values"]
    want = _apply(hook["action"], torch.tensor(before)).tolist()
    assert after == pytest.approx(want, abs=1e-7)
    fired = [e for e in doc.events if e.hook == 0 and e.kind != "hook_action"]
    assert len(fired) == 1
    between = [e.kind for e in doc.events[fired[0].seq + 1 : action.seq]]
    assert set(between) <= {"node_created"}  # the action follows its hook (its own ops aside)
    if "module" in hook:
        [info] = [m for m in doc.graph.modules if m.path == "lin"]
        assert [h.type for h in info.hooks] == [hook["type"]]
