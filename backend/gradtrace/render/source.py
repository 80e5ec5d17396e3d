"""Whatever the caller holds — a Trace, a TraceDoc, a dict, JSON text or bytes — as JSON bytes.

The renderer reads the public trace format; bytes from the service's cache go through
untouched (no re-validation, no re-encoding).
"""

from __future__ import annotations

import json
from typing import Any

from gradtrace.trace_schema import TraceDoc, encode_doc


def trace_json(trace: Any) -> bytes:
    if isinstance(trace, bytes):
        return trace
    if isinstance(trace, str):
        return trace.encode("utf-8")
    if hasattr(trace, "to_json_bytes"):  # gradtrace.Trace (its bytes: no round trip through str)
        return trace.to_json_bytes()
    if isinstance(trace, TraceDoc):
        return encode_doc(trace)
    if isinstance(trace, dict):  # compact, as the trace's own encoder writes (drawing_json reads it)
        return json.dumps(trace, allow_nan=False, separators=(",", ":")).encode("utf-8")
    raise TypeError(f"cannot render a {type(trace).__name__}: pass a gradtrace.Trace, a TraceDoc or a dict")


# The trace's own encoder writes `tensor_data` (every base64 block of numbers) as the document's
# last field: `,"tensor_data":[...]}` at the very end. A base64 string holds no quote nor bracket,
# so the first `]` after the field's opening ends it.
_TENSOR_DATA = b',"tensor_data":['


def _without_tensor_data(raw: bytes) -> bytes:
    """``raw`` with an empty ``tensor_data``: every ``data`` index then points at nothing,
    which a reader takes as stats only (as a truncated value). JSON laid out otherwise
    (indented, fields in another order) is returned as it is."""
    at = raw.rfind(_TENSOR_DATA)
    if at < 0 or raw.find(b"]", at) != len(raw) - 2 or not raw.endswith(b"]}"):
        return raw
    return raw[: at + len(_TENSOR_DATA)] + b"]}"


def drawing_json(trace: Any) -> bytes:
    """The trace as the drawing reads it: ``trace_json`` without the base64 numbers.

    A picture writes a tensor's numbers only when there are a few of them (chips: up to 3,
    hover titles: up to 8); a tensor with ``data`` has more than 16, so the picture shows its
    shape and stats, never its numbers. On a real model those numbers are most of the JSON,
    which the renderer would receive, parse and decode for nothing. They are left out by
    sending ``tensor_data`` empty: the result is still a valid trace, and draws the same picture.
    """
    if hasattr(trace, "to_json_bytes"):  # gradtrace.Trace: written without them, not cut out after
        return trace.to_json_bytes(numbers=False)
    if isinstance(trace, TraceDoc):
        return encode_doc(trace, numbers=False)
    return _without_tensor_data(trace_json(trace))


def node_count(trace: Any) -> int | None:
    """How many graph nodes the trace has (None for JSON text or bytes: not parsed for this)."""
    doc = getattr(trace, "doc", trace)
    if isinstance(doc, TraceDoc):
        return len(doc.graph.nodes)
    if isinstance(doc, dict) and isinstance(doc.get("graph"), dict):
        return len(doc["graph"].get("nodes") or [])
    return None


def drawing_what(trace: Any) -> str:
    """What a drawing of ``trace`` is doing, for a progress line."""
    count = node_count(trace)
    return "laying out and drawing " + (f"{count:,} nodes" if count is not None else "the graph")


def trace_title(trace: Any) -> str:
    doc = getattr(trace, "doc", trace)
    if hasattr(doc, "title"):
        return str(doc.title)
    if isinstance(doc, dict):
        return str(doc.get("title", "gradtrace"))
    return "gradtrace"


