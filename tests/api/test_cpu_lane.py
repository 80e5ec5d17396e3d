"""Issue 38: the API's own CPU work (api/cpu.py) takes turns by client, is bounded and charged,
and a body refused once is refused again from memory, before it is parsed."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from pathlib import Path

import httpx
import pytest
from cost_bombs import identity_calls

import gradtrace
from gradtrace.api.cpu import LARGE_BODY, AcceptedMemory, CpuLane, RefusalMemory, lane
from gradtrace.problem import Problem
from gradtrace.service.ratelimit import CURRENT_CLIENT


def _spin(seconds: float) -> tuple[float, float]:
    """Real CPU in a helper for ``seconds``: (start, end) on the system's monotonic clock."""
    started = time.monotonic()
    ends = time.process_time() + seconds
    while time.process_time() < ends:
        pass
    return started, time.monotonic()


async def _as(client: str, lane: CpuLane, fn: object, *args: object) -> object:
    CURRENT_CLIENT.set(client)  # a task of its own: as a request's task
    return await lane.run(fn, *args)  # type: ignore[arg-type]


@pytest.mark.process  # helper processes
def test_clients_take_turns_one_job_each_and_are_charged() -> None:
    async def main() -> tuple[list, object, dict[str, float]]:
        lane = CpuLane(processes=2)
        await lane.warm()
        charged: dict[str, float] = {}

        async def charge(client: str, seconds: float) -> None:
            charged[client] = charged.get(client, 0.0) + seconds

        lane.charge_to(charge)
        # a's jobs long beside the scheduling delays of a loaded machine (make test's parallel
        # stage: a helper not given a core for 0.1 s had b start after a's second job)
        greedy = [asyncio.create_task(_as("a", lane, _spin, 0.4)) for _ in range(5)]
        await asyncio.sleep(0.05)  # a's first job runs, four wait
        other = await _as("b", lane, _spin, 0.01)
        spans = await asyncio.gather(*greedy)
        lane.close()
        return sorted(spans), other, charged

    spans, other, charged = asyncio.run(main())
    # a's jobs never ran two at a time, though two helpers were there
    assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(spans))
    assert other[0] < spans[1][0]  # b ran before a's second job: it did not wait behind a's queue
    assert charged["a"] >= 5 * 0.4 * 0.9 and charged["b"] >= 0.01 * 0.9


@pytest.mark.process  # helper processes
def test_one_client_past_its_share_gets_429_not_503() -> None:
    async def main() -> list[object]:
        lane = CpuLane(processes=1, waiting=64, per_client_waiting=3)
        jobs = [_as("a", lane, _spin, 0.01) for _ in range(6)]
        outcomes = await asyncio.gather(*jobs, return_exceptions=True)
        lane.close()
        return outcomes

    outcomes = asyncio.run(main())
    refused = [o for o in outcomes if isinstance(o, Problem)]
    # 1 runs, 3 wait, 2 refused: the client's own share, not the server's
    assert len(refused) == 2 and {(p.status, p.code) for p in refused} == {(429, "too_many_in_flight")}
    assert all(p.headers["Retry-After"] == "2" for p in refused)
    assert sum(isinstance(o, tuple) for o in outcomes) == 4


@pytest.mark.process  # helper processes
def test_a_full_lane_sheds_with_503() -> None:
    async def main() -> list[object]:
        lane = CpuLane(processes=1, waiting=3, per_client_waiting=16)
        jobs = [_as(f"c{n}", lane, _spin, 0.01) for n in range(6)]  # six clients, one job each
        outcomes = await asyncio.gather(*jobs, return_exceptions=True)
        lane.close()
        return outcomes

    outcomes = asyncio.run(main())
    shed = [o for o in outcomes if isinstance(o, Problem)]
    assert len(shed) == 2 and {(p.status, p.code) for p in shed} == {(503, "overloaded")}  # 1 runs, 3 wait
    assert all(p.headers["Retry-After"] == "1" for p in shed)


@pytest.mark.process  # helper processes
def test_a_job_past_its_time_is_refused_and_its_helper_replaced() -> None:
    async def main() -> tuple[object, object]:
        lane = CpuLane(processes=1, timeout_s=2.0)
        await lane.warm()
        late = await asyncio.gather(_as("a", lane, _spin, 30.0), return_exceptions=True)
        await lane.warm()  # new helpers (a cold start may take over 2 s)
        after = await _as("a", lane, _spin, 0.0)
        lane.close()
        return late[0], after

    late, after = asyncio.run(main())
    assert isinstance(late, Problem) and (late.status, late.code) == (413, "too_costly")
    assert isinstance(after, tuple)


@pytest.mark.process  # helper processes
def test_a_cancelled_wait_frees_its_turn() -> None:
    async def main() -> object:
        lane = CpuLane(processes=1)
        first = asyncio.create_task(_as("a", lane, _spin, 0.3))
        await asyncio.sleep(0.05)
        waiting = asyncio.create_task(_as("b", lane, _spin, 0.0))
        await asyncio.sleep(0.05)
        waiting.cancel()  # the client hung up while waiting
        await first
        done = await _as("c", lane, _spin, 0.0)
        lane.close()
        return done

    assert isinstance(asyncio.run(main()), tuple)


