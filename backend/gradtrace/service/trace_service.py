"""``TraceService``: checked spec in, trace JSON bytes out — the cache, single flight and workers.

Two traces' comparison (``compare``) goes the same way: cached by the pair of trace keys,
single flight, computed in a worker (never in the API process), the same failures.

Order of defences: the spec was parsed, its declared sizes checked and its run priced in the
API process (torch-free) before it gets here, and arrives as a ``CheckedSpec``; the cache (by content hash) answers identical specs;
identical specs in flight at the same moment share one worker run (single flight); the worker
dry-runs on the ``meta`` device, then traces under CPU, memory and wall-clock bounds. The
worker gets the parsed ModelSpec (pickled across its pipe), never the document to parse
again: a spec is parsed once on its way to the worker. The worker's JSON bytes are returned as they are (no re-validation, no re-encoding).

The tasks run where the service is told (``service/runner.py``): the worker pool of ``gradtrace
serve``, or one thread of this process for the HTTP contract's tests. Every failure leaves as a
``Problem``: the one the worker answered (4xx, unchanged), or ``WorkerUnavailable`` (a 503 with
``Retry-After``: not the request's fault).

Costly specs: a trace that runs past the deadline is answered 503 ``trace_timeout`` once (the
server cannot tell a costly spec from a busy machine) and remembered by its trace key in the
store (``SpecStore.mark_costly``: every replica sees it); from then on it is refused at once
with 413 ``too_costly`` — a 4xx, so clients do not retry it: the same spec would only hold a
worker for the whole deadline again. The seconds a worker spends on a request (the whole
deadline for one that ran past it) are charged to the client's worker-time budget in the
rate limiter (``service/ratelimit.py``): reserved before the run (what its tasks took lately),
settled after. A client runs at most a share of the workers at once, a few more of its tasks
waiting their turn outside the pool's queue (``service/client_share.py``): one address with
many connections cannot fill the queue and shed everyone else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from gradtrace.problem import Problem
from gradtrace.service.cache import CachedBody, TraceCache, make_cache
from gradtrace.service.client_share import ClientShare
from gradtrace.service.disk_cache import DiskEntry
from gradtrace.service.hashing import compare_key, run_key, trace_key
from gradtrace.service.jail_pool import JailPool, outcome_of
from gradtrace.service.ratelimit import CURRENT_CLIENT, current_window
from gradtrace.service.runner import Answer, TaskRunner, WorkerUnavailable
from gradtrace.service.settings import Settings
from gradtrace.service.single_flight import SingleFlight
from gradtrace.service.store import StoreUnavailable

if TYPE_CHECKING:
    from gradtrace.spec import ModelSpec

log = logging.getLogger(__name__)

CacheStatus = Literal["hit", "miss", "shared"]
# Fetches the two traces of a comparison (JSON bytes of a and b), called only on a cache miss.
TracePair = Callable[[], Awaitable[tuple[bytes, bytes]]]

__all__ = ["CacheStatus", "CheckedSpec", "TraceService", "WorkerUnavailable"]


@dataclass(frozen=True)
class CheckedSpec:
    """A spec parsed, its declared sizes checked and its run priced (``api/body.py``).

    ``spec`` is what a worker traces, as it is: it crosses the pipe pickled and is not parsed
    again. ``normalized`` is its normalised document, the one source of every content hash
    (``trace_key``, ``spec_hash``, ``permalink_id``) and of what the permalink store keeps.
    """

    spec: ModelSpec
    normalized: dict[str, Any]

    @property
    def key(self) -> str:
        """The trace's cache key and ETag (``service/hashing.py``)."""
        return trace_key(self.normalized)


