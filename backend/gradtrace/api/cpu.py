"""The API's own CPU work (translating, checking and pricing specs), bounded and fair.

This work ran in the default executor beside the store, the disk cache and the readiness
checks, so a few clients posting costly sources starved everyone (issue 38). Threads of its
own were not enough: two threads busy in Python hold the GIL, and every request of everyone
else then waits for the GIL at each socket operation (light traces went from 0.03 to 3.5 s).
So it runs in ``processes`` helper processes (spawned, torch-free, apart from the workers);
the event loop only takes turns and waits:

- each client runs one job at a time; a job is heavy when its client's jobs this minute took
  ``HEAVY_JOB_S`` of CPU or more each (a moving average) or its request body is over
  ``LARGE_BODY`` bytes.
  Heavy jobs share all the helpers but one, which stays free for light ones, and a free helper
  goes to light jobs first (in order of arrival), then to the heavy job whose client used the
  least: a flood of costly sources or of big specs refused after a long check slows the
  flooders, not the others;
- at most ``per_client_waiting`` jobs of one client wait: past that the client is over its own
  share and refused at once (429 ``too_many_in_flight``, ``Retry-After``, as for the workers,
  ``service/client_share.py``); at most ``waiting`` jobs in all wait: past that (everyone's
  jobs, the lane is full) the request is shed (503 ``overloaded``, ``Retry-After``);
- the CPU seconds of each job are charged to the client's compute budget (the rate limiter's
  worker-time share), so a client that keeps the lane busy is refused with 429;
- a job past ``timeout_s`` is a 413 ``too_costly`` (remembered, as below) and its helpers are
  killed and started again, as a worker past its deadline is.

Refusals of a body (400/413/422) are remembered by the hash of the method, path and raw body
(``RefusalMemory``): the same body again is answered from memory before it is parsed. So are
the specs a trace's body was checked into (``AcceptedMemory``): a byte-identical repeat (a page
reloaded, a cached trace asked again) goes straight to the trace cache, without the lane.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import multiprocessing
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextvars import ContextVar
from typing import Any, TypeVar

from gradtrace.problem import Problem
from gradtrace.service.client_share import too_many_in_flight
from gradtrace.service.ctrl_c import children_spared
from gradtrace.service.ratelimit import CURRENT_CLIENT

log = logging.getLogger(__name__)

T = TypeVar("T")

# CPU seconds per job from which a client's jobs are "heavy" (a light spec's check takes a few
# milliseconds; a costly source's translation or a big spec's check, up to a second).
HEAVY_JOB_S = 0.05
WINDOW_S = 60
LARGE_BODY = 32 * 1024  # a spec or source this big takes tens of milliseconds or more to check

# The request body's size, set by read_json for the request's task: a prior on the job's cost.
BODY_BYTES: ContextVar[int] = ContextVar("gradtrace_body_bytes", default=0)

# Refusals that depend on the store's state, not on the body alone: never remembered.
_STATEFUL_CODES = frozenset({"client_storage_quota_exceeded", "total_storage_quota_exceeded"})


class CpuLane:
    def __init__(
        self, processes: int = 2, waiting: int = 64, per_client_waiting: int = 16, timeout_s: float = 20.0
    ) -> None:
        self.processes = processes  # 0: one thread of this process instead (in-process tests)
        self.threads = max(1, processes)  # jobs at a time
        self.waiting = waiting
        self.per_client_waiting = per_client_waiting
        self.timeout_s = timeout_s
        self._pool: Executor | None = None  # started at the first job (or warm())
        self._queues: OrderedDict[str, deque[tuple[asyncio.Future[None], bool]]] = OrderedDict()
        self._running: dict[str, bool] = {}  # clients with a job in a helper: is it heavy
        self._used: dict[str, float] = {}  # CPU seconds per client in this minute's window
        self._typical: dict[str, float] = {}  # a moving average of its jobs' CPU seconds
        self._window = 0
        self.ready = False  # the helpers started (warm())
        self._charge: Callable[[str, float], Any] | None = None
        self.jobs_run = 0  # since start (reported by /readyz)

    def charge_to(self, charge: Callable[[str, float], Any] | None) -> None:
        """``charge(client, seconds)`` (a coroutine function) is told each job's CPU seconds."""
        self._charge = charge

    @property
    def queued(self) -> int:
        return sum(len(q) for q in self._queues.values())

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a helper, in this client's turn; 429 when too many of this client's
        jobs wait, 503 when too many of everyone's do."""
        client = CURRENT_CLIENT.get() or "unknown"
        queue = self._queues.get(client)
        if queue is not None and len(queue) >= self.per_client_waiting:
            raise too_many_in_flight(
                int(client in self._running), f"{len(queue)} more waiting", "request(s) being checked"
            )
        if self.queued >= self.waiting:
            raise Problem(
                "overloaded",
                "too many requests are waiting to be checked; retry shortly",
                status=503,
                headers={"Retry-After": "1"},
            )
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queues.setdefault(client, deque()).append((turn, BODY_BYTES.get() > LARGE_BODY))
        self._dispatch()
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():  # given a turn as it was cancelled
                self._done(client)
            else:
                self._forget(client, turn)
            raise
        try:
            result, error, seconds = await self._in_helper(fn, args)
            self._used[client] = self.spent(client) + seconds
            self._typical[client] = (self._typical.get(client, seconds) + seconds) / 2
        finally:
            self._done(client)
        if self._charge is not None and client != "unknown":
            await self._charge(client, seconds)
        if error is not None:
            raise error
        return result  # type: ignore[return-value]

    def _helpers(self) -> Executor:
        if self._pool is None and self.processes == 0:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="gradtrace-cpu")
        if self._pool is None:
            # spawned: the API process has threads (fork is unsafe), and the workers' forkserver
            # preloads torch, which these helpers never need
            self._pool = ProcessPoolExecutor(
                self.threads,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_exit_with_parent,
                initargs=(os.getpid(),),
            )
        return self._pool

    async def _in_helper(
        self, fn: Callable[..., T], args: tuple[Any, ...]
    ) -> tuple[T | None, BaseException | None, float]:
        with children_spared():  # the job may start a helper
            job = asyncio.get_running_loop().run_in_executor(self._helpers(), _timed, fn, args)
        try:
            return await asyncio.wait_for(job, self.timeout_s)
        except TimeoutError:
            log.warning("an API job ran past %g s: its helpers are replaced", self.timeout_s)
            self._restart()
            problem = Problem(
                "too_costly",
                f"checking this request took over {self.timeout_s:g} s of the server's time; make it smaller",
                status=413,
            )
            return None, problem, self.timeout_s
        except BrokenProcessPool:  # a helper died (killed, out of memory): start new ones
            self._restart()
            problem = Problem(
                "overloaded",
                "the server's helper was restarted; retry",
                status=503,
                headers={"Retry-After": "1"},
            )
            return None, problem, 0.0

    def _restart(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            _kill_helpers(pool)

    async def warm(self) -> None:
        """Start the helpers and import what a job needs, before the first request waits for it."""
        loop, pool = asyncio.get_running_loop(), self._helpers()
        # as many at once as there are helpers: each starts one (they start on demand)
        with children_spared():
            warming = [loop.run_in_executor(pool, _warm) for _ in range(self.threads)]
        await asyncio.gather(*warming)
        self.ready = True

    def _forget(self, client: str, turn: asyncio.Future[None]) -> None:
        queue = self._queues.get(client)
        if queue is not None:
            self._queues[client] = deque(entry for entry in queue if entry[0] is not turn)
            if not self._queues[client]:
                del self._queues[client]

    def _done(self, client: str) -> None:
        self._running.pop(client, None)
        self._dispatch()

    def spent(self, client: str) -> float:
        """The client's CPU seconds in the lane this minute."""
        window = int(time.monotonic() // WINDOW_S)
        if window != self._window:  # a new minute: forget the old one (bounded memory)
            self._window, self._used, self._typical = window, {}, {}
        return self._used.get(client, 0.0)

    def _dispatch(self) -> None:
        """Give free helpers to waiting jobs: light ones first, heavy ones on all helpers but one."""
        while len(self._running) < self.threads:
            heavy_running = sum(self._running.values())
            room_for_heavy = self.threads == 1 or heavy_running < self.threads - 1
            best: tuple[tuple[bool, float], str, bool] | None = None
            for client, queue in self._queues.items():  # in order of arrival: the first light wins
                if client in self._running:
                    continue
                heavy = queue[0][1] or self._typical.get(client, 0.0) >= HEAVY_JOB_S
                if heavy and not room_for_heavy:
                    continue
                rank = (heavy, self.spent(client) if heavy else 0.0)
                if best is None or rank < best[0]:
                    best = (rank, client, heavy)
            if best is None:
                return
            _, client, heavy = best
            queue = self._queues[client]
            turn, _ = queue.popleft()
            if not queue:
                del self._queues[client]
            if turn.done():  # cancelled while waiting
                continue
            self._running[client] = heavy
            self.jobs_run += 1
            turn.set_result(None)

    def close(self) -> None:
        self._restart()

    async def aclose(self) -> None:
        """Stop the helpers, and wait until their pool has let go of its queues (the app's
        lifespan, before the worker pool stops multiprocessing's resource tracker).

        The queues' semaphores are unregistered from the resource tracker when the queues are
        collected. Left to the end of the process, that came after the worker pool had stopped
        the tracker: a new one started just to be told about semaphores it had never seen, and
        printed a KeyError traceback for each at Ctrl-C."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(_kill_helpers, pool, isinstance(pool, ProcessPoolExecutor))


def _kill_helpers(pool: Executor, wait: bool = False) -> None:
    # the stdlib (3.11) has no public way to end a pool's processes before their jobs end
    processes: dict[int, Any] = getattr(pool, "_processes", None) or {}
    for process in list(processes.values()):
        process.kill()
    # without waiting, it never blocks (the event loop); its thread reaps them
    pool.shutdown(wait=wait, cancel_futures=True)


def _exit_with_parent(parent: int) -> None:
    """In a helper: exit when the API process is gone (SIGKILLed, nothing cleaned up).

    A helper holds both ends of its job queue's pipe, so it would never see the pipe close.
    (Ctrl-C never reaches a helper: they are started with SIGINT blocked, ``service/ctrl_c.py``.)"""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="gradtrace-parent-watch", daemon=True).start()


def _warm() -> None:
    import gradtrace.api.body  # noqa: F401 - the checks and the translator, imported once
    import gradtrace.api.translate  # noqa: F401

    time.sleep(0.2)  # held a moment, so the next warm-up job starts the next helper


def _timed(fn: Callable[..., T], args: tuple[Any, ...]) -> tuple[T | None, BaseException | None, float]:
    """In a helper: ``fn(*args)``'s result or exception, and the CPU seconds it took."""
    started = time.process_time()
    try:
        return fn(*args), None, time.process_time() - started
    except Exception as exc:  # raised again by the caller, on the event loop
        return None, exc, time.process_time() - started


class RefusalMemory:
    """The answers refused for a body, by the hash of its method, path and raw bytes (LRU)."""

    def __init__(self, entries: int = 4096) -> None:
        self.entries = entries
        self._refused: OrderedDict[bytes, Problem] = OrderedDict()

    @staticmethod
    def key(method: str, path: str, body: bytes) -> bytes:
        return hashlib.sha256(b"%s %s\n" % (method.encode(), path.encode()) + body).digest()

    def recall(self, key: bytes) -> Problem | None:
        problem = self._refused.get(key)
        if problem is None:
            return None
        self._refused.move_to_end(key)
        return copy.copy(problem)  # a fresh exception to raise: no shared traceback

    def remember(self, key: bytes, problem: Problem) -> None:
        if problem.status not in (400, 413, 422) or problem.code in _STATEFUL_CODES:
            return
        self._refused[key] = copy.copy(problem)
        self._refused.move_to_end(key)
        while len(self._refused) > self.entries:
            self._refused.popitem(last=False)


class AcceptedMemory:
    """What bodies were checked into (a ``CheckedSpec``), by ``RefusalMemory.key`` (LRU).

    Bounded by count and by bytes: an entry counts ``BYTES_PER_BODY_BYTE`` times its body's
    size (a checked spec takes 11-21 times its JSON's size in memory, measured on the
    examples); bodies over ``LARGE_BODY`` are not kept."""

    BYTES_PER_BODY_BYTE = 24

    def __init__(self, entries: int = 1024, max_bytes: int = 16 * 1024 * 1024) -> None:
        self.entries = entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self._accepted: OrderedDict[bytes, tuple[Any, int]] = OrderedDict()

    def recall(self, key: bytes) -> Any | None:
        found = self._accepted.get(key)
        if found is None:
            return None
        self._accepted.move_to_end(key)
        return found[0]

    def remember(self, key: bytes, checked: Any, body_bytes: int) -> None:
        size = body_bytes * self.BYTES_PER_BODY_BYTE
        if body_bytes > LARGE_BODY or size > self.max_bytes or key in self._accepted:
            return
        self._accepted[key] = (checked, size)
        self.bytes += size
        while len(self._accepted) > self.entries or self.bytes > self.max_bytes:
            _, (_, dropped) = self._accepted.popitem(last=False)
            self.bytes -= dropped


_lane = CpuLane()


def lane() -> CpuLane:
    """The process's lane (one per API process, as the default executor is)."""
    return _lane


def configure_lane(processes: int, charge: Callable[[str, float], Any] | None) -> CpuLane:
    """A new lane of ``processes`` helpers charging ``charge`` (the app's lifespan); the old one closes."""
    global _lane
    _lane.close()
    _lane = CpuLane(processes)
    _lane.charge_to(charge)
    return _lane


_refusals = RefusalMemory()


def refusals() -> RefusalMemory:
    """The process's memory of refused bodies (read_json recalls, the error handler remembers)."""
    return _refusals


_accepted = AcceptedMemory()


def accepted() -> AcceptedMemory:
    """The process's memory of checked bodies (``read_spec``, ``api/body.py``)."""
    return _accepted
