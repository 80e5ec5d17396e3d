"""The compose topology without Docker: nginx (the deployment's config) in front of two API
processes on loopback that share one PostgreSQL and one Redis, all started by the test.

A permalink made on one replica resolves on the other; a trace computed by one is a cache
hit on the other; nginx applies its limits; the rate limit is shared through Redis.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest
from deploy_helpers import local_nginx_conf, nginx_cmd, nginx_test
from server_process import free_port

pytestmark = [pytest.mark.services, pytest.mark.slow]


def tiny(title: str) -> dict:
    return {
        "spec_version": 1,
        "title": title,
        "inputs": {"x": {"value": [1.0, -2.0], "requires_grad": True}},
        "forward": ["y = tanh(x)", "loss = (y * y).sum()"],
    }


@pytest.fixture
def nginx_in_front(tmp_path: Path):  # noqa: ANN201
    procs: list[subprocess.Popen] = []

    def start(upstream_ports: list[int]) -> str:
        workdir = tmp_path / "nginx"
        workdir.mkdir()
        port = free_port()
        conf = local_nginx_conf(workdir, port, upstream_ports)
        checked = nginx_test(conf, workdir)
        assert checked.returncode == 0, checked.stderr
        proc = subprocess.Popen(
            nginx_cmd(conf, workdir, "-g", "daemon off;"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 15
        while True:
            try:
                if httpx.get(url + "/nginx-health").status_code == 200:
                    return url
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, (workdir / "error.log").read_text()
            time.sleep(0.1)

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


def test_two_replicas_share_permalinks_cache_and_rate_limits(
    server_factory,
    postgres_url: str,
    redis_url: str,
    nginx_in_front,  # noqa: ANN001
) -> None:
    env = {
        "DATABASE_URL": postgres_url,
        "REDIS_URL": redis_url,
        "GRADTRACE_WORKERS": "1",
        "GRADTRACE_TRUST_PROXY": "1",
        "GRADTRACE_RATE_PER_MINUTE": "40",
    }
    a = server_factory(env=env)
    b = server_factory(env=env)

    # A permalink made on A resolves on B.
    made = httpx.post(a.url + "/api/v1/specs", json=tiny("shared permalink"), timeout=60)
    assert made.status_code == 201, made.text
    sid = made.json()["id"]
    got = httpx.get(f"{b.url}/api/v1/specs/{sid}")
    assert got.status_code == 200 and got.json()["title"] == "shared permalink"

    # A trace computed by A is a cache hit on B (Redis), byte for byte.
    first = httpx.post(a.url + "/api/v1/trace", json=tiny("shared cache"), timeout=60)
    assert first.status_code == 200 and first.headers["x-cache"] == "miss"
    second = httpx.post(b.url + "/api/v1/trace", json=tiny("shared cache"), timeout=60)
    assert second.headers["x-cache"] == "hit" and second.content == first.content

    # nginx in front, with the deployment's configuration, balances over both.
    front = nginx_in_front([a.port, b.port])
    via = httpx.post(front + "/api/v1/trace", json=tiny("shared cache"), timeout=60)
    assert via.status_code == 200 and via.headers["x-cache"] == "hit"
    assert httpx.get(f"{front}/api/v1/specs/{sid}").json()["title"] == "shared permalink"
    via_link = httpx.post(front + "/api/v1/specs", json=tiny("shared permalink"), timeout=60).json()
    assert via_link["id"] == sid and via_link["url"] == f"{front}/?spec={sid}"  # Host passed through
    # nginx's own limit answers before the API sees the body.
    big = httpx.post(
        front + "/api/v1/trace", content=b"x" * 300_000, headers={"content-type": "application/json"}
    )
    assert big.status_code == 413
    assert big.json()["error"]["code"] == "payload_too_large"
    assert httpx.get(front + "/readyz").status_code == 200

    # The rate limit is per client across replicas (counted in Redis): 40 per minute in total.
    statuses = []
    for _ in range(90):  # enough to cross the limit even if a minute boundary resets the count once
        statuses.append(httpx.get(f"{front}/api/v1/specs/{sid}").status_code)
        if statuses[-1] == 429:
            break
    assert statuses[-1] == 429 and set(statuses[:-1]) == {200}
    limited = httpx.get(f"{a.url}/api/v1/specs/{sid}", headers={"X-Real-IP": "127.0.0.1"})
    assert limited.status_code == 429  # the same bucket seen directly on A


def test_nginx_answers_the_envelope_when_no_replica_is_up(nginx_in_front) -> None:  # noqa: ANN001
    front = nginx_in_front([free_port()])  # nothing listens there
    r = httpx.get(front + "/api/v1/examples")
    assert r.status_code == 503
    assert r.json()["error"]["code"] == "unavailable"
    assert r.headers["retry-after"] == "5"
