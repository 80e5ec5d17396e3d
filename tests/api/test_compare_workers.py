"""POST /compare runs the comparison in a worker, never in the API process, and caches it.

The app runs in this process with its real worker pool (forked from a forkserver that imports
gradtrace afresh), and ``gradtrace.comparison.compare`` is replaced *here* by a function that
fails: a comparison computed in the API process would fail the request. The answer must be the
very bytes the in-process comparison gives; the same pair again is a cache hit that runs no
task, while the other order (the result is not symmetric) or a side named by permalink is not.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

import gradtrace.comparison
from gradtrace.api.app import create_app
from gradtrace.examples import get_example
from gradtrace.service.settings import Settings
from gradtrace.trace import Trace

real_compare = gradtrace.comparison.compare


def expected(trace_a: bytes, trace_b: bytes, permalinks: dict[str, str] | None = None) -> bytes:
    diff = real_compare(Trace.from_json(trace_a), Trace.from_json(trace_b))
    for side, spec_id in (permalinks or {}).items():
        getattr(diff, side).permalink = spec_id
    return diff.model_dump_json().encode()


def test_compare_runs_in_a_worker_and_is_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def compared_in_the_api_process(*_: Any, **__: Any) -> Any:
        raise AssertionError("the API process compared two traces")

    monkeypatch.setattr(gradtrace.comparison, "compare", compared_in_the_api_process)
    settings = Settings(
        sqlite_path=tmp_path / "permalinks.db",
        disk_cache_dir=tmp_path / "tier",
        workers=1,
        rate_per_minute=0,
    )
    app = create_app(settings)
    a, b = get_example("full-backward-hook"), get_example("full-backward-hook-x2")

    async def scenario() -> None:
        async with app.router.lifespan_context(app):
            pool = app.state.trace_service.pool
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=120) as client:
                for _ in range(900):
                    if (await client.get("/readyz")).status_code == 200:
                        break
                    await asyncio.sleep(0.1)

                async def post(path: str, body: object) -> httpx.Response:
                    r = await client.post("/api/v1" + path, json=body)
                    assert r.status_code in (200, 201), r.text
                    return r

                trace_a, trace_b = [(await post("/trace", spec)).content for spec in (a, b)]
                first = await post("/compare", {"a": a, "b": b})
                assert first.headers["x-cache"] == "miss"
                assert first.content == expected(trace_a, trace_b)
                assert pool.tasks_run["run_compare"] == 1

                again = await post("/compare", {"a": a, "b": b})
                assert again.headers["x-cache"] == "hit" and again.content == first.content
                assert pool.tasks_run["run_compare"] == 1 and pool.tasks_run["run_trace"] == 2

                reversed_ = await post("/compare", {"a": b, "b": a})
                assert reversed_.headers["x-cache"] == "miss"
                assert reversed_.content == expected(trace_b, trace_a) != first.content

                sid = (await post("/specs", a)).json()["id"]
                named = await post("/compare", {"a": sid, "b": b})
                assert named.headers["x-cache"] == "miss"
                assert named.content == expected(trace_a, trace_b, {"a": sid})
                assert pool.tasks_run == {"run_trace": 2, "run_compare": 3}

    asyncio.run(scenario())


def test_a_worker_killed_during_a_compare_costs_only_that_request(server_factory) -> None:  # noqa: ANN001
    """The comparison has a trace's crash handling: 503 ``worker_crashed`` with Retry-After,
    the worker replaced, nothing cached, the same compare answered afterwards."""
    server = server_factory(
        env={"GRADTRACE_WORKERS": "1", "GRADTRACE_DEBUG_TRACE_DELAY": "1.5", "GRADTRACE_RATE_PER_MINUTE": "0"}
    )
    a, b = get_example("full-backward-hook"), get_example("full-backward-hook-x2")
    for spec in (a, b):  # both traces cached first: the compare is the only task left
        assert httpx.post(server.url + "/api/v1/trace", json=spec, timeout=120).status_code == 200
    victim = httpx.get(server.url + "/readyz").json()["worker_pid"]

    def compare() -> httpx.Response:
        return httpx.post(server.url + "/api/v1/compare", json={"a": a, "b": b}, timeout=120)

    with ThreadPoolExecutor(1) as ex:
        pending = ex.submit(compare)
        deadline = time.monotonic() + 10
        while not httpx.get(server.url + "/readyz").json().get("busy"):
            assert time.monotonic() < deadline, "the compare never reached the worker"
            time.sleep(0.05)
        os.kill(victim, signal.SIGKILL)
        killed = pending.result(timeout=60)
    assert killed.status_code == 503, killed.text
    assert killed.json()["error"]["code"] == "worker_crashed"
    assert "comparison" in killed.json()["error"]["message"]
    assert int(killed.headers["retry-after"]) >= 1
    after = compare()
    assert after.status_code == 200 and after.headers["x-cache"] == "miss"
    assert compare().headers["x-cache"] == "hit"
