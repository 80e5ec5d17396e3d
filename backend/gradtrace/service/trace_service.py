"""``TraceService``: checked spec in, trace JSON bytes out — the cache, single flight and workers.

Order of defences: the spec was parsed and its declared sizes checked in the API process
(torch-free) before it gets here; the cache (by content hash) answers identical specs;
identical specs in flight at the same moment share one worker run (single flight); the worker
dry-runs on the ``meta`` device, then traces under CPU, memory and wall-clock bounds. The
worker's JSON bytes are returned as they are (no re-validation, no re-encoding).

Failures leave as two exceptions: ``WorkerUnavailable`` (not the request's fault: 503 with
``Retry-After``) and ``TraceRejected`` (the worker's verdict on the spec: 4xx).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from gradtrace.service.cache import TraceCache, make_cache
from gradtrace.service.hashing import trace_key
from gradtrace.service.settings import Settings
from gradtrace.service.workers import TaskOutcome, WorkerPool, WorkerUnavailable

log = logging.getLogger(__name__)

CacheStatus = Literal["hit", "miss", "shared"]

__all__ = ["CacheStatus", "TraceRejected", "TraceService", "WorkerUnavailable"]


class TraceRejected(Exception):
    """The worker refused the spec: ``outcome.kind`` is "spec_error", "limit" or "error"."""

    def __init__(self, outcome: TaskOutcome) -> None:
        super().__init__(str(outcome.payload))
        self.outcome = outcome


class TraceService:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pool = WorkerPool(settings)
        self.cache: TraceCache = make_cache(settings)
        self._inflight: dict[str, asyncio.Future[bytes]] = {}

    async def start(self) -> bool:
        """Start the workers (blocks until they answer, ~2 s: torch is imported once)."""
        return await self.pool.start()

    async def close(self) -> None:
        await self.pool.close()
        await self.cache.close()

    async def trace(self, spec_doc: dict[str, Any], normalized: dict[str, Any]) -> tuple[bytes, CacheStatus]:
        """(trace JSON bytes, how it was answered) for a checked spec."""
        key = trace_key(normalized)
        cached = await self.cache.get(key)
        if cached is not None:
            return cached, "hit"
        if key in self._inflight:
            return await asyncio.shield(self._inflight[key]), "shared"
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            data = await self._compute(key, spec_doc)
            future.set_result(data)
            return data, "miss"
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: no "never retrieved" warning when nobody shared it
            raise
        finally:
            self._inflight.pop(key, None)

    async def _compute(self, key: str, spec_doc: dict[str, Any]) -> bytes:
        outcome = await self.pool.run_trace(spec_doc)
        if outcome.kind != "ok":
            raise TraceRejected(outcome)
        await self.cache.set(key, outcome.payload)
        return outcome.payload