CHIP_NUMBERS = 3  # tensors this small are written on the picture: their numbers always stay


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def keep_values(doc: dict[str, Any], budget: int, *, finals_first: bool = False) -> dict[str, Any]:
    """The trace with at most ``budget`` tensor numbers, the rest reduced to statistics.

    A tensor value is a dict with ``shape``, ``stats`` and ``values`` (JSON list) or ``data``
    (an index into ``tensor_data``; in schema 2 the base64 itself); in document order (graph,
    events, values, grads) each keeps its numbers while the budget lasts, tiny ones (drawn as
    chips) always; a block of ``tensor_data`` is charged once however many values show it,
    and only the blocks kept stay in ``tensor_data``. A reduced tensor is ``truncated`` as
    the engine marks it, and ``limits.values_truncated`` counts it. ``doc`` is not changed.
    ``finals_first``: the final values (``grads``, then ``values``) are served first, and
    those reduced are counted in ``limits.finals_truncated``, as the engine counts its own.
    """
    left = budget
    reduced = 0
    finals_reduced = 0
    in_finals = False
    blocks = doc.get("tensor_data") or []
    kept: set[int] = set()  # indices in doc's tensor_data of the blocks kept
    pointing: list[dict[str, Any]] = []  # the result's values with a kept block (doc's index, for now)

    def walk(node: Any) -> Any:
        nonlocal left, reduced, finals_reduced
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        data = node.get("data")
        if "shape" in node and "stats" in node and (node.get("values") is not None or data is not None):
            n = _numel(node["shape"])
            if isinstance(data, int):
                if data not in kept and n <= left and 0 <= data < len(blocks):
                    left -= n
                    kept.add(data)
                if data in kept:
                    pointing.append(out := {**node})
                    return out
            elif n <= CHIP_NUMBERS:
                return node
            elif n <= left:
                left -= n
                return node
            if in_finals:
                finals_reduced += 1
            else:
                reduced += 1
            return {**node, "values": None, "data": None, "truncated": True}
        return {key: walk(value) for key, value in node.items() if key != "tensor_data"}

    first = [key for key in FINALS if key in doc] if finals_first else []
    walked: dict[str, Any] = {}
    for key in [*first, *(k for k in doc if k not in first and k != "tensor_data")]:
        in_finals = key in first
        walked[key] = walk(doc[key])
    out = {key: walked[key] for key in doc if key in walked}
    if "tensor_data" in doc:  # the blocks kept, in their order (nothing cut: the same document)
        order = sorted(kept)
        renumbered = {index: new for new, index in enumerate(order)}
        for value in pointing:
            value["data"] = renumbered[value["data"]]
        out["tensor_data"] = [blocks[index] for index in order]
    if (reduced or finals_reduced) and isinstance(out.get("limits"), dict):
        limits = out["limits"]
        out["limits"] = {
            **limits,
            "values_truncated": limits.get("values_truncated", 0) + reduced,
            "finals_truncated": limits.get("finals_truncated", 0) + finals_reduced,
        }
    return out


FINALS = ("grads", "values")  # the final gradients and the named tensors' forward values
# The numbers a saved file (.json, .html) keeps by default: 1 MiB of float32. A small model's
# trace holds fewer and is written whole; a real model's (GPT-2 with 3.4 M parameters: 21 MB
# of numbers) keeps its final values first, the rest as statistics — ``values="all"`` keeps all.
FILE_VALUE_BUDGET = 262_144
SUMMARISED = "file_values_summarised"


def file_doc(trace: Any, values: bool | str = True) -> bytes:
    """The trace as a saved file holds it: every number with ``values="all"``; by default at
    most FILE_VALUE_BUDGET of them (``file_summary``). A trace within the budget is written
    exactly as ``trace_json`` writes it."""
    if values == "all":
        return trace_json(trace)
    if values not in (True, False):
        raise ValueError(f'values must be True, False or "all" (got {values!r})')
    return file_summary(trace) or trace_json(trace)


def file_summary(trace: Any) -> bytes | None:
    """The trace with at most FILE_VALUE_BUDGET numbers (``keep_values``, final values
    first), what was reduced marked as the engine marks its own budget (``truncated`` values,
    the ``limits`` counts) and told in a ``file_values_summarised`` diagnostic; None when
    every number fits."""
    if hasattr(trace, "to_json_bytes"):  # the structure, and the engine's blocks by reference
        doc = json.loads(trace.to_json_bytes(numbers=False))
        doc["tensor_data"] = list(trace.doc.tensor_data)
    else:
        doc = json.loads(trace_json(trace))
    small = keep_values(doc, FILE_VALUE_BUDGET, finals_first=True)
    limits, before = small.get("limits") or {}, doc.get("limits") or {}
    cut = {k: limits.get(k, 0) - before.get(k, 0) for k in ("values_truncated", "finals_truncated")}
    if not any(cut.values()):
        return None
    analyses = small.setdefault("analyses", {})
    analyses["diagnostics"] = [
        *(analyses.get("diagnostics") or []),
        {
            "code": SUMMARISED,
            "severity": "info",
            "message": (
                f"This file keeps {FILE_VALUE_BUDGET:,} tensor numbers: {cut['finals_truncated']:,} final "
                f"gradients or values and {cut['values_truncated']:,} snapshots are kept as statistics "
                '(shape, min, max, mean, norm). Save with values="all" for every number.'
            ),
            "node": None,
            "module": None,
            "tensor": None,
        },
    ]
    return json.dumps(small, allow_nan=False, separators=(",", ":")).encode("utf-8")
