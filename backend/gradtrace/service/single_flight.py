"""Single flight: identical requests in flight at the same moment share one computation.

The first caller of a key runs it; the others await its result (or its exception). A caller
that is cancelled cancels nobody else's wait: the waiters are shielded, and the first caller's
cancellation cancels the shared future, so they see CancelledError like it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    def __init__(self) -> None:
        self._inflight: dict[str, asyncio.Future[T]] = {}

    async def run(self, key: str, compute: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """(the result, whether it was shared with a computation already in flight)."""
        if key in self._inflight:
            return await asyncio.shield(self._inflight[key]), True
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            value = await compute()
            future.set_result(value)
            return value, False
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: no "never retrieved" warning when nobody shared it
            raise
        finally:
            self._inflight.pop(key, None)
