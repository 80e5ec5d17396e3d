"""retain_grad(): an intermediate's .grad write is an event, in the order the engine makes it."""

from __future__ import annotations

import copy

import pytest
import torch

import gradtrace
from gradtrace.examples import get_example


def grad_writes_to(trace: dict, tensor: str) -> list[dict]:
    node_ids = {n["id"] for n in trace["graph"]["nodes"] if n.get("tensor") == tensor and n["kind"] == "op"}
    return [e for e in trace["events"] if e["kind"] == "grad_write" and e["node"] in node_ids]


def plain_torch_a0_grad() -> list[float]:
    spec = get_example("retain-grad-intermediate")
    x = torch.tensor(spec["inputs"]["x"]["value"])
    w0 = torch.tensor(spec["modules"]["W0"]["init"]["weight"], requires_grad=True)
    w1 = torch.tensor(spec["modules"]["W1"]["init"]["weight"], requires_grad=True)
    a0 = torch.nn.functional.linear(x, w0)
    a0.retain_grad()
    ((torch.nn.functional.linear(a0, w1)) ** 2).sum().backward()
    return a0.grad.flatten().tolist()


def test_retained_intermediate_grad_write_lands_before_its_node_runs() -> None:
    trace = gradtrace.trace_spec(get_example("retain-grad-intermediate")).to_dict()
    [write] = grad_writes_to(trace, "a0")
    assert write["payload"]["after"]["values"] == pytest.approx(plain_torch_a0_grad())
    assert write["payload"]["after"]["values"] == trace["grads"]["a0"]["values"]
    assert write["payload"]["before"] is None and write["payload"]["accumulated"] is False
    # the engine runs the retains-grad hook just before the node's pre-hooks
    following = trace["events"][write["seq"] + 1]
    assert (following["kind"], following["node"]) == ("node_pre", write["node"])


def test_retained_intermediate_accumulates_across_backward_passes() -> None:
    spec = copy.deepcopy(get_example("retain-grad-intermediate"))
    spec["steps"] = [{"do": "backward", "of": "L", "retain_graph": True}, {"do": "backward", "of": "L"}]
    trace = gradtrace.trace_spec(spec).to_dict()
    first, second = grad_writes_to(trace, "a0")
    once = plain_torch_a0_grad()
    assert first["payload"]["after"]["values"] == pytest.approx(once)
    assert second["payload"]["accumulated"] is True
    assert second["payload"]["before"]["values"] == first["payload"]["after"]["values"]
    assert second["payload"]["after"]["values"] == pytest.approx([2 * g for g in once])
