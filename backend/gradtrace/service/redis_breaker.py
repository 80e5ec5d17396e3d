"""Calls to Redis that cannot stall requests: short timeouts and a circuit breaker.

A frozen Redis (SIGSTOP, a partition) does not refuse connections: each command waited out its
socket timeout (2 s), so every request waited on the rate limiter and again on the cache (issue 38:
22 requests answered in 10 s against 814). Now each command has ``timeout_s`` (0.25 s by default),
and after a failure the breaker is open for ``cooldown_s``: calls fail at once, without touching
Redis, and the callers fall back (the rate limiter to in-process counting, the cache to misses).
When the cooldown is over, one call tries Redis again (the others still fall back); its success
closes the breaker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

TIMEOUT_S = 0.25
COOLDOWN_S = 5.0


class RedisAway(Exception):
    """Redis did not answer in time, failed, or the breaker is open: use the fallback."""


class Breaker:
    def __init__(self, what: str, timeout_s: float = TIMEOUT_S, cooldown_s: float = COOLDOWN_S) -> None:
        self.what = what
        self.timeout_s = timeout_s
        self.cooldown_s = cooldown_s
        self._open_until = 0.0  # monotonic; 0: closed
        self._probing = False

    @property
    def open(self) -> bool:
        return self._open_until > 0.0

    async def call(self, command: Awaitable[T]) -> T:
        """``command``'s result within the timeout, or RedisAway (at once while the breaker is open)."""
        probe = False
        if self._open_until:
            if time.monotonic() < self._open_until or self._probing:
                if asyncio.iscoroutine(command):
                    command.close()  # never awaited: no "never awaited" warning
                raise RedisAway(f"{self.what}: redis unavailable (circuit open)")
            probe = self._probing = True
        try:
            result = await asyncio.wait_for(command, self.timeout_s)
        except Exception as exc:  # a timeout, a refused connection, a protocol error
            if not self._open_until or probe:
                log.warning(
                    "%s: redis unavailable (%s); in-process for %g s", self.what, exc, self.cooldown_s
                )
            self._open_until = time.monotonic() + self.cooldown_s
            raise RedisAway(f"{self.what}: {type(exc).__name__}") from exc
        finally:
            if probe:
                self._probing = False
        if self._open_until:
            log.info("%s: redis answers again", self.what)
            self._open_until = 0.0
        return result
