"""Per-client rate limits: a fixed one-minute window counter, in memory or in Redis.

One algorithm for both backends (INCR + EXPIRE is atomic in Redis), so a single server and
N replicas behind nginx limit a client the same way. A Redis outage fails open: rate
limiting is a protection, not a reason to refuse service.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

log = logging.getLogger(__name__)

WINDOW_S = 60


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    remaining: int
    retry_after: int  # seconds until the window resets


class MemoryRateLimiter:
    def __init__(self, per_minute: int) -> None:
        self._limit = per_minute
        self._window = -1
        self._counts: dict[str, int] = {}

    async def hit(self, client: str) -> Verdict:
        now = time.time()
        window = int(now // WINDOW_S)
        if window != self._window:  # a new minute: forget the old counts (bounded memory)
            self._window, self._counts = window, {}
        count = self._counts.get(client, 0) + 1
        self._counts[client] = count
        retry = max(1, int((window + 1) * WINDOW_S - now) + 1)
        return Verdict(count <= self._limit, max(0, self._limit - count), retry)

    async def close(self) -> None:
        self._counts.clear()


class RedisRateLimiter:
    PREFIX = "gradtrace:rate:"

    def __init__(self, url: str, per_minute: int) -> None:
        import redis.asyncio as aioredis

        self._redis = aioredis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self._limit = per_minute

    async def hit(self, client: str) -> Verdict:
        now = time.time()
        window = int(now // WINDOW_S)
        retry = max(1, int((window + 1) * WINDOW_S - now) + 1)
        key = f"{self.PREFIX}{window}:{client}"
        try:
            pipe = self._redis.pipeline()
            pipe.incr(key)
            pipe.expire(key, WINDOW_S * 2)
            count, _ = await pipe.execute()
        except Exception as exc:
            log.warning("redis rate limit unavailable, allowing: %s", exc)
            return Verdict(True, self._limit, retry)
        return Verdict(int(count) <= self._limit, max(0, self._limit - int(count)), retry)

    async def close(self) -> None:
        await self._redis.aclose()


def make_rate_limiter(redis_url: str | None, per_minute: int) -> MemoryRateLimiter | RedisRateLimiter:
    return RedisRateLimiter(redis_url, per_minute) if redis_url else MemoryRateLimiter(per_minute)
