"""One client's share of the workers (``service/client_share.py``) and the worker time reserved
before a run (``MemoryRateLimiter.reserve``): turns, the 429 past them, estimates."""

from __future__ import annotations

import asyncio

import pytest

from gradtrace.problem import Problem
from gradtrace.service.client_share import FIRST_ESTIMATE_S, ClientShare
from gradtrace.service.ratelimit import MemoryRateLimiter


def test_a_client_runs_its_share_at_once_waits_a_few_more_and_is_refused_past_them() -> None:
    async def scenario() -> tuple[list[str], list[Problem]]:
        share = ClientShare(running=1, waiting=2, timeout_s=5)
        order: list[str] = []
        release = asyncio.Event()

        async def task(client: str, name: str) -> None:
            async with share.turn(client):
                order.append(name)
                await release.wait()

        running = [asyncio.create_task(task("greedy", f"g{i}")) for i in range(3)]
        other = asyncio.create_task(task("other", "o"))
        await asyncio.sleep(0.05)
        refused = []
        try:
            await task("greedy", "g3")  # one running and two waiting already
        except Problem as exc:
            refused.append(exc)
        assert order == ["g0", "o"]  # the other client is not behind the greedy one's line
        release.set()
        await asyncio.gather(*running, other)
        return order, refused

    order, refused = asyncio.run(scenario())
    assert order == ["g0", "o", "g1", "g2"]
    (problem,) = refused
    assert problem.status == 429 and problem.code == "too_many_in_flight"
    assert problem.headers == {"Retry-After": "2"} and "1 trace(s) running" in problem.message


def test_waiting_past_the_timeout_for_ones_own_turn_is_a_429() -> None:
    async def scenario() -> None:
        share = ClientShare(running=1, waiting=4, timeout_s=0.1)
        async with share.turn("c"):
            with pytest.raises(Problem) as refused:
                async with share.turn("c"):
                    pass
        assert refused.value.status == 429 and "waited 0.1 s" in refused.value.message
        async with share.turn("c"):  # the turn freed, nothing of it left behind
            pass

    asyncio.run(scenario())


def test_estimates_follow_what_a_clients_tasks_took() -> None:
    share = ClientShare(running=1, waiting=0, timeout_s=1)
    assert share.estimate("new") == FIRST_ESTIMATE_S
    share.observe("c", 3.0)
    share.observe("c", 3.0)
    assert share.estimate("c") == pytest.approx(((FIRST_ESTIMATE_S + 3) / 2 + 3) / 2)  # a moving average


def test_reservations_count_against_the_budget_before_the_runs_end() -> None:
    async def scenario() -> list[bool]:
        limiter = MemoryRateLimiter(per_minute=0, worker_seconds=3.0)
        # four tasks started together, 1 s expected each: the fourth finds the budget taken
        admitted = [(await limiter.reserve("c", 1.0)).allowed for _ in range(4)]
        await limiter.charge("c", -1.0)  # one settled: it took nothing after all
        admitted.append((await limiter.reserve("c", 1.0)).allowed)
        admitted.append((await limiter.reserve("other", 1.0)).allowed)
        return admitted

    assert asyncio.run(scenario()) == [True, True, True, False, True, True]
