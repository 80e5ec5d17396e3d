"""Two traces of one model, compared: which nodes, edges and hooks match, and which numbers
changed (see comparison_schema for the format and the matching rules). Torch-free: it reads the
public trace format, so it serves the library, the service and saved files alike."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from gradtrace.comparison_schema import (
    CompareDoc,
    EdgeMatch,
    EdgesMatched,
    HookDiff,
    Matched,
    NodeMatch,
    NumberDiff,
    Side,
    Summary,
)
from gradtrace.trace import Trace, tensor_array
from gradtrace.trace_schema import GraphNode, TensorValue, TraceDoc

DEFAULT_RTOL = 1e-6
# a dtype's machine epsilon (the spacing of its numbers at 1): the relative rounding of one
# operation is at most half of it. Integer and bool numbers are exact (0).
EPSILON = {
    "float64": 2.0**-52,
    "complex128": 2.0**-52,
    "float32": 2.0**-23,
    "complex64": 2.0**-23,
    "float16": 2.0**-10,
    "bfloat16": 2.0**-7,
}
# epsilons per operation on the way a factor may drift by: the same computation on scaled
# numbers rounds differently at each operation (×3, ×0.7: not powers of two), and reductions
# (a matmul's sums, a norm) round more than once per output
FACTOR_SLACK = 32


def as_doc(trace: Trace | TraceDoc | dict[str, Any]) -> TraceDoc:
    if isinstance(trace, TraceDoc):
        return trace
    if isinstance(trace, Trace):
        return trace.doc
    if isinstance(trace, dict):
        return Trace.from_dict(trace).doc
    raise TypeError(f"cannot compare a {type(trace).__name__}: pass a gradtrace.Trace, a TraceDoc or a dict")


def node_key(node: GraphNode) -> str:
    if node.kind == "tensor":
        return f"tensor {node.tensor or node.label} ({node.role})"
    where = f" in {node.module}" if node.module else ""
    made = f" ({node.tensor})" if node.tensor else ""
    return f"op {node.op}{where}{made}"


def keyed_nodes(doc: TraceDoc) -> dict[str, str]:
    """key -> node id; repeats of a key numbered in creation order (``… #2``)."""
    seen: dict[str, int] = {}
    out: dict[str, str] = {}
    for node in doc.graph.nodes:
        base = node_key(node)
        count = seen[base] = seen.get(base, 0) + 1
        out[base if count == 1 else f"{base} #{count}"] = node.id
    return out


def depths(doc: TraceDoc) -> dict[str, int]:
    """node id -> how many edges the longest data path through it has, from a leaf to an end
    of the graph (the forward that made its value and the backward that brought its
    gradient): the operations whose rounding a number at that node has been through."""
    consumers: dict[str, list[str]] = {}
    waiting: dict[str, int] = {node.id: 0 for node in doc.graph.nodes}
    for edge in doc.graph.edges:
        consumers.setdefault(edge.source, []).append(edge.target)
        waiting[edge.target] = waiting.get(edge.target, 0) + 1
    order = [node for node, count in waiting.items() if count == 0]
    for node in order:  # (Kahn's order: a node after everything that feeds it)
        for target in consumers.get(node, ()):
            waiting[target] -= 1
            if waiting[target] == 0:
                order.append(target)
    down = dict.fromkeys(order, 0)  # longest path from a leaf to the node
    for node in order:
        for target in consumers.get(node, ()):
            down[target] = max(down[target], down[node] + 1)
    up = dict.fromkeys(order, 0)  # longest path from the node to an end
    for node in reversed(order):
        for target in consumers.get(node, ()):
            up[node] = max(up[node], up[target] + 1)
    return {node: down[node] + up[node] for node in order}


def named_depths(doc: TraceDoc, by_node: dict[str, int]) -> dict[str, int]:
    """tensor name -> the depth of its deepest node (a name may be made by several forwards)."""
    out: dict[str, int] = {}
    for node in doc.graph.nodes:
        if node.tensor is not None and node.id in by_node:
            out[node.tensor] = max(out.get(node.tensor, 0), by_node[node.id])
    return out


def factor_tolerance(dtype: str, depth: int, rtol: float) -> float:
    """How far from one factor ``b`` may be from ``a`` and still be "``a`` scaled": relative
    to the largest magnitude, ``FACTOR_SLACK`` epsilons of the dtype per operation on the
    longest path through the number (at least one operation), and never below ``rtol``."""
    return max(rtol, FACTOR_SLACK * EPSILON.get(dtype, 0.0) * max(depth, 1))


def number_diff(
    name: str,
    a: TensorValue | None,
    b: TensorValue | None,
    rtol: float,
    docs: tuple[TraceDoc, TraceDoc],
    depth: int = 1,
) -> NumberDiff:
    """``a`` of trace ``docs[0]`` against ``b`` of ``docs[1]`` (whose tensor_data hold their
    numbers); ``depth``: the operations the number has been through (see ``depths``)."""
    if a is None and b is None:
        return NumberDiff(name=name, status="no_gradient")
    if a is None or b is None:  # a gradient (or value) on one side only
        return NumberDiff(
            name=name,
            status="only_b" if a is None else "only_a",
            shape_a=a.shape if a else None,
            shape_b=b.shape if b else None,
            norm_a=a.stats.norm if a else None,
            norm_b=b.stats.norm if b else None,
        )
    out = NumberDiff(
        name=name,
        status="not_comparable",
        shape_a=a.shape,
        shape_b=b.shape,
        norm_a=a.stats.norm,
        norm_b=b.stats.norm,
    )
    try:
        xa, xb = tensor_array(a, docs[0].tensor_data), tensor_array(b, docs[1].tensor_data)
    except ValueError:  # numbers cut by a budget (stats only): the stats above are all there is
        return out
    if xa.shape != xb.shape:
        return out
    wide = np.complex128 if np.iscomplexobj(xa) or np.iscomplexobj(xb) else np.float64
    xa, xb = xa.astype(wide), xb.astype(wide)
    both_nan = np.isnan(xa) & np.isnan(xb)
    same = np.isclose(xa, xb, rtol=rtol, atol=0.0) | both_nan | (xa == xb)
    delta = np.where(same & ~np.isfinite(xa), 0.0, np.abs(xb - xa))
    out.max_abs_diff = float(np.nanmax(delta)) if delta.size else 0.0
    out.status = "unchanged" if bool(same.all()) else "changed"
    if out.status == "changed":
        dtype = a.dtype if EPSILON.get(a.dtype, 0.0) >= EPSILON.get(b.dtype, 0.0) else b.dtype
        out.ratio = scale_ratio(xa, xb, factor_tolerance(dtype, depth, rtol))
    return out


def scale_ratio(a: np.ndarray, b: np.ndarray, tolerance: float) -> float | None:
    """The real factor ``c`` with ``b ≈ c·a`` when there is one, else None: ``c`` fits the
    finite numbers by least squares, and no element of ``b`` is further from ``c·a`` than
    ``tolerance`` times the largest magnitude (of ``b`` or ``c·a``). Elementwise ratios would
    not do: an element near zero (a sum that cancelled) keeps the rounding of the larger
    numbers it was summed from, so its own ratio can be far off."""
    finite = np.isfinite(a) & np.isfinite(b)
    if not np.array_equal(finite, np.isfinite(a) | np.isfinite(b)):
        return None  # (non-finite in one and not the other: no factor makes that)
    a, b = a[finite], b[finite]
    power = float(np.vdot(a, a).real)
    if power == 0.0:
        return None
    factor = np.vdot(a, b) / power  # (vdot conjugates a: the complex least squares too)
    if abs(factor.imag) > tolerance * abs(factor):
        return None  # (a rotation of complex numbers is not a factor)
    c = float(factor.real)
    scale = max(float(np.abs(b).max()), abs(c) * float(np.abs(a).max()))
    return c if float(np.abs(b - c * a).max()) <= tolerance * scale else None


def _backward_order(doc: TraceDoc) -> dict[int, int]:
    """pass_index -> its place among the trace's backward passes (0, 1, …)."""
    backwards = [p.index for p in doc.passes if p.phase == "backward"]
    return {index: k for k, index in enumerate(backwards)}


def _hooks(doc: TraceDoc) -> list[tuple[str, str, dict | None]]:
    """(where, type, action) of every hook, in declaration order."""
    if doc.spec is not None:
        return [
            (h.get("module") or h.get("tensor") or "", h.get("type", ""), h.get("action"))
            for h in doc.spec.get("hooks", [])
        ]
    return [(m.path, h.type, h.action) for m in doc.graph.modules for h in m.hooks]


def compare_hooks(a: TraceDoc, b: TraceDoc) -> list[HookDiff]:
    left = _hooks(a)
    right = list(_hooks(b))
    out = []
    for where, kind, action in left:
        match = next((h for h in right if h[0] == where and h[1] == kind), None)
        if match is None:
            out.append(HookDiff(where=where, type=kind, status="only_a", action_a=action))
            continue
        right.remove(match)
        status = "same" if match[2] == action else "changed"
        out.append(HookDiff(where=where, type=kind, status=status, action_a=action, action_b=match[2]))
    out += [HookDiff(where=w, type=k, status="only_b", action_b=act) for w, k, act in right]
    return out


def compare(
    a: Trace | TraceDoc | dict[str, Any], b: Trace | TraceDoc | dict[str, Any], *, rtol: float = DEFAULT_RTOL
) -> CompareDoc:
    """Compare two traces of one model (see comparison_schema)."""
    da, db = as_doc(a), as_doc(b)
    keys_a, keys_b = keyed_nodes(da), keyed_nodes(db)
    key_of_a, key_of_b = {v: k for k, v in keys_a.items()}, {v: k for k, v in keys_b.items()}
    to_b = {keys_a[k]: keys_b[k] for k in keys_a if k in keys_b}
    nodes = Matched(
        matched=[NodeMatch(a=keys_a[k], b=keys_b[k], key=k) for k in keys_a if k in keys_b],
        only_a=[keys_a[k] for k in keys_a if k not in keys_b],
        only_b=[keys_b[k] for k in keys_b if k not in keys_a],
    )
    edges_b = {(e.source, e.target, e.slot, e.kind): e for e in db.graph.edges}
    order_a, order_b = _backward_order(da), _backward_order(db)
    # (the deeper of the two: a hook may insert nodes on one side)
    depth_a, depth_b = depths(da), depths(db)
    names_a, names_b = named_depths(da, depth_a), named_depths(db, depth_b)
    deepest = max([*depth_a.values(), *depth_b.values(), 1])
    matched_edges: list[EdgeMatch] = []
    seen_b: set[str] = set()
    only_a_edges = []
    for e in da.graph.edges:
        other = edges_b.get((to_b.get(e.source, ""), to_b.get(e.target, ""), e.slot, e.kind))
        if other is None:
            only_a_edges.append(e.id)
            continue
        seen_b.add(other.id)
        grads_b = {order_b.get(g.pass_index): g for g in other.grads}
        diffs = []
        depth = max(depth_a.get(e.target, deepest), depth_b.get(other.target, deepest))
        label = f"{key_of_a.get(e.source, e.source)} → {key_of_a.get(e.target, e.target)}"
        for g in e.grads:
            k = order_a.get(g.pass_index)
            if k is not None and k in grads_b:
                diffs.append(number_diff(label, g.value, grads_b[k].value, rtol, (da, db), depth))
        matched_edges.append(EdgeMatch(a=e.id, b=other.id, label=label, grads=diffs))
    edges = EdgesMatched(
        matched=matched_edges,
        only_a=only_a_edges,
        only_b=[e.id for e in db.graph.edges if e.id not in seen_b],
    )

    def named(name: str) -> int:
        return max(names_a.get(name, deepest), names_b.get(name, deepest))

    grads = [
        number_diff(n, da.grads.get(n), db.grads.get(n), rtol, (da, db), named(n))
        for n in _union(da.grads, db.grads)
    ]
    values = [
        number_diff(n, da.values.get(n), db.values.get(n), rtol, (da, db), named(n))
        for n in _union(da.values, db.values)
    ]
    changed = [m for m in matched_edges if any(g.status == "changed" for g in m.grads)]
    summary = Summary(
        changed_grads=[d.name for d in grads if d.status == "changed"],
        unchanged_grads=[d.name for d in grads if d.status == "unchanged"],
        changed_values=[d.name for d in values if d.status == "changed"],
        changed_edges=[m.b for m in changed],
        inserted_nodes=nodes.only_b,
        removed_nodes=nodes.only_a,
        changed_edges_named=[m.label for m in changed],
        inserted_nodes_named=[key_of_b[i] for i in nodes.only_b],
        removed_nodes_named=[key_of_a[i] for i in nodes.only_a],
    )
    return CompareDoc(
        rtol=rtol,
        a=_side(da),
        b=_side(db),
        nodes=nodes,
        edges=edges,
        hooks=compare_hooks(da, db),
        grads=grads,
        values=values,
        summary=summary,
    )


def _side(doc: TraceDoc) -> Side:
    return Side(title=doc.title, source=doc.source, nodes=len(doc.graph.nodes), edges=len(doc.graph.edges))


def _union(a: Iterable[str], b: Iterable[str]) -> list[str]:
    return list(dict.fromkeys([*a, *b]))
