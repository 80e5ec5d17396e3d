"""Permalinks over a real server: round trip, idempotence, immutability headers, durability,
on SQLite (the default) and on a real PostgreSQL server."""

from __future__ import annotations

import httpx
import pytest
from specs import reordered, seed_002, tiny

from gradtrace.spec import parse_spec


def make_permalink(base: str, spec: dict) -> httpx.Response:
    return httpx.post(base + "/api/v1/specs", json=spec, timeout=60)


def check_round_trip(base: str, title: str) -> str:
    spec = seed_002(title=title)
    r = make_permalink(base, spec)
    assert r.status_code == 201, r.text
    body = r.json()
    sid = body["id"]
    assert body == {
        "id": sid,
        "url": f"{base}/?spec={sid}",
        "embed_url": f"{base}/embed/{sid}",
        "diagram_url": f"{base}/api/v1/specs/{sid}/diagram.svg",
    }
    assert r.headers["location"] == f"{base}/api/v1/specs/{sid}"
    # Same spec (any key order): same id, nothing new stored.
    again = make_permalink(base, reordered(spec))
    assert again.status_code == 200 and again.json()["id"] == sid
    got = httpx.get(f"{base}/api/v1/specs/{sid}")
    assert got.status_code == 200
    assert got.json() == parse_spec(spec).normalized()
    assert got.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert (
        httpx.get(f"{base}/api/v1/specs/{sid}", headers={"If-None-Match": got.headers["etag"]}).status_code
        == 304
    )
    return sid


def test_permalink_round_trip_on_sqlite(live_server: str) -> None:
    check_round_trip(live_server, "permalink on sqlite")


def test_trace_of_a_permalink_equals_the_posted_trace(live_server: str) -> None:
    spec = tiny("permalink trace", 0.5)
    sid = make_permalink(live_server, spec).json()["id"]
    stored = httpx.get(f"{live_server}/api/v1/specs/{sid}/trace", timeout=60)
    assert stored.status_code == 200, stored.text
    assert stored.headers["cache-control"] == "public, max-age=31536000, immutable"
    posted = httpx.post(live_server + "/api/v1/trace", json=spec, timeout=60)
    assert posted.headers["x-cache"] == "hit"  # the same cache entry
    assert posted.content == stored.content and posted.headers["etag"] == stored.headers["etag"]


def test_invalid_spec_is_not_stored(live_server: str) -> None:
    r = make_permalink(live_server, seed_002(forward=["y = nope(x)"]))
    assert r.status_code == 422
    assert r.json()["error"]["path"] == "/forward/0"


def test_permalinks_survive_a_server_restart(server_factory, tmp_path) -> None:  # noqa: ANN001
    db = tmp_path / "durable.db"
    first = server_factory(env={"GRADTRACE_DB": str(db), "GRADTRACE_WORKERS": "1"})
    sid = check_round_trip(first.url, "survives restart")
    first.stop()
    second = server_factory(env={"GRADTRACE_DB": str(db), "GRADTRACE_WORKERS": "1"})
    r = httpx.get(f"{second.url}/api/v1/specs/{sid}")
    assert r.status_code == 200 and r.json()["title"] == "survives restart"


@pytest.mark.services
def test_permalink_round_trip_on_postgresql(server_factory, postgres_url: str) -> None:  # noqa: ANN001
    server = server_factory(env={"DATABASE_URL": postgres_url, "GRADTRACE_WORKERS": "1"})
    sid = check_round_trip(server.url, "permalink on postgresql")
    # It really is in PostgreSQL (not a SQLite file on the side).
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT spec FROM permalinks WHERE id = %s", (sid,)).fetchone()
    assert row is not None and '"permalink on postgresql"' in row[0]
    trace = httpx.get(f"{server.url}/api/v1/specs/{sid}/trace", timeout=60)
    assert trace.status_code == 200 and trace.json()["title"] == "permalink on postgresql"


def test_public_url_setting_makes_absolute_links(server_factory) -> None:  # noqa: ANN001
    server = server_factory(
        env={"GRADTRACE_PUBLIC_URL": "https://gradtrace.example/", "GRADTRACE_WORKERS": "1"}
    )
    body = make_permalink(server.url, tiny("public url")).json()
    assert body["url"] == f"https://gradtrace.example/?spec={body['id']}"
    assert body["embed_url"] == f"https://gradtrace.example/embed/{body['id']}"


def test_storage_quotas_answer_a_clear_4xx_and_lose_nothing(server_factory) -> None:  # noqa: ANN001
    server = server_factory(
        env={"GRADTRACE_STORE_CLIENT_BYTES_PER_DAY": "600", "GRADTRACE_RATE_PER_MINUTE": "0"}
    )
    kept = make_permalink(server.url, tiny("quota 0", 0.5))
    assert kept.status_code == 201, kept.text
    answers = [make_permalink(server.url, tiny(f"quota {i}", 0.5)) for i in range(1, 6)]
    refused = [r for r in answers if r.status_code != 201]
    assert refused, "600 bytes a day hold a few tiny specs, not six"
    for r in refused:
        assert r.status_code == 429 and r.headers["retry-after"] == "3600"
        assert r.json()["error"]["code"] == "client_storage_quota_exceeded"
    # What is stored stays, and storing it again costs nothing.
    assert make_permalink(server.url, tiny("quota 0", 0.5)).status_code == 200
    assert httpx.get(f"{server.url}/api/v1/specs/{kept.json()['id']}").status_code == 200

    total = server_factory(env={"GRADTRACE_STORE_TOTAL_BYTES": "10", "GRADTRACE_RATE_PER_MINUTE": "0"})
    r = make_permalink(total.url, tiny("total quota", 0.5))
    assert r.status_code == 413 and r.json()["error"]["code"] == "total_storage_quota_exceeded"
