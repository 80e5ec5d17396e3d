"""The torch worker pool: isolated processes, per-task time bounds, load shedding.

Why pebble and not ProcessPoolExecutor: one dead worker breaks a ProcessPoolExecutor and
fails every request in flight; pebble's pool isolates each task (a killed worker fails only
its own future) and kills a task that runs past its timeout. Workers fork from a forkserver
that has already imported torch (~120 ms per worker instead of ~2 s).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import multiprocessing
import signal
import threading
from dataclasses import dataclass
from typing import Any

from pebble import ProcessExpired, ProcessPool

from gradtrace.problem import Problem
from gradtrace.service import worker_tasks
from gradtrace.service.settings import Settings

log = logging.getLogger(__name__)

# Recycle each worker after this many traces: bounds whatever torch or the engine leaks.
_TASKS_PER_WORKER = 200
# A task that has not started this long although a worker should be free was lost (see _wait).
# Generous: a worker forked on a busy machine may take seconds to pick its first task up.
_LOST_TASK_AFTER_S = 15.0
_PRELOAD = [
    "gradtrace.service.worker_tasks",
    "gradtrace.spec",
    "gradtrace.engine",
    "gradtrace.engine.run_spec",
    "gradtrace.engine.dryrun",
    "gradtrace.service.worker_warmup",  # last: runs one tiny trace (see the module)
]


class WorkerUnavailable(Exception):
    """The request could not be traced for reasons that are not its fault: retry later."""

    def __init__(self, code: str, message: str, retry_after: int = 2) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after


class _PoolBroken(Exception):
    """The pool broke under this task before it ran (internal: triggers one retry)."""


@dataclass(frozen=True)
class TaskOutcome:
    kind: str  # "ok" | "spec_error" | "limit" | "error"
    payload: Any


class WorkerPool:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._pool: ProcessPool | None = None
        self._in_flight = 0
        self._capacity = settings.workers + settings.queue_limit
        self.ready = False

    # -- lifecycle -------------------------------------------------------------------------
    def _make_pool(self) -> ProcessPool:
        ctx = multiprocessing.get_context("forkserver")
        # Everything a trace imports, imported once in the forkserver: workers start warm.
        ctx.set_forkserver_preload(_PRELOAD)
        return ProcessPool(
            max_workers=self._settings.workers,
            max_tasks=_TASKS_PER_WORKER,
            initializer=worker_tasks.init_worker,
            initargs=(
                self._settings.worker_memory_mb,
                self._settings.worker_cpu_s,
                self._settings.debug_trace_delay_s,
            ),
            context=ctx,
        )

    def _get_pool(self) -> ProcessPool:
        with self._lock:
            if self._pool is None or not self._pool.active:
                if self._pool is not None:
                    log.warning("worker pool broken: rebuilding it")
                    self._pool.stop()
                self._pool = self._make_pool()
            return self._pool

    def warm_up(self, timeout: float = 60.0) -> bool:
        """Start the forkserver (imports torch) and check one worker answers. Blocking."""
        try:
            self.ping(timeout)
            self.ready = True
        except Exception:  # readiness stays false; /readyz reports it
            log.exception("worker warm-up failed")
            self.ready = False
        return self.ready

    def ping(self, timeout: float = 5.0) -> int:
        return self._get_pool().schedule(worker_tasks.ping, timeout=timeout).result(timeout + 1)

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.stop()
                self._pool.join(timeout=5)
                self._pool = None

    @property
    def workers(self) -> int:
        return self._settings.workers

    def alive(self) -> bool:
        with self._lock:
            return self._pool is not None and self._pool.active

    @property
    def in_flight(self) -> int:
        return self._in_flight

    # -- running traces --------------------------------------------------------------------
    async def run_trace(self, spec_doc: dict[str, Any]) -> TaskOutcome:
        if self._in_flight >= self._capacity:
            raise WorkerUnavailable("overloaded", "all workers are busy and the queue is full; retry shortly")
        self._in_flight += 1
        try:
            try:
                return await self._run_once(spec_doc)
            except _PoolBroken as exc:
                # Collateral damage: pebble aborts every queued task when a worker dies before
                # it acknowledged its task ("All workers expired"). This task never ran, so run
                # it once more on the rebuilt pool instead of failing an innocent request.
                log.warning("worker pool broke (%s): retrying the trace on a new pool", exc.__cause__)
                try:
                    return await self._run_once(spec_doc)
                except _PoolBroken as again:
                    raise WorkerUnavailable(
                        "worker_unavailable", "no worker could take this trace"
                    ) from again
        finally:
            self._in_flight -= 1

    async def _wait(self, future: concurrent.futures.Future) -> Any:
        """Await a pebble future, watching for the one way pebble can lose a task.

        A worker killed after it took a task from the shared queue but before it acknowledged
        it leaves that task "not started" forever: pebble's timeout only counts from the
        start, so the request would hang. If a task has not started although no other task is
        queued ahead of it, it was lost: cancel it and let the caller run it again. An
        overall deadline (queue wait + run time) bounds everything else.
        """
        loop = asyncio.get_running_loop()
        wrapped = asyncio.wrap_future(future)
        started_wait = loop.time()
        rounds = -(-self._capacity // self._settings.workers)  # ceil: queue positions per worker
        deadline = started_wait + rounds * self._settings.trace_timeout_s + 5
        unstarted_since = started_wait
        while True:
            done, _ = await asyncio.wait({wrapped}, timeout=0.5)
            if done:
                return wrapped.result()
            now = loop.time()
            if future.running() or self._in_flight > self._settings.workers:
                unstarted_since = now  # running, or legitimately queued behind others
            elif now - unstarted_since > _LOST_TASK_AFTER_S:
                future.cancel()
                raise _PoolBroken() from RuntimeError("task lost by a dying worker")
            if now > deadline:
                future.cancel()
                raise concurrent.futures.TimeoutError()

    async def _run_once(self, spec_doc: dict[str, Any]) -> TaskOutcome:
        future = self._get_pool().schedule(
            worker_tasks.run_trace, args=(spec_doc,), timeout=self._settings.trace_timeout_s
        )
        try:
            kind, payload = await self._wait(future)
        except concurrent.futures.TimeoutError as exc:
            raise WorkerUnavailable(
                "trace_timeout",
                f"the trace ran longer than {self._settings.trace_timeout_s:g} s and was stopped",
            ) from exc
        except ProcessExpired as exc:
            # The worker died while running THIS task: its request pays (503), no retry (the
            # spec itself may be what kills workers).
            log.warning("worker died during a trace: exit code %s", exc.exitcode)
            if exc.exitcode == worker_tasks.EXIT_OUT_OF_MEMORY:
                return TaskOutcome(
                    "limit", Problem("memory_limit", "the trace needed more memory than a worker may use")
                )
            if exc.exitcode == -signal.SIGXCPU:
                raise WorkerUnavailable(
                    "trace_timeout", "the trace used more CPU time than allowed and was stopped"
                ) from exc
            raise WorkerUnavailable(
                "worker_crashed", "the worker running this trace stopped; it has been replaced"
            ) from exc
        except (RuntimeError, concurrent.futures.CancelledError) as exc:
            # BrokenProcessPool (a RuntimeError): the pool itself broke or is closing.
            raise _PoolBroken() from exc
        except Exception as exc:  # anything else the pool hands back: the worker's fault, not the spec's
            log.exception("unexpected worker failure")
            raise WorkerUnavailable("worker_unavailable", "the worker failed unexpectedly") from exc
        return TaskOutcome(kind, payload)
