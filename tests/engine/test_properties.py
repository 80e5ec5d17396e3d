"""Property tests over generated specs (small random MLP / composite programs).

For every generated spec: each gradient equals an oracle computed by plain torch (the same
model built from the same seed, run with no hooks, torch.autograd.grad); every node runs at
most once per backward with its pre before its post; consumers run before producers; the
trace is identical when recorded twice.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import torch
from design_specs import SEED_002
from engine_checks import check_engine_order
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gradtrace
from gradtrace.engine.build import build
from gradtrace.engine.interpreter import run_program
from gradtrace.spec import parse_spec

ACTIVATIONS = ["relu", "tanh", "sigmoid", "gelu", "silu"]


@st.composite
def specs(draw: st.DrawFn) -> dict[str, Any]:
    width = draw(st.lists(st.integers(1, 4), min_size=2, max_size=4))
    batch = draw(st.integers(1, 3))
    modules: dict[str, Any] = {}
    lines: list[str] = []
    current = "x"
    for i in range(len(width) - 1):
        modules[f"l{i}"] = {
            "type": "Linear",
            "in_features": width[i],
            "out_features": width[i + 1],
            "bias": draw(st.booleans()),
        }
        act = draw(st.sampled_from(ACTIVATIONS))
        lines.append(f"h{i} = {act}(l{i}({current}))")
        current = f"h{i}"
        if width[i] == width[i + 1] and draw(st.booleans()):  # a skip connection: fan-in
            lines.append(f"r{i} = h{i} + {'x' if i == 0 else f'h{i - 1}'}")
            current = f"r{i}"
    if draw(st.booleans()):  # a composite module reusing one layer twice (shared weights)
        d = width[-1]
        modules["block"] = {
            "type": "Module",
            "args": ["u"],
            "modules": {"inner": {"type": "Linear", "in_features": d, "out_features": d}},
            "forward": ["v = inner(u)", "return inner(tanh(v)) * v"],
        }
        lines.append(f"b = block({current})")
        current = "b"
    reduce = draw(st.sampled_from(["sum", "mean"]))
    lines.append(f"loss = ({current} ** 2).{reduce}()")
    return {
        "spec_version": 1,
        "title": "generated",
        "seed": draw(st.integers(0, 2**31)),
        "modules": modules,
        "inputs": {"x": {"shape": [batch, width[0]], "init": "randn", "requires_grad": draw(st.booleans())}},
        "forward": lines,
    }


def oracle_grads(spec_dict: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Plain torch: the same model and inputs, no hooks at all, torch.autograd.grad."""
    spec = parse_spec(spec_dict)
    built = build(spec, torch.Generator().manual_seed(spec.seed))
    env = run_program(spec.program, dict(built.inputs), built.modules)
    leaves = dict(built.root.named_parameters())
    leaves.update({n: t for n, t in built.inputs.items() if t.requires_grad})
    names = list(leaves)
    grads = torch.autograd.grad(env["loss"], [leaves[n] for n in names], allow_unused=True)
    return dict(zip(names, grads, strict=True))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs())
def test_generated_specs_match_plain_torch(spec: dict[str, Any]) -> None:
    trace = gradtrace.trace_spec(spec)
    doc = trace.doc
    expected = oracle_grads(spec)
    for name, grad in expected.items():
        got = trace.grads[name]
        if grad is None:
            assert got is None, name
        else:
            assert torch.equal(torch.from_numpy(got).to(grad.dtype), grad), name
    check_engine_order(doc)
    assert all(r.matches for r in doc.analyses.linear)
    assert trace.to_json() == gradtrace.trace_spec(spec).to_json()  # deterministic


def test_trace_identical_across_processes() -> None:
    here = gradtrace.trace_spec(SEED_002).to_json()
    code = (
        "import json, sys, gradtrace; "
        "sys.stdout.write(gradtrace.trace_spec(json.loads(sys.stdin.read())).to_json())"
    )
    other = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(SEED_002),
        text=True,
        capture_output=True,
        check=True,
        timeout=120,
    ).stdout
    assert json.loads(other) == json.loads(here)
    assert other == here
