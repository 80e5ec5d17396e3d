"""Invariants every trace must satisfy (shared by the property and example tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def packed_storage_bytes(run: Callable[[], Any]) -> int:
    """Bytes of the distinct storages autograd saves while ``run()`` builds its graph, as
    PyTorch's own saved-tensor hooks see them (the oracle of analyses.memory)."""
    seen: dict[tuple[int, int], int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        seen[(s.data_ptr(), s.nbytes())] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run()
    assert out is not None
    return sum(seen.values())


def check_engine_order(doc: Any) -> None:
    for p in doc.passes:
        if p.phase != "backward":
            continue
        events = [e for e in doc.events if e.pass_index == p.index]
        pre: dict[str, int] = {}
        post: dict[str, int] = {}
        for e in events:
            if e.kind == "node_pre":
                assert e.target not in pre, f"{e.target} ran twice in pass {p.index}"
                pre[e.target] = e.seq
            elif e.kind == "node_post":
                assert e.target in pre and e.target not in post
                post[e.target] = e.seq
        errors = [e for e in events if e.kind == "error"]
        if errors:  # the engine stopped inside the node that raised
            assert set(pre) - set(post) <= {errors[0].node}
        else:
            assert set(pre) == set(post)
        for edge in doc.graph.edges:
            if edge.kind == "data" and edge.source in pre and edge.target in post:
                assert post[edge.target] < pre[edge.source], f"{edge.id}: producer ran before consumer"
                assert [g.seq for g in edge.grads if g.pass_index == p.index] == [post[edge.target]]


def check_node_states(doc: Any) -> None:
    """Every event's node exists and was created before; passes tile the timeline."""
    created = {n.id: n.created_seq for n in doc.graph.nodes}
    for e in doc.events:
        if e.node is not None:
            assert e.node in created and created[e.node] <= e.seq, f"event {e.seq} before its node"
    # top-level passes tile the timeline; a nested engine run lies inside its parent
    seqs = [(p.first_seq, p.last_seq) for p in doc.passes if p.parent is None]
    assert seqs[0][0] == 0 and seqs[-1][1] == len(doc.events) - 1
    for (_, last), (first, _) in zip(seqs, seqs[1:], strict=False):
        assert first == last + 1
    for p in doc.passes:
        if p.parent is not None:
            outer = doc.passes[p.parent]
            assert outer.first_seq < p.first_seq <= p.last_seq < outer.last_seq
    for e in doc.events:
        p = doc.passes[e.pass_index]
        assert p.first_seq <= e.seq <= p.last_seq and e.phase == p.phase
    ids = [n.id for n in doc.graph.nodes]
    assert ids == [f"n{i}" for i in range(len(ids))]
    assert [e.id for e in doc.graph.edges] == [f"e{i}" for i in range(len(doc.graph.edges))]
