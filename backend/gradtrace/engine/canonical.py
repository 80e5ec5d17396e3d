"""The engine's trace dict in the exact shape ``TraceDoc.model_dump(mode="json")`` gives.

Validating the finished trace with pydantic cost more than some captures (~80 ms for a
1,400-node model, 5x the bare forward+backward), only to check the engine's own output. So
the engine does not validate on the hot path: this module writes every typed position in
schema field order with its defaults filled in, and ``pydantic_core.to_json`` of the result
is byte-for-byte ``TraceDoc.model_validate(raw).model_dump_json()`` (the same Rust
serialiser). Tests hold that equality and the schema validity for every example spec and
the library traces (tests/engine/test_canonical.py); ``Trace.doc`` still validates, lazily.

Free-form positions (``payload``, ``spec``, hook ``action``, saved ``scalar``) are ``Any``
in the schema and pass through unchanged, as they did through validation. Nothing here is
mutated: typed dicts are rebuilt, the engine's own records stay as they were.
"""

from __future__ import annotations

from typing import Any

from gradtrace.trace_schema import SCHEMA_VERSION


def stats(s: dict[str, Any]) -> dict[str, Any]:
    return {
        "numel": s["numel"],
        "min": s["min"],
        "max": s["max"],
        "mean": s["mean"],
        "std": s["std"],
        "norm": s["norm"],
        "nan": s.get("nan", 0),
        "inf": s.get("inf", 0),
    }


def tensor_value(v: dict[str, Any] | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {
        "shape": v["shape"],
        "dtype": v["dtype"],
        "stats": stats(v["stats"]),
        "values": v.get("values"),
        "data": v.get("data"),
        "truncated": v.get("truncated", False),
    }


def _saved(s: dict[str, Any]) -> dict[str, Any]:
    return {"name": s["name"], "value": tensor_value(s.get("value")), "scalar": s.get("scalar")}


def node(n: dict[str, Any]) -> dict[str, Any]:
    g = n.get
    return {
        "id": n["id"],
        "kind": n["kind"],
        "label": n["label"],
        "op": g("op"),
        "role": g("role"),
        "tensor": g("tensor"),
        "shape": g("shape"),
        "dtype": g("dtype"),
        "module": g("module"),
        "creation_order": g("creation_order"),
        "created_seq": g("created_seq"),
        "pass_index": g("pass_index", 0),
        "saved": [_saved(s) for s in g("saved", ())],
        "inserted": g("inserted", False),
        "variable": g("variable"),
        "grad_fn": g("grad_fn"),
        "requires_grad": g("requires_grad", False),
        "retains_grad": g("retains_grad", False),
        "value": tensor_value(g("value")),
    }


def edge(e: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": e["id"],
        "source": e["source"],
        "target": e["target"],
        "kind": e.get("kind", "data"),
        "slot": e.get("slot"),
        "output_nr": e.get("output_nr", 0),
        "requires_grad": e.get("requires_grad", True),
        "grads": [
            {"pass_index": g["pass_index"], "seq": g["seq"], "value": tensor_value(g["value"])}
            for g in e.get("grads", ())
        ],
    }


def module(m: dict[str, Any]) -> dict[str, Any]:
    return {
        "path": m["path"],
        "type": m["type"],
        "parent": m["parent"],
        "hooks": [
            {"index": h["index"], "type": h["type"], "action": h.get("action")} for h in m.get("hooks", ())
        ],
        "parameters": m.get("parameters", []),
    }


def _pass(p: dict[str, Any]) -> dict[str, Any]:
    return {
        "index": p["index"],
        "phase": p["phase"],
        "label": p["label"],
        "step": p.get("step"),
        "parent": p.get("parent"),
        "first_seq": p["first_seq"],
        "last_seq": p["last_seq"],
    }


def _linear(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "module": r["module"],
        "weight": r["weight"],
        "pass_index": r["pass_index"],
        "a_shape": r["a_shape"],
        "delta_shape": r["delta_shape"],
        "reconstructed": tensor_value(r["reconstructed"]),
        "grad": tensor_value(r["grad"]),
        "max_error": r["max_error"],
        "matches": r["matches"],
        "a": [tensor_value(v) for v in r.get("a", ())],
        "delta": [tensor_value(v) for v in r.get("delta", ())],
    }


def _diagnostic(d: dict[str, Any]) -> dict[str, Any]:
    return {
        "code": d["code"],
        "severity": d["severity"],
        "message": d["message"],
        "node": d.get("node"),
        "module": d.get("module"),
        "tensor": d.get("tensor"),
    }


def _per_sample(r: dict[str, Any]) -> dict[str, Any]:
    calls = [
        {
            "a_shape": c["a_shape"],
            "delta_shape": c["delta_shape"],
            "sample_dims": c["sample_dims"],
            "position_norms": tensor_value(c["position_norms"]),
            "sample_norms": tensor_value(c["sample_norms"]),
        }
        for c in r["calls"]
    ]
    return {**r, "calls": calls}


EMPTY_MEMORY: dict[str, Any] = {"nodes": [], "timeline": [], "peak_bytes": 0, "final_bytes": 0}


def trace_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """The whole trace, canonical (see the module docstring)."""
    graph, analyses, limits = doc["graph"], doc.get("analyses", {}), doc["limits"]
    return {
        "schema_version": SCHEMA_VERSION,
        "torch_version": doc["torch_version"],
        "source": doc["source"],
        "title": doc["title"],
        "spec": doc["spec"],
        "graph": {
            "nodes": [node(n) for n in graph["nodes"]],
            "edges": [edge(e) for e in graph["edges"]],
            "modules": [module(m) for m in graph.get("modules", ())],
        },
        # Recorder.emit is the only maker of events and writes them canonical already (the
        # tests compare every example's bytes with the validated dump): not rebuilt here
        "events": doc["events"],
        "passes": [_pass(p) for p in doc["passes"]],
        "values": {k: tensor_value(v) for k, v in doc["values"].items()},
        "grads": {k: tensor_value(v) for k, v in doc["grads"].items()},
        "analyses": {
            "linear": [_linear(r) for r in analyses.get("linear", ())],
            "grad_norms": [
                {"name": g["name"], "module": g["module"], "pass_index": g["pass_index"], "norm": g["norm"]}
                for g in analyses.get("grad_norms", ())
            ],
            "diagnostics": [_diagnostic(d) for d in analyses.get("diagnostics", ())],
            # SavedMemory.build writes it canonical already (schema order, every field)
            "memory": analyses.get("memory", EMPTY_MEMORY),
            "per_sample": [_per_sample(r) for r in analyses.get("per_sample", ())],
        },
        "limits": {
            "max_nodes": limits["max_nodes"],
            "value_budget": limits["value_budget"],
            "final_value_limit": limits["final_value_limit"],
            "values_truncated": limits.get("values_truncated", 0),
            "finals_truncated": limits.get("finals_truncated", 0),
        },
    }
