"""Whatever the caller holds — a Trace, a TraceDoc, a dict, JSON text or bytes — as JSON bytes.

The renderer reads the public trace format; bytes from the service's cache go through
untouched (no re-validation, no re-encoding).
"""

from __future__ import annotations

import json
from typing import Any

import msgspec


def trace_json(trace: Any) -> bytes:
    if isinstance(trace, bytes):
        return trace
    if isinstance(trace, str):
        return trace.encode("utf-8")
    if hasattr(trace, "to_json"):  # gradtrace.Trace
        return trace.to_json().encode("utf-8")
    if isinstance(trace, msgspec.Struct):  # TraceDoc
        return msgspec.json.encode(trace)
    if isinstance(trace, dict):
        return json.dumps(trace, allow_nan=False).encode("utf-8")
    raise TypeError(f"cannot render a {type(trace).__name__}: pass a gradtrace.Trace, a TraceDoc or a dict")


def trace_title(trace: Any) -> str:
    doc = getattr(trace, "doc", trace)
    if hasattr(doc, "title"):
        return str(doc.title)
    if isinstance(doc, dict):
        return str(doc.get("title", "gradtrace"))
    return "gradtrace"


def node_count(trace: Any) -> int:
    doc = getattr(trace, "doc", trace)
    if hasattr(doc, "graph"):
        return len(doc.graph.nodes)
    if isinstance(doc, dict):
        return len(doc.get("graph", {}).get("nodes", []))
    return len(json.loads(trace_json(trace)).get("graph", {}).get("nodes", []))
