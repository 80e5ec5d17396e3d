"""The permalink store on SQLite (a file) and on a real PostgreSQL server: one code path."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradtrace.service.hashing import permalink_id, spec_hash
from gradtrace.service.store import SpecStore, StoreUnavailable

pytestmark = pytest.mark.services

SPEC = {"spec_version": 1, "title": "t", "forward": ["y = x * 2"], "inputs": {"x": {"value": [1.5]}}}


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> SpecStore:
    if request.param == "sqlite":
        s = SpecStore(None, tmp_path / "sub" / "gradtrace.db")
    else:
        s = SpecStore(request.getfixturevalue("postgres_url"), tmp_path / "unused.db")
    yield s
    s.close()


def test_put_get_round_trip_is_idempotent(store: SpecStore) -> None:
    spec = dict(SPEC, title=f"round trip on {store.backend}")
    sid = permalink_id(spec)
    assert store.get(sid) is None
    assert store.put(sid, spec_hash(spec), spec) is True
    assert store.put(sid, spec_hash(spec), spec) is False  # same spec again: same row
    assert store.get(sid) == spec
    assert store.ping() is True


def test_data_survives_a_new_connection(store: SpecStore) -> None:
    spec = dict(SPEC, title=f"durable on {store.backend}", unicode="δ ∂ ∇ ’")
    sid = permalink_id(spec)
    store.put(sid, spec_hash(spec), spec)
    store.close()  # a restarted API process: a new connection
    assert store.get(sid) == spec


def test_id_collision_never_overwrites(store: SpecStore) -> None:
    spec = dict(SPEC, title=f"collision on {store.backend}")
    sid = permalink_id(spec)
    store.put(sid, spec_hash(spec), spec)
    with pytest.raises(StoreUnavailable):
        store.put(sid, "0" * 64, {"other": True})
    assert store.get(sid) == spec


def test_unreachable_postgres_is_store_unavailable(tmp_path: Path) -> None:
    from server_process import free_port

    s = SpecStore(f"postgresql://postgres@127.0.0.1:{free_port()}/none", tmp_path / "x.db")
    assert s.ping() is False
    with pytest.raises(StoreUnavailable):
        s.get("aaaaaaaaaaaa")


def test_permalink_ids_are_short_and_content_derived() -> None:
    a = permalink_id({"b": 1, "a": [1, 2]})
    assert a == permalink_id({"a": [1, 2], "b": 1})  # key order does not matter
    assert a != permalink_id({"a": [2, 1], "b": 1})
    assert len(a) == 12 and a.isalnum() and a == a.lower()
