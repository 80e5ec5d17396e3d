"""Per-client rate limits: requests and worker-seconds per one-minute window, in memory or in Redis.

One algorithm for both backends (INCR/INCRBYFLOAT + EXPIRE are atomic in Redis), so a single
server and N replicas behind nginx limit a client the same way. A Redis outage is no reason
to refuse service, nor to let everything through: the limits are counted in process meanwhile.

Counting requests alone let one client take the pool with a few costly traces (three
requests a minute, each holding a worker for the whole deadline). So each client also has a
budget of worker time per window: the trace service charges the seconds a worker spent on
the client's request (``charge``; the full deadline for a trace that ran past it), and a
client whose window's budget is used up is refused (429 ``worker_time_exceeded``) until the
window turns. Which client a trace is for reaches the service through ``CURRENT_CLIENT``,
set by the API's rate-limit dependency for the request's task (copied into the tasks it
starts, e.g. the two sides of a compare).

A task's seconds are also reserved before it runs (``reserve``: what the client's tasks took
lately, ``service/client_share.py``) and the difference settled after (``charge``): tasks of
one client in flight at once count against its budget from the start, so ten of them started
together no longer all pass a budget none of them has charged yet. ``reserve`` refuses once
the budget (reservations included) is used up, as ``hit`` does.

While Redis is away (down, or frozen: see ``redis_breaker``), the Redis limiter counts in
process instead, with the same limits: each replica then limits on its own (a client spread
over N replicas gets up to N times its share) until Redis answers again; nothing is let
through unlimited and no worker time goes uncharged.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass

from gradtrace.service.redis_breaker import Breaker, RedisAway

WINDOW_S = 60

CURRENT_CLIENT: ContextVar[str | None] = ContextVar("gradtrace_client", default=None)


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    remaining: int
    retry_after: int  # seconds until the window resets
    reason: str = "requests"  # what ran out when not allowed: "requests" or "worker_time"


def _window(now: float) -> tuple[int, int]:
    window = int(now // WINDOW_S)
    return window, max(1, int((window + 1) * WINDOW_S - now) + 1)


def current_window() -> int:
    """The window the limiters count in now (a reservation made in another one has lapsed)."""
    return _window(time.time())[0]


def _verdict(count: int, limit: int, seconds: float, budget: float, retry: int) -> Verdict:
    if limit and count > limit:
        return Verdict(False, 0, retry)
    if budget and seconds >= budget:
        return Verdict(False, max(0, limit - count), retry, "worker_time")
    return Verdict(True, max(0, limit - count), retry)


class MemoryRateLimiter:
    def __init__(self, per_minute: int, worker_seconds: float = 0.0) -> None:
        self._limit = per_minute
        self._budget = worker_seconds
        self._window = -1
        self._counts: dict[str, int] = {}
        self._seconds: dict[str, float] = {}

    def _turn(self, window: int) -> None:
        if window != self._window:  # a new minute: forget the old counts (bounded memory)
            self._window, self._counts, self._seconds = window, {}, {}

    async def hit(self, client: str) -> Verdict:
        window, retry = _window(time.time())
        self._turn(window)
        count = self._counts.get(client, 0) + 1
        self._counts[client] = count
        return _verdict(count, self._limit, self._seconds.get(client, 0.0), self._budget, retry)

    async def charge(self, client: str, seconds: float) -> None:
        window, _ = _window(time.time())
        self._turn(window)
        self._seconds[client] = self._seconds.get(client, 0.0) + seconds

    async def reserve(self, client: str, seconds: float) -> Verdict:
        window, retry = _window(time.time())
        self._turn(window)
        used = self._seconds.get(client, 0.0)
        if self._budget and used >= self._budget:
            return Verdict(False, 0, retry, "worker_time")
        self._seconds[client] = used + seconds
        return Verdict(True, 0, retry)

    async def close(self) -> None:
        self._counts.clear()
        self._seconds.clear()


class RedisRateLimiter:
    PREFIX = "gradtrace:rate:"
    SECONDS_PREFIX = "gradtrace:worker-seconds:"

    def __init__(self, url: str, per_minute: int, worker_seconds: float = 0.0) -> None:
        import redis.asyncio as aioredis

        self._breaker = Breaker("rate limit")
        timeout = self._breaker.timeout_s
        self._redis = aioredis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        self._limit = per_minute
        self._budget = worker_seconds
        self._fallback = MemoryRateLimiter(per_minute, worker_seconds)  # while Redis is away

    async def hit(self, client: str) -> Verdict:
        window, retry = _window(time.time())
        key = f"{self.PREFIX}{window}:{client}"
        pipe = self._redis.pipeline()
        pipe.incr(key)
        pipe.expire(key, WINDOW_S * 2)
        pipe.get(f"{self.SECONDS_PREFIX}{window}:{client}")
        try:
            count, _, seconds = await self._breaker.call(pipe.execute())
        except RedisAway:
            return await self._fallback.hit(client)
        return _verdict(int(count), self._limit, float(seconds or 0.0), self._budget, retry)

    async def _add_seconds(self, client: str, seconds: float) -> float:
        """Adds ``seconds`` to the client's worker time in this window; the new total.
        Raises RedisAway (the caller falls back to counting in process)."""
        window, _ = _window(time.time())
        key = f"{self.SECONDS_PREFIX}{window}:{client}"
        pipe = self._redis.pipeline()
        pipe.incrbyfloat(key, seconds)
        pipe.expire(key, WINDOW_S * 2)
        total, _ = await self._breaker.call(pipe.execute())
        return float(total)

    async def charge(self, client: str, seconds: float) -> None:
        try:
            await self._add_seconds(client, seconds)
        except RedisAway:
            await self._fallback.charge(client, seconds)

    async def reserve(self, client: str, seconds: float) -> Verdict:
        _, retry = _window(time.time())
        try:
            total = await self._add_seconds(client, seconds)
        except RedisAway:
            return await self._fallback.reserve(client, seconds)
        if self._budget and total - seconds >= self._budget:
            await self.charge(client, -seconds)  # not admitted: the reservation is taken back
            return Verdict(False, 0, retry, "worker_time")
        return Verdict(True, 0, retry)

    async def close(self) -> None:
        await self._fallback.close()
        await self._redis.aclose()


def make_rate_limiter(
    redis_url: str | None, per_minute: int, worker_seconds: float = 0.0
) -> MemoryRateLimiter | RedisRateLimiter:
    """``per_minute`` requests and ``worker_seconds`` of worker time per client and minute (0: no bound)."""
    if redis_url:
        return RedisRateLimiter(redis_url, per_minute, worker_seconds)
    return MemoryRateLimiter(per_minute, worker_seconds)
