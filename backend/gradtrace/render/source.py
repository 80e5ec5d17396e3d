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


def keep_values(doc: dict[str, Any], budget: int) -> dict[str, Any]:
    """The trace with at most ``budget`` tensor numbers, the rest reduced to statistics.

    A tensor value is a dict with ``shape``, ``stats`` and ``values`` (JSON list) or ``data``
    (an index into ``tensor_data``; in schema 2 the base64 itself); in document order (graph,
    events, values, grads) each keeps its numbers while the budget lasts, tiny ones (drawn as
    chips) always; a block of ``tensor_data`` is charged once however many values show it,
    and only the blocks kept stay in ``tensor_data``. A reduced tensor is ``truncated`` as
    the engine marks it, and ``limits.values_truncated`` counts it. ``doc`` is not changed.
    """
    left = budget
    reduced = 0
    blocks = doc.get("tensor_data") or []
    kept: set[int] = set()  # indices in doc's tensor_data of the blocks kept
    pointing: list[dict[str, Any]] = []  # the result's values with a kept block (doc's index, for now)

    def walk(node: Any) -> Any:
        nonlocal left, reduced
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
            reduced += 1
            return {**node, "values": None, "data": None, "truncated": True}
        return {key: walk(value) for key, value in node.items() if key != "tensor_data"}

    out = walk(doc)
    if "tensor_data" in doc:  # the blocks kept, in their order (nothing cut: the same document)
        order = sorted(kept)
        renumbered = {index: new for new, index in enumerate(order)}
        for value in pointing:
            value["data"] = renumbered[value["data"]]
        out["tensor_data"] = [blocks[index] for index in order]
    if reduced and isinstance(out.get("limits"), dict):
        out["limits"] = {
            **out["limits"],
            "values_truncated": out["limits"].get("values_truncated", 0) + reduced,
        }
    return out
