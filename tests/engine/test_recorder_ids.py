"""Node and edge ids come from a per-process cache of formatted numbers (recorder._Ids): each
id must still be its number, below, at and past the cache's bounds."""

from __future__ import annotations

from gradtrace.engine.recorder import _CACHED_IDS, _Ids


def test_node_and_edge_ids_are_their_numbers_across_the_shared_cache() -> None:
    ids = _Ids("n")
    for k in (0, 5, 1023, 1024, 5000, _CACHED_IDS - 1, _CACHED_IDS, _CACHED_IDS + 7):
        made = ids.made
        got = made[k] if k < len(made) else ids.grow(k)
        assert got == f"n{k}"
    assert ids.made == tuple(f"n{k}" for k in range(_CACHED_IDS))
