"""A spec whose last tensor (the default backward) is not a scalar: summed, with a
diagnostic, exactly as the library does with a non-scalar output and no loss_fn (issue 8
item 6) — on trace_spec, on the engine's run_spec (the service's path) and the library."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

import gradtrace
from gradtrace.engine import run_spec
from gradtrace.spec import SpecLimits, parse_spec

WEIGHT = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]
BIAS = [0.1, -0.2]
X = [[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]]


def spec(steps: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "spec_version": 1,
        "title": "A non-scalar last tensor",
        "modules": {
            "fc": {
                "type": "Linear",
                "in_features": 3,
                "out_features": 2,
                "init": {"weight": WEIGHT, "bias": BIAS},
            }
        },
        "inputs": {"x": {"value": X, "requires_grad": True}},
        "forward": ["y = fc(x)"],
    }
    if steps is not None:
        out["steps"] = steps
    return out


def oracle() -> dict[str, np.ndarray]:
    w = torch.tensor(WEIGHT, requires_grad=True)
    b = torch.tensor(BIAS, requires_grad=True)
    x = torch.tensor(X, requires_grad=True)
    grads = torch.autograd.grad(nn.functional.linear(x, w, b).sum(), [w, b, x])
    return {"fc.weight": grads[0].numpy(), "fc.bias": grads[1].numpy(), "x": grads[2].numpy()}


def check(doc: dict[str, Any], grads: dict[str, Any]) -> None:
    want = oracle()
    for name, value in want.items():
        assert np.array_equal(grads[name], value), name
    [diag] = [d for d in doc["analyses"]["diagnostics"] if d["code"] == "output_reduced"]
    assert diag["tensor"] == "y" and "backward ran on y.sum()" in diag["message"]
    assert not [e for e in doc["events"] if e["kind"] == "error"]
    assert doc["passes"][1]["label"] == "backward #1 of y.sum()"
    [total] = doc["values"]["y.sum()"]["values"]
    assert total == float(
        torch.nn.functional.linear(torch.tensor(X), torch.tensor(WEIGHT), torch.tensor(BIAS)).sum()
    )


def test_trace_spec_sums_a_non_scalar_last_tensor() -> None:
    trace = gradtrace.trace_spec(spec())
    check(trace.to_dict(), trace.grads)


def test_run_spec_the_service_path_does_the_same() -> None:
    grads: dict[str, Any] = {}
    doc = run_spec(parse_spec(spec()), SpecLimits.local(), grads_out=grads)
    check(gradtrace.Trace(doc).to_dict(), grads)
    assert {k: v.tolist() for k, v in grads.items()} == {
        k: gradtrace.Trace(doc).grads[k].tolist() for k in grads
    }  # the serialised grads are the in-memory ones


def test_the_library_says_the_same() -> None:
    layer = nn.Linear(3, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(WEIGHT))
        layer.bias.copy_(torch.tensor(BIAS))
    trace = gradtrace.trace(layer, torch.tensor(X))
    [diag] = [d for d in trace.doc.analyses.diagnostics if d.code == "output_reduced"]
    assert "backward ran on output.sum()" in diag.message
    assert np.array_equal(trace.grads["weight"], oracle()["fc.weight"])


def test_an_explicit_backward_of_a_non_scalar_is_pytorchs_refusal() -> None:
    """Only the default is summed: a spec that asks for backward of y gets PyTorch's answer."""
    trace = gradtrace.trace_spec(spec([{"do": "backward", "of": "y"}]))
    [error] = [e for e in trace.doc.events if e.kind == "error"]
    assert "grad can be implicitly created only for scalar outputs" in (error.message or "")
    assert not [d for d in trace.doc.analyses.diagnostics if d.code == "output_reduced"]
