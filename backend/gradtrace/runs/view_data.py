"""What the viewer's run view reads: one JSON document of a run, as committed now.

The document (``RunView``; ``"format": "gradtrace-run-view/1"``) is also the run's export:
``gradtrace view RUN_DIR`` serves it, ``POST /api/v1/run`` answers it for a program that
calls ``gradtrace.watch`` (built in the jail, checked field by field here on the way out),
the run view's Download saves it and its Open reads it back, and a notebook cell embeds it::

    {"format", "meta", "steps", "loss", "nodes": [{"key", "module", "op", "param"}],
     "edges": [[i, j]], "grad_out": [[norm or null per node] per kept step],
     "flags": [{"kind", "step", "node", "message"}], "traces": {step: reason},
     "full_traces": {step: TraceDoc}, "sampled": bool, "cut": [sentence, …]}

``edges`` index ``nodes``; ``grad_out[k][i]`` is the norm node ``i`` passed back at
``steps[k]`` (null: it did not run then; NaN and infinities by name). A run past the budget
(``max_steps`` logged steps, or ``max_numbers`` norms in all) is sampled evenly, the first and
last step kept and every flagged step too: ``sampled`` says so and ``cut`` says what was left
out, in words. ``full_traces`` carries the saved full traces only where asked (the hosted
service, within a byte budget; ``cut`` names the ones left out); ``traces`` lists them all.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from gradtrace.runs.store import Run

FORMAT = "gradtrace-run-view/1"
MAX_STEPS = 2000
MAX_NUMBERS = 4_000_000  # norms in one document (~40 MB of JSON at most)

Number = float | str | None  # a norm; "NaN", "Infinity", "-Infinity" by name; None: not run
_NAMED = ("NaN", "Infinity", "-Infinity")


class ViewNode(msgspec.Struct, frozen=True):
    key: str
    module: str
    op: str
    param: str | None = None


class ViewFlag(msgspec.Struct, frozen=True):
    kind: str
    step: int
    node: str | None
    message: str


class RunView(msgspec.Struct):
    """The run view's document (see the module's docstring)."""

    format: str
    meta: dict[str, Any]
    steps: list[int]
    loss: list[Number]
    nodes: list[ViewNode]
    edges: list[tuple[int, int]]
    grad_out: list[list[Number]]
    flags: list[ViewFlag]
    traces: dict[str, str]
    sampled: bool
    cut: list[str] = msgspec.field(default_factory=list)
    full_traces: dict[str, Any] = msgspec.field(default_factory=dict)

    def check(self) -> None:
        """Raise ValueError where the document does not hold together (a document from
        elsewhere: a file, the jail)."""
        if self.format != FORMAT:
            raise ValueError(f"format is {self.format!r}, not {FORMAT!r}")
        n, k = len(self.nodes), len(self.steps)
        if len(self.loss) != k or len(self.grad_out) != k:
            raise ValueError("loss and grad_out must have one entry per step")
        if any(len(row) != n for row in self.grad_out):
            raise ValueError("each grad_out row must have one entry per node")
        if any(not (0 <= a < n and 0 <= b < n) for a, b in self.edges):
            raise ValueError("an edge names a node that is not in nodes")
        for v in (v for row in self.grad_out for v in row):
            if isinstance(v, str) and v not in _NAMED:
                raise ValueError(f"a norm is {v!r}: numbers, null, or NaN/Infinity by name")
        for v in self.loss:
            if isinstance(v, str) and v not in _NAMED:
                raise ValueError(f"a loss is {v!r}: numbers, null, or NaN/Infinity by name")


def run_view(
    run: Run,
    max_steps: int = MAX_STEPS,
    max_numbers: int = MAX_NUMBERS,
    trace_bytes: int = 0,
) -> RunView:
    """The run as the view reads it, within the budget (``trace_bytes``: how many bytes of
    saved full traces to carry; 0: none, the viewer asks for them one by one)."""
    nodes = run.nodes
    index = {n.key: i for i, n in enumerate(nodes)}
    steps = run.steps
    flags = run.flags
    most = max(2, min(max_steps, max_numbers // max(1, len(nodes))))
    kept = _sample(steps, most, {f.step for f in flags})
    cut = []
    if len(kept) < len(steps):
        why = (
            f"{max_steps} steps"
            if most == max_steps
            else f"{max_numbers:,} numbers ({len(nodes)} nodes a step)"
        )
        cut.append(
            f"{len(kept)} of the {len(steps)} logged steps are shown (sampled evenly: the view holds "
            f"at most {why}; the first, the last and every flagged step are kept)"
        )
    losses = dict(zip(steps, run.loss, strict=True))
    grad_out = []
    for step in kept:
        row: list[Number] = [None] * len(nodes)
        for key, q in run.step_values(step)["nodes"].items():
            row[index[key]] = _json_number(q["grad_out"])
        grad_out.append(row)
    saved = run.trace_steps
    full: dict[str, Any] = {}
    left = trace_bytes
    for step, reason in saved.items() if trace_bytes else ():
        data = run.trace_bytes(step)
        if len(data) > left:
            cut.append(
                f"the full trace of step {step} ({reason}, {len(data):,} bytes) is not carried: past the budget of {trace_bytes:,} bytes"
            )
            continue
        left -= len(data)
        full[str(step)] = msgspec.Raw(data)
    return RunView(
        format=FORMAT,
        meta=run.meta,
        steps=kept,
        loss=[_json_number(losses[s]) for s in kept],
        nodes=[ViewNode(n.key, n.module, n.op, n.param) for n in nodes],
        edges=[(index[a], index[b]) for a, b in run.edges],
        grad_out=grad_out,
        flags=[ViewFlag(f.kind, f.step, f.node, f.message) for f in flags],
        traces={str(k): v for k, v in saved.items()},
        sampled=len(kept) < len(steps),
        cut=cut,
        full_traces=full,
    )


def read_view(data: bytes | str) -> RunView:
    """A run view document from elsewhere (a file, the jail), decoded and checked; ValueError
    naming what is wrong otherwise."""
    try:
        doc = msgspec.json.decode(data, type=RunView)
    except msgspec.ValidationError as exc:
        raise ValueError(f"not a gradtrace run view: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    doc.check()
    return doc


def view_from(doc: Any) -> RunView:
    """A run view document already parsed (JSON's dicts and lists), checked as ``read_view``."""
    try:
        view = msgspec.convert(doc, type=RunView)
    except msgspec.ValidationError as exc:
        raise ValueError(f"not a gradtrace run view: {exc}") from exc
    view.check()
    return view


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
