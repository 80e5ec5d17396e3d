"""What the viewer's run view reads: one JSON document of a run, as committed now.

``{"meta", "steps", "loss", "nodes": [{"key", "module", "op", "param"}], "edges": [[i, j]],
"grad_out": [[norm or null per node] per step], "flags": [{"kind", "step", "node",
"message"}], "traces": {step: reason}, "sampled": bool}``. ``edges`` index ``nodes``; a run
past ``max_steps`` logged steps is sampled evenly (the first and last kept, every flagged step
too): ``sampled`` says so.
"""

from __future__ import annotations

import math
from typing import Any

from gradtrace.runs.store import Run

MAX_STEPS = 2000


def run_view(run: Run, max_steps: int = MAX_STEPS) -> dict[str, Any]:
    nodes = run.nodes
    index = {n.key: i for i, n in enumerate(nodes)}
    steps = run.steps
    flags = run.flags
    kept = _sample(steps, max_steps, {f.step for f in flags})
    losses = dict(zip(steps, run.loss, strict=True))
    grad_out = []
    for step in kept:
        row: list[float | str | None] = [None] * len(nodes)
        for key, q in run.step_values(step)["nodes"].items():
            row[index[key]] = _json_number(q["grad_out"])
        grad_out.append(row)
    return {
        "meta": run.meta,
        "steps": kept,
        "loss": [_json_number(losses[s]) for s in kept],
        "nodes": [{"key": n.key, "module": n.module, "op": n.op, "param": n.param} for n in nodes],
        "edges": [[index[a], index[b]] for a, b in run.edges],
        "grad_out": grad_out,
        "flags": [{"kind": f.kind, "step": f.step, "node": f.node, "message": f.message} for f in flags],
        "traces": {str(k): v for k, v in run.trace_steps.items()},
        "sampled": len(kept) < len(steps),
    }


def _sample(steps: list[int], most: int, keep: set[int]) -> list[int]:
    if len(steps) <= most:
        return steps
    stride = len(steps) / most
    chosen = {steps[int(k * stride)] for k in range(most)} | {steps[-1]} | (keep & set(steps))
    return sorted(chosen)


def _json_number(x: float | None) -> float | str | None:
    """A number JSON can hold; NaN and infinities by name (as the trace format writes them)."""
    if x is None or math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