def test_refusals_are_remembered_by_body_not_stateful_ones() -> None:
    memory = RefusalMemory(entries=2)
    key = memory.key("POST", "/api/v1/trace", b'{"x": 1}')
    assert key != memory.key("POST", "/api/v1/compare", b'{"x": 1}')
    memory.remember(key, Problem("too_costly", "too costly", "/forward", line=3))
    again = memory.recall(key)
    assert again is not None and (again.code, again.status, again.path, again.line) == (
        "too_costly",
        413,
        "/forward",
        3,
    )
    assert again is not memory.recall(key)  # a fresh exception each time
    quota = memory.key("POST", "/api/v1/specs", b"{}")
    memory.remember(quota, Problem("total_storage_quota_exceeded", "full", status=413))
    memory.remember(quota, Problem("overloaded", "busy", status=503))
    assert memory.recall(quota) is None
    for n in range(3):  # bounded: the least recently used goes first
        memory.remember(memory.key("POST", "/", b"%d" % n), Problem("invalid_spec", "bad"))
    assert memory.recall(key) is None


def test_a_body_refused_once_is_not_checked_again(live_server: str) -> None:
    doc = identity_calls()  # refused 413 too_costly after checking and pricing it
    # (a title of its own: the session's server may have refused the same bomb for another test)
    doc["title"] = f"refused once, {uuid.uuid4()}"
    jobs = []
    for _ in range(3):
        before = httpx.get(live_server + "/readyz", timeout=30).json()["api_cpu"]["jobs_run"]
        r = httpx.post(live_server + "/api/v1/trace", json=doc, timeout=60)
        assert r.status_code == 413 and r.json()["error"]["code"] == "too_costly", r.text[:300]
        jobs.append(httpx.get(live_server + "/readyz", timeout=30).json()["api_cpu"]["jobs_run"] - before)
    assert jobs == [1, 0, 0]


@pytest.mark.parametrize("body", [b'{"python": "x = 0x' + b"f" * 4000 + b'"}'])
def test_a_translation_refused_once_is_answered_from_memory(live_server: str, body: bytes) -> None:
    answers = []
    for _ in range(2):
        r = httpx.post(
            live_server + "/api/v1/translate",
            content=body,
            headers={"content-type": "application/json"},
            timeout=60,
        )
        answers.append((r.status_code, r.json()))
    assert answers[0] == answers[1] and answers[0][0] == 413


def test_accepted_bodies_are_remembered_bounded_by_count_and_bytes() -> None:
    memory = AcceptedMemory(entries=2, max_bytes=100 * AcceptedMemory.BYTES_PER_BODY_BYTE)
    keys = [RefusalMemory.key("POST", "/api/v1/trace", b"%d" % n) for n in range(4)]
    memory.remember(keys[0], "a", 10)
    memory.remember(keys[1], "b", 10)
    assert memory.recall(keys[0]) == "a"  # now the most recently used
    memory.remember(keys[2], "c", 10)  # over two entries: b (least recently used) goes
    assert [memory.recall(k) for k in keys[:3]] == ["a", None, "c"]
    memory.remember(keys[3], "d", 95)  # over 100 body bytes: a and c go
    assert [memory.recall(k) for k in keys] == [None, None, None, "d"]
    assert memory.bytes == 95 * AcceptedMemory.BYTES_PER_BODY_BYTE
    memory.remember(keys[0], "big", LARGE_BODY + 1)  # a big body is not kept
    assert memory.recall(keys[0]) is None and memory.recall(keys[3]) == "d"


def test_a_repeated_trace_body_skips_the_lane(app_server: str) -> None:
    # the app serves in this process: its lane's jobs are counted here
    doc = json.loads(
        (Path(gradtrace.__file__).parent / "examples" / "full-backward-hook.json").read_text(encoding="utf-8")
    )
    doc["title"] = f"repeated, {uuid.uuid4()}"  # not accepted before in this session's app
    body = json.dumps(doc).encode()
    jobs, caches, etags = [], [], set()
    for _ in range(3):
        before = lane().jobs_run
        r = httpx.post(
            app_server + "/api/v1/trace",
            content=body,
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
        assert r.status_code == 200, r.text[:300]
        jobs.append(lane().jobs_run - before)
        caches.append(r.headers["X-Cache"])
        etags.add(r.headers["ETag"])
    assert jobs == [1, 0, 0] and caches == ["miss", "hit", "hit"] and len(etags) == 1
    # the same spec in other bytes is checked again (and answered from the trace cache)
    before = lane().jobs_run
    r = httpx.post(
        app_server + "/api/v1/trace",
        content=body + b" ",
        headers={"Content-Type": "application/json"},
        timeout=60,
    )
    assert r.status_code == 200 and r.headers["X-Cache"] == "hit" and r.headers["ETag"] in etags
    assert lane().jobs_run - before == 1
