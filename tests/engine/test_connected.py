"""analyses.connected_to: the named tensors upstream of the backward's roots, found by a sweep
of the edges from the last, or by the whole walk when the sweep cannot settle it."""

from __future__ import annotations

import random

from gradtrace.engine.diagnostics import connected_to, reachable_from
from gradtrace.trace_schema import GraphEdge


def _edges(pairs: list[tuple[str, str]]) -> list[GraphEdge]:
    return [GraphEdge(id=f"e{k}", source=s, target=t, kind="data") for k, (s, t) in enumerate(pairs)]


def test_chain_in_creation_order_and_a_detached_branch() -> None:
    edges = _edges([("a", "b"), ("b", "c"), ("x", "y"), ("c", "loss")])
    assert connected_to(["loss"], edges, {"c", "a", "y"}) == {"c", "a"}
    assert connected_to(["loss"], edges, {"loss"}) == {"loss"}
    assert connected_to(["loss"], edges, set()) == set()


def test_edges_out_of_creation_order_fall_back_to_the_walk() -> None:
    # "a" -> "b" recorded last: one sweep from the end reaches "b", not "a"
    edges = _edges([("b", "c"), ("c", "loss"), ("a", "b")])
    assert connected_to(["loss"], edges, {"a"}) == {"a"}


def test_same_as_the_whole_walk_on_random_graphs() -> None:
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(1, 12)
        pairs = [(f"n{rng.randrange(n)}", f"n{rng.randrange(n)}") for _ in range(rng.randint(0, 20))]
        edges = _edges(pairs)
        roots = [f"n{rng.randrange(n)}"]
        wanted = {f"n{rng.randrange(n)}" for _ in range(3)}
        assert connected_to(roots, edges, wanted) == wanted & reachable_from(roots, edges)
