"""Worker isolation over a real server: a killed worker costs only its own request (503 +
Retry-After) and is replaced; a hung one is stopped at the wall-clock bound; overload sheds
with 503; rate limits answer 429.

GRADTRACE_DEBUG_TRACE_DELAY makes every trace sleep first inside the worker, so a request
is reliably in flight when the test acts.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from server_process import process_group
from specs import tiny


def trace(base: str, title: str) -> httpx.Response:
    return httpx.post(base + "/api/v1/trace", json=tiny(title), timeout=120)


def wait_busy(base: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if httpx.get(base + "/readyz").json().get("busy"):
            return
        time.sleep(0.05)
    raise AssertionError("the trace never reached the worker")


def assert_unavailable(r: httpx.Response, code: str) -> None:
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == code
    assert int(r.headers["retry-after"]) >= 1


def test_killed_worker_costs_only_its_own_request(server_factory) -> None:  # noqa: ANN001
    server = server_factory(env={"GRADTRACE_WORKERS": "1", "GRADTRACE_DEBUG_TRACE_DELAY": "1.5"})
    victim = httpx.get(server.url + "/readyz").json()["worker_pid"]
    with ThreadPoolExecutor(1) as ex:
        pending = ex.submit(trace, server.url, "killed mid-request")
        wait_busy(server.url)
        os.kill(victim, signal.SIGKILL)
        killed = pending.result(timeout=60)
    assert_unavailable(killed, "worker_crashed")
    # The next requests are served by a fresh worker.
    for i in range(2):
        r = trace(server.url, f"after the kill {i}")
        assert r.status_code == 200, r.text
    ready = httpx.get(server.url + "/readyz").json()
    assert ready["status"] == "ready" and ready["worker_pid"] != victim
    # The killed spec was not cached as a failure: it traces fine now.
    assert trace(server.url, "killed mid-request").status_code == 200


def test_a_broken_pool_is_rebuilt(server_factory) -> None:  # noqa: ANN001
    """The forkserver and every worker killed: at most one request fails, then a new pool serves."""
    server = server_factory(env={"GRADTRACE_WORKERS": "1"})
    assert trace(server.url, "before").status_code == 200
    for pid in server.worker_pids():
        os.kill(pid, signal.SIGKILL)
    os.kill(server.helpers()["forkserver"], signal.SIGKILL)
    first = trace(server.url, "pool broken")
    if first.status_code != 200:
        assert_unavailable(first, "worker_unavailable")
    for i in range(3):
        assert trace(server.url, f"rebuilt {i}").status_code == 200
    assert httpx.get(server.url + "/readyz").status_code == 200


def test_a_stopped_idle_worker_costs_no_request(server_factory) -> None:  # noqa: ANN001
    """SIGSTOP on the only worker: the trace it never acknowledged runs on its replacement."""
    server = server_factory(env={"GRADTRACE_WORKERS": "1"})
    (victim,) = server.worker_pids()
    os.kill(victim, signal.SIGSTOP)
    try:
        started = time.monotonic()
        r = trace(server.url, "sent to a stopped worker")
        assert r.status_code == 200, r.text
        assert time.monotonic() - started < 15
        assert victim not in server.worker_pids()
    finally:
        try:
            os.kill(victim, signal.SIGCONT)
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["graceful", "sigkill"])
def test_no_process_outlives_the_api(server_factory, sig: int) -> None:  # noqa: ANN001
    """SIGTERM: the API stops workers, forkserver and resource tracker. SIGKILL: nothing can clean
    up, so each of them exits by itself when its pipe to the API closes."""
    server = server_factory(env={"GRADTRACE_WORKERS": "2"})
    deadline = time.monotonic() + 30
    while httpx.get(server.url + "/readyz").json().get("workers_alive") != 2:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert trace(server.url, "before the stop").status_code == 200
    assert len(process_group(server.proc.pid)) >= 5  # API, forkserver, resource tracker, two workers
    os.kill(server.proc.pid, sig)
    server.proc.wait(timeout=30)
    deadline = time.monotonic() + 20
    while process_group(server.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert process_group(server.proc.pid) == []


def test_hung_worker_is_stopped_at_the_time_limit(server_factory) -> None:  # noqa: ANN001
    server = server_factory(
        env={"GRADTRACE_WORKERS": "1", "GRADTRACE_DEBUG_TRACE_DELAY": "30", "GRADTRACE_TRACE_TIMEOUT": "1"}
    )
    started = time.monotonic()
    r = trace(server.url, "hangs")
    assert time.monotonic() - started < 10
    assert_unavailable(r, "trace_timeout")
    assert "1 s" in r.json()["error"]["message"]
    # The server and a replacement worker are alive.
    deadline = time.monotonic() + 20
    while httpx.get(server.url + "/readyz").status_code != 200:
        assert time.monotonic() < deadline, "no worker after the timeout"
        time.sleep(0.2)


def test_overload_sheds_with_503(server_factory) -> None:  # noqa: ANN001
    # Four clients (X-Real-IP behind the proxy), one request each: one client's own extra
    # requests wait for its share of the workers outside the queue (test_client_share.py).
    server = server_factory(
        env={
            "GRADTRACE_WORKERS": "1",
            "GRADTRACE_QUEUE_LIMIT": "1",
            "GRADTRACE_DEBUG_TRACE_DELAY": "2",
            "GRADTRACE_TRUST_PROXY": "1",
        }
    )

    def client(i: int) -> httpx.Response:
        headers = {"x-real-ip": f"10.0.0.{i + 1}"}
        return httpx.post(server.url + "/api/v1/trace", json=tiny(f"load {i}"), headers=headers, timeout=120)

    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(client, range(4)))
    codes = sorted(r.status_code for r in results)
    assert codes == [200, 200, 503, 503], [r.text[:120] for r in results]
    for r in results:
        if r.status_code == 503:
            assert_unavailable(r, "overloaded")


def test_identical_requests_in_flight_share_one_worker_run(server_factory) -> None:  # noqa: ANN001
    # One worker, no queue: if the three identical requests each needed a worker, two would shed.
    server = server_factory(
        env={"GRADTRACE_WORKERS": "1", "GRADTRACE_QUEUE_LIMIT": "0", "GRADTRACE_DEBUG_TRACE_DELAY": "1.5"}
    )
    with ThreadPoolExecutor(3) as ex:
        results = list(ex.map(lambda _: trace(server.url, "single flight"), range(3)))
    assert [r.status_code for r in results] == [200, 200, 200], [r.text[:100] for r in results]
    assert sorted(r.headers["x-cache"] for r in results) == ["miss", "shared", "shared"]
    assert len({r.content for r in results}) == 1


def test_rate_limit_is_429_with_retry_after(server_factory) -> None:  # noqa: ANN001
    server = server_factory(env={"GRADTRACE_WORKERS": "1", "GRADTRACE_RATE_PER_MINUTE": "5"})
    statuses = []
    for _ in range(12):  # two windows' worth at most, in case a minute boundary falls inside
        r = httpx.get(server.url + "/api/v1/schema/spec")
        statuses.append(r.status_code)
        if r.status_code == 429:
            err = r.json()["error"]
            assert err["code"] == "rate_limited" and err["path"] is None
            assert 1 <= int(r.headers["retry-after"]) <= 61
            break
    assert statuses[-1] == 429 and set(statuses[:-1]) == {200}
    assert len(statuses) >= 6
    # Health checks are not rate limited.
    assert httpx.get(server.url + "/healthz").status_code == 200


MEMORY_HUNGRY = {
    "spec_version": 1,
    "title": "memory hungry",
    "inputs": {"a": {"shape": [300, 1000], "init": "randn", "requires_grad": True}},
    "forward": ["y = tanh(a)", "z = y * y", "w = z * y", "loss = w.sum()"],
}


def test_memory_cap_is_413_and_the_worker_is_replaced(server_factory) -> None:  # noqa: ANN001
    # 4 MB per task: the trace of 300k-element tensors (within every declared limit) needs more.
    server = server_factory(env={"GRADTRACE_WORKERS": "1", "GRADTRACE_WORKER_MEMORY_MB": "4"})
    r = httpx.post(server.url + "/api/v1/trace", json=MEMORY_HUNGRY, timeout=120)
    assert r.status_code == 413, r.text
    assert r.json()["error"] == {
        "code": "memory_limit",
        "message": "the trace needed more memory than a worker may use",
        "path": None,
    }
    assert trace(server.url, "small after the memory cap").status_code == 200


def test_the_same_trace_fits_the_default_memory_cap(live_server: str) -> None:
    r = httpx.post(live_server + "/api/v1/trace", json=MEMORY_HUNGRY, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["values"]["a"]["shape"] == [300, 1000]


# --- sizing: workers from the CPU quota, the cache from a byte budget (no server needed) ---


def test_workers_follow_the_cgroup_cpu_quota(tmp_path) -> None:  # noqa: ANN001
    from gradtrace.service.settings import cpu_quota

    affinity = len(os.sched_getaffinity(0))
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("max 100000\n")  # no quota: the affinity mask decides
    assert cpu_quota(cpu_max) == affinity
    cpu_max.write_text("50000 100000\n")  # half a CPU still gets one worker
    assert cpu_quota(cpu_max) == 1
    cpu_max.write_text("150000 100000\n")  # 1.5 CPUs: rounded up, never above the affinity
    assert cpu_quota(cpu_max) == min(2, affinity)
    cpu_max.write_text(f"{64 * 100000} 100000\n")  # a quota above the host: the affinity
    assert cpu_quota(cpu_max) == affinity
    assert cpu_quota(tmp_path / "missing") == affinity


def test_memory_cache_is_bounded_in_bytes() -> None:
    import asyncio

    from gradtrace.service.cache import MemoryCache

    async def scenario() -> None:
        cache = MemoryCache(max_bytes=10_000, max_entry_bytes=4_000)
        for i in range(20):
            await cache.set(f"k{i}", bytes(3_000))
            assert cache.size_bytes <= 10_000
        # Least recently used first out: the three newest stay.
        assert [await cache.get(f"k{i}") is not None for i in range(16, 20)] == [False, True, True, True]
        await cache.get("k17")  # touched: now the newest
        await cache.set("k20", bytes(3_000))
        assert await cache.get("k17") is not None and await cache.get("k18") is None
        await cache.set("big", bytes(5_000))  # over the per-entry cap: not kept
        assert await cache.get("big") is None

    asyncio.run(scenario())


@pytest.mark.services
def test_redis_cache_entries_expire_and_are_capped(redis_url: str) -> None:
    import asyncio

    import redis

    from gradtrace.service.cache import RedisCache

    async def scenario() -> None:
        cache = RedisCache(redis_url, ttl_s=600, max_entry_bytes=4_000)
        await cache.set("small", bytes(3_000))
        await cache.set("big", bytes(5_000))  # over the per-entry cap: not stored
        assert await cache.get("small") == bytes(3_000)
        assert await cache.get("big") is None
        await cache.close()

    asyncio.run(scenario())
    ttl = redis.Redis.from_url(redis_url).ttl(RedisCache.PREFIX + "small")
    assert 0 < ttl <= 600
