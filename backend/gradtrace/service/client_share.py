"""One client's share of the workers: how many of its tasks run at once, and what a task is
expected to cost before it runs.

Ten connections of one address posting distinct heavy traces filled the pool's whole queue
(workers + queue_limit in flight), and another client then got 15 of 66 requests refused with
503 ``overloaded`` (issue 38). So each client runs at most ``running`` worker tasks at once
(by default half the workers, at least one: the other half stays free for everyone else), and
at most ``waiting`` more of its tasks wait for its turn, outside the pool's queue; past that,
or after waiting ``timeout_s``, its request is refused with 429 ``too_many_in_flight`` and
``Retry-After``. Two requests of one person at once (the two sides of a comparison, a page that
loads two traces) wait for each other instead of being refused.

A task's worker time used to be charged after it ran, so tasks in flight at once were all
admitted against a budget none of them had charged yet. ``estimate`` is what the client's tasks
took lately (a moving average; a new client is assumed to need ``FIRST_ESTIMATE_S``): the trace
service reserves it in the client's worker-time budget before the run and settles the
difference after (``service/trace_service.py``).

These are per-client limits: they apply where the rate limit does (``rate_per_minute > 0``).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from gradtrace.problem import Problem

FIRST_ESTIMATE_S = 1.0
_CLIENTS_REMEMBERED = 4096  # estimates kept (least recently used out)


def too_many_in_flight(running: int, why: str, what: str = "trace(s) running on the workers") -> Problem:
    """429: this client's own share is taken (also the API's CPU lane's, ``api/cpu.py``)."""
    return Problem(
        "too_many_in_flight",
        f"this client already has {running} {what} and {why}; wait for them to finish before sending more",
        status=429,
        headers={"Retry-After": "2"},
    )


class ClientShare:
    def __init__(self, running: int, waiting: int, timeout_s: float) -> None:
        self.running = max(1, running)
        self.waiting = waiting
        self.timeout_s = timeout_s
        self._slots: dict[str, asyncio.Semaphore] = {}
        self._holders: dict[str, int] = {}  # tasks of each client running or waiting for a turn
        self._estimates: OrderedDict[str, float] = OrderedDict()

    @asynccontextmanager
    async def turn(self, client: str) -> AsyncIterator[None]:
        """Holds one of ``client``'s turns on the workers; 429 when too many of its tasks wait."""
        holders = self._holders.get(client, 0)
        if holders >= self.running + self.waiting:
            raise too_many_in_flight(self.running, f"{self.waiting} more waiting")
        slots = self._slots.setdefault(client, asyncio.Semaphore(self.running))
        self._holders[client] = holders + 1
        try:
            try:
                async with asyncio.timeout(self.timeout_s):
                    await slots.acquire()
            except TimeoutError:
                raise too_many_in_flight(
                    self.running, f"this one waited {self.timeout_s:g} s for them"
                ) from None
            try:
                yield
            finally:
                slots.release()
        finally:
            self._holders[client] -= 1
            if not self._holders[client]:  # nothing of this client left: forget it (bounded)
                del self._holders[client], self._slots[client]

    def estimate(self, client: str) -> float:
        """The worker seconds a task of ``client`` is expected to take."""
        return self._estimates.get(client, FIRST_ESTIMATE_S)

    def observe(self, client: str, seconds: float) -> None:
        """A task of ``client`` took ``seconds`` of worker time."""
        self._estimates[client] = (self.estimate(client) + seconds) / 2
        self._estimates.move_to_end(client)
        while len(self._estimates) > _CLIENTS_REMEMBERED:
            self._estimates.popitem(last=False)