class TraceService:
    def __init__(self, settings: Settings, pool: TaskRunner) -> None:
        self.settings = settings
        self.pool = pool
        self.runner = JailPool(settings)  # pasted programs (POST /run), confined
        self.cache: TraceCache = make_cache(settings)
        self._inflight: SingleFlight[bytes] = SingleFlight()  # traces and comparisons, by cache key
        self._store: Any = None  # SpecStore: remembers traces past the deadline
        self._limiter: Any = None  # rate limiter: charged with worker time
        # each client's turns on the workers and expected task time (with the rate limiter)
        self._share = ClientShare(
            settings.client_tasks or settings.workers // 2, settings.client_waiting, settings.queue_timeout_s
        )

    def attach(self, store: Any, limiter: Any) -> None:
        """The permalink store (costly traces) and the rate limiter (worker time); either may be None."""
        self._store, self._limiter = store, limiter

    async def start(self) -> bool:
        """Start the runner and the jail (the pool blocks until a worker answers: torch is
        imported once, in the forkserver)."""
        started, _ = await asyncio.gather(self.pool.start(), self.runner.start())
        return started

    async def close(self) -> None:
        await asyncio.gather(self.pool.close(), self.runner.close())
        await self.cache.close()

    async def trace(self, checked: CheckedSpec) -> tuple[bytes, CacheStatus]:
        """(trace JSON bytes, how it was answered) for a checked spec."""
        body, how = await self.open_trace(checked)
        if isinstance(body, DiskEntry):
            try:
                return await asyncio.to_thread(body.read, 0, body.size), how
            finally:
                body.close()
        return body, how

    async def open_trace(self, checked: CheckedSpec) -> tuple[CachedBody, CacheStatus]:
        """Like ``trace``, but a trace kept on disk is answered open (``DiskEntry``: the caller
        reads it in pieces and closes it), for a response that sends it a piece at a time."""
        key = checked.key
        cached = await self.cache.open(key)
        if cached is not None:
            return cached, "hit"
        data, shared = await self._inflight.run(key, lambda: self._compute(key, checked.spec))
        return data, "shared" if shared else "miss"

    async def run(self, source: str) -> tuple[bytes, CacheStatus]:
        """(the run's answer as JSON bytes, how it was answered) for a program's source: its
        trace, its output and its exception (``service/jail_pool.py``), cached by the source."""
        key = run_key(source)
        cached = await self.cache.get(key)
        if cached is not None:
            return cached, "hit"
        data, shared = await self._inflight.run(key, lambda: self._run(key, source))
        return data, "shared" if shared else "miss"

    async def _run(self, key: str, source: str) -> bytes:
        await self._refuse_if_costly(key, "this program", "/python", self.settings.run_timeout_s)
        return await self._in_worker(key, lambda: self._run_in_jail(source), remember_costly=True)

    async def _run_in_jail(self, source: str) -> Answer:
        return outcome_of(await self.runner.run(source), self.settings)

    async def compare(
        self, keys: tuple[str, str], traces: TracePair, permalinks: dict[str, str]
    ) -> tuple[bytes, CacheStatus]:
        """(CompareDoc JSON bytes, how it was answered) of the traces with trace keys ``keys``.

        ``traces`` fetches the two traces' bytes (from the cache or the workers) and is only
        called on a miss; the comparison itself runs in a worker, and its result is cached by
        the ordered pair of keys (``a`` is the baseline: the result is not symmetric).
        """
        key = compare_key(*keys, permalinks)
        cached = await self.cache.get(key)
        if cached is not None:
            return cached, "hit"
        data, shared = await self._inflight.run(key, lambda: self._compare(key, traces, permalinks))
        return data, "shared" if shared else "miss"

    async def _compare(self, key: str, traces: TracePair, permalinks: dict[str, str]) -> bytes:
        trace_a, trace_b = await traces()
        return await self._in_worker(key, lambda: self.pool.run_compare(trace_a, trace_b, permalinks))

    async def _compute(self, key: str, spec: ModelSpec) -> bytes:
        await self._refuse_if_costly(key, "this spec", "/forward", self.settings.trace_timeout_s)
        return await self._in_worker(key, lambda: self.pool.run_trace(spec), remember_costly=True)

    async def _in_worker(
        self, key: str, run: Callable[[], Awaitable[Answer]], remember_costly: bool = False
    ) -> bytes:
        """One task in a worker, in its client's turn (``service/client_share.py``), its expected
        time reserved in the client's budget before it runs and settled after (the whole
        deadline when it ran past it, then remembered by ``key`` if ``remember_costly``); the
        worker's Problem raised as it is, a result cached under ``key``."""
        client = CURRENT_CLIENT.get()
        if self._limiter is None or client is None:  # no per-client limits (the rate limit is off)
            return await self._run_task(key, run, remember_costly, None)
        async with self._share.turn(client):
            bill = await self._reserve(client)
            return await self._run_task(key, run, remember_costly, bill)

    async def _run_task(
        self, key: str, run: Callable[[], Awaitable[Answer]], remember_costly: bool, bill: _Bill | None
    ) -> bytes:
        spent = 0.0  # worker seconds to charge: none when the task never held a worker
        try:
            try:
                answer = await run()
            except WorkerUnavailable as exc:
                deadlines = {
                    "trace_timeout": self.settings.trace_timeout_s,
                    "run_timeout": self.settings.run_timeout_s,
                }
                if exc.code in deadlines:  # held a worker (or a runner) for the whole deadline: charged so
                    spent = deadlines[exc.code]
                    if remember_costly:
                        await self._remember_costly(key, exc.message)
                raise
            spent = answer.seconds
        finally:
            if bill is not None:
                await self._settle(bill, spent)
        if isinstance(answer.value, Problem):
            raise answer.value
        await self.cache.set(key, answer.value)
        return answer.value

    async def _refuse_if_costly(self, key: str, what: str, path: str, deadline_s: float) -> None:
        if self._store is None:
            return
        try:
            seen = await asyncio.to_thread(self._store.costly, key)
        except StoreUnavailable:  # the store is down: the worker's own bounds still hold
            return
        if seen is not None:
            _, when = seen
            raise Problem(
                "too_costly",
                f"{what} ran past the {deadline_s:g} s deadline (at {when}) and "
                "is refused without running; make it smaller (fewer operations, steps or module calls)",
                path,
            )

    async def _remember_costly(self, key: str, reason: str) -> None:
        if self._store is None:
            return
        try:
            await asyncio.to_thread(self._store.mark_costly, key, reason)
        except StoreUnavailable:
            log.warning("could not remember a trace past the deadline (store unavailable)")

    async def _reserve(self, client: str) -> _Bill:
        """The client's expected worker seconds, reserved in its budget; 429 when it is used up
        (its tasks in flight included)."""
        estimate = self._share.estimate(client)
        verdict = await self._limiter.reserve(client, estimate)
        if not verdict.allowed:
            raise Problem(
                "worker_time_exceeded",
                "this client's share of worker time for this minute is taken (by its traces "
                f"running or waiting); retry after {verdict.retry_after} s",
                status=429,
                headers={"Retry-After": str(verdict.retry_after), "RateLimit-Remaining": "0"},
            )
        return _Bill(client, estimate, current_window())

    async def _settle(self, bill: _Bill, spent: float) -> None:
        """Charge what the task took, less what was reserved for it (in the same minute)."""
        if spent > 0:
            self._share.observe(bill.client, spent)
        same_window = current_window() == bill.window
        owed = spent - bill.reserved if same_window else spent
        if owed:
            await self._limiter.charge(bill.client, owed)


@dataclass(frozen=True)
class _Bill:
    """Worker seconds reserved for a task of ``client`` in the rate limiter's ``window``."""

    client: str
    reserved: float
    window: int
