"""Every example of the gallery traces, and its trace keeps the invariants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_checks import check_engine_order, check_node_states

import gradtrace

EXAMPLES = sorted((Path(gradtrace.__file__).parent / "examples").glob("*.json"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_traces(path: Path) -> None:
    trace = gradtrace.trace_spec(json.loads(path.read_text()))
    doc = trace.doc
    check_engine_order(doc)
    check_node_states(doc)
    assert all(r.matches for r in doc.analyses.linear), [r.max_error for r in doc.analyses.linear]
    json.loads(trace.to_json(), parse_constant=lambda c: pytest.fail(f"bare {c}"))


def test_higher_order_grad_discovers_the_graph_built_by_backward() -> None:
    spec = json.loads((Path(gradtrace.__file__).parent / "examples" / "higher-order-grad.json").read_text())
    doc = gradtrace.trace_spec(spec).doc
    assert doc.values["g"].values == [6.75]
    assert doc.grads["w"].values == [9.0]
    grad_pass = next(p for p in doc.passes if p.label.startswith("grad #1"))
    made = [n for n in doc.graph.nodes if n.pass_index == grad_pass.index]
    assert made and all(grad_pass.first_seq <= n.created_seq <= grad_pass.last_seq for n in made)
    g_node = next(n for n in made if n.tensor == "g")
    # the backward of g runs through nodes the grad step created
    backward = doc.passes[-1]
    ran = {e.target for e in doc.events if e.kind == "node_pre" and e.pass_index == backward.index}
    assert g_node.id in ran


def test_detached_branch_and_retained_grad() -> None:
    spec = {
        "spec_version": 1,
        "title": "t",
        "inputs": {"x": {"value": [1.0, 2.0], "requires_grad": True}},
        "forward": ["a = x * 3", "side = (x * 5).sum()", "loss = (a ** 2).sum()"],
        "retain_grad": ["a"],
        "steps": [{"do": "backward", "of": "loss"}],
    }
    doc = gradtrace.trace_spec(spec).doc
    assert doc.grads["a"].values == [6.0, 12.0]  # d(a²)/da, kept by retain_grad
    assert doc.grads["x"].values == [18.0, 36.0]
    [detached] = [d for d in doc.analyses.diagnostics if d.code == "detached_branch"]
    assert detached.tensor == "side"
    assert not any(d.code == "grad_not_retained" and d.tensor == "a" for d in doc.analyses.diagnostics)
