"""When PostgreSQL or Redis is unreachable: clear 503s where data is needed, service otherwise."""

from __future__ import annotations

import time

import httpx
import pytest
from server_process import free_port

pytestmark = pytest.mark.services

SPEC = {"spec_version": 1, "title": "degraded", "inputs": {"x": {"value": [2.0]}}, "forward": ["y = x * 3"]}


def wait_alive(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("server did not come up")


def test_database_down_is_503_for_permalinks_and_not_ready(server_factory) -> None:  # noqa: ANN001
    dead = f"postgresql://postgres@127.0.0.1:{free_port()}/gradtrace"
    server = server_factory(env={"DATABASE_URL": dead, "GRADTRACE_WORKERS": "1"}, wait=False)
    wait_alive(server.url)
    r = httpx.post(server.url + "/api/v1/specs", json=SPEC, timeout=60)
    assert r.status_code == 503
    assert r.json()["error"]["code"] == "store_unavailable" and r.headers["retry-after"] == "5"
    assert httpx.get(server.url + "/api/v1/specs/aaaaaaaaaaaa").status_code == 503
    # Tracing does not need the database.
    deadline = time.monotonic() + 60
    while (t := httpx.post(server.url + "/api/v1/trace", json=SPEC, timeout=60)).status_code == 503:
        assert t.json()["error"]["code"] != "store_unavailable"
        assert time.monotonic() < deadline
        time.sleep(0.5)  # workers still warming up
    assert t.status_code == 200
    ready = httpx.get(server.url + "/readyz")
    assert ready.status_code == 503 and ready.json()["error"]["code"] == "store_down"


def test_redis_down_degrades_to_an_uncached_service_limited_in_process(server_factory) -> None:  # noqa: ANN001
    server = server_factory(
        env={
            "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0",
            "GRADTRACE_WORKERS": "1",
            "GRADTRACE_RATE_PER_MINUTE": "2",
        }
    )
    statuses = []
    for _ in range(5):  # over the rate limit: counted in process while Redis is away
        r = httpx.post(server.url + "/api/v1/trace", json=SPEC, timeout=60)
        statuses.append(r.status_code)
        if r.status_code == 200:
            assert r.headers["x-cache"] == "miss"  # the cache cannot store: every trace is computed
        else:
            assert r.json()["error"]["code"] == "rate_limited", r.text
    # two a minute: at most four 200s even if a minute turns between the requests
    assert statuses[0] == 200 and statuses.count(200) <= 4 and 429 in statuses, statuses
