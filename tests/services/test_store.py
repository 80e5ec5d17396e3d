"""The permalink store on SQLite (a file) and on a real PostgreSQL server: one code path."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from gradtrace.service.hashing import permalink_id, spec_hash
from gradtrace.service.store import QuotaExceeded, Quotas, SpecStore, StoreUnavailable

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


def _specs(store: SpecStore, label: str, n: int) -> list[tuple[str, str, dict]]:
    specs = [dict(SPEC, title=f"{label} {i} on {store.backend} {uuid.uuid4().hex}") for i in range(n)]
    return [(permalink_id(s), spec_hash(s), s) for s in specs]


def _size(spec: dict) -> int:
    return len(json.dumps(spec, sort_keys=True, separators=(",", ":")).encode())


def test_client_quota_refuses_new_specs_and_keeps_the_stored(store: SpecStore) -> None:
    client = f"client-{uuid.uuid4().hex}"
    batch = _specs(store, "client quota", 4)
    quotas = Quotas(client_bytes_per_day=sum(_size(s) for _, _, s in batch[:3]) + 5)
    for sid, h, spec in batch[:3]:
        assert store.put(sid, h, spec, client, quotas) is True
    sid, h, spec = batch[3]
    with pytest.raises(QuotaExceeded) as refused:
        store.put(sid, h, spec, client, quotas)
    assert refused.value.quota == "client" and refused.value.limit == quotas.client_bytes_per_day
    assert store.get(sid) is None
    # The same spec again costs nothing: still stored, not counted a second time.
    assert store.put(*batch[0], client, quotas) is False
    # Another client has its own quota; nothing the first one stored was removed.
    assert store.put(sid, h, spec, f"other-{uuid.uuid4().hex}", quotas) is True
    assert all(store.get(i) == s for i, _, s in batch)


def test_total_quota_refuses_new_specs_and_keeps_the_stored(store: SpecStore) -> None:
    first, second = _specs(store, "total quota", 2)
    store.put(*first)
    quotas = Quotas(total_bytes=store.stored_bytes() + _size(second[2]) - 1)
    with pytest.raises(QuotaExceeded) as refused:
        store.put(*second, "someone", quotas)
    assert refused.value.quota == "total"
    assert store.put(*first, "someone", quotas) is False  # already stored: no room needed
    assert store.get(first[0]) == first[2] and store.get(second[0]) is None
    assert store.put(*second, "someone", Quotas(total_bytes=quotas.total_bytes + 1)) is True
