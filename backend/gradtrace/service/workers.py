"""The torch worker pool: one pipe per worker, per-task time bounds, self-healing, load shedding.

Tasks are traces (``run_trace``) and comparisons of two traces (``run_compare``): both get the
same deadline, budgets, crash handling and load shedding below.

Why not a shared task queue (``ProcessPoolExecutor``, pebble): there a worker that dies while
it holds the queue's lock or a task it has not acknowledged breaks the whole pool or loses the
task, and every request in flight waits or fails. Here each worker has its own pipe, and the
API hands a task to one idle worker at a time, so it always knows which task each worker holds:

- a worker that dies or hangs *before* acknowledging a task never ran it: the task runs on
  another worker (at most once more);
- one that dies *while* running it costs that request a 503 with ``Retry-After`` (the spec
  itself may be what kills workers, so it is not retried), or 413 when it ran out of memory;
- one that runs past the wall-clock bound is killed (503 ``trace_timeout``);
- every death is seen at once (the process's sentinel is watched by the event loop) and a
  replacement starts immediately: it forks from a forkserver that has already imported torch.

A request waits at most ``queue_timeout_s`` for a free worker and the queue is bounded
(``workers + queue_limit`` in flight), beyond which requests are shed with 503 ``overloaded``.
``close`` stops every worker, the forkserver and multiprocessing's resource tracker.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

from gradtrace.problem import Problem
from gradtrace.service import worker_tasks
from gradtrace.service.ctrl_c import children_spared
from gradtrace.service.runner import Answer, WorkerUnavailable
from gradtrace.service.settings import Settings
from gradtrace.service.worker_main import worker_main

if TYPE_CHECKING:
    from gradtrace.spec import ModelSpec

log = logging.getLogger(__name__)

# Recycle each worker after this many tasks: bounds whatever torch or the engine leaks.
_TASKS_PER_WORKER = 200
# A worker acknowledges a task as soon as it reads it; one that has not after this long is
# stopped (SIGSTOP) or dying: it is killed and the task runs elsewhere.
_ACK_TIMEOUT_S = 3.0
# How long a new worker may take to say "ready" (the first one waits for the forkserver to
# import torch, which takes seconds, more on a busy machine).
_START_TIMEOUT_S = 90.0
# Between failed attempts to start a worker (e.g. the engine cannot be imported).
_RESTART_BACKOFF_S = 1.0
# Everything a trace imports, imported once in the forkserver: workers start warm. The last
# four are imported lazily by the first trace (torch's hooks pull in torch._dynamo; the spec's
# graph analysis networkx and sympy): preloaded, a new worker finds them imported instead of
# importing them again itself.
_PRELOAD = [
    "gradtrace.service.worker_main",
    "gradtrace.spec",
    "gradtrace.engine",
    "gradtrace.engine.spec_pipeline",
    "gradtrace.engine.dryrun",
    "gradtrace.spec.analysis",
    "gradtrace.spec.semantics",
    "gradtrace.comparison",
    "torch._dynamo",
    "networkx",
    "sympy",
]


class _NotStarted(Exception):
    """The worker never acknowledged the task (dead or hung before it): run it elsewhere."""


class _RunTimedOut(Exception):
    """The task ran past its wall-clock bound."""


class _Died(Exception):
    """The worker died while running the task."""

    def __init__(self, exitcode: int | None) -> None:
        super().__init__(f"worker exited with {exitcode}")
        self.exitcode = exitcode


class _Worker:
    def __init__(self, process: BaseProcess, conn: Connection, pid: int) -> None:
        self.process = process
        self.conn = conn
        self.pid = pid
        self.tasks = 0
        self.busy = False  # a thread is using conn: only that thread's end may close it
        self.alive = True


def _exchange(worker: _Worker, task: tuple[str, tuple[Any, ...]], run_timeout: float) -> Any:
    """Send one task to a worker and wait for its result (blocking: runs in a pool thread)."""
    conn = worker.conn
    try:
        conn.send(task)
        if not conn.poll(_ACK_TIMEOUT_S):
            raise _NotStarted("no acknowledgement")
        conn.recv()  # ("started", None)
    except (EOFError, OSError) as exc:
        raise _NotStarted(str(exc) or type(exc).__name__) from exc
    if not conn.poll(run_timeout):
        raise _RunTimedOut()
    try:
        _, result = conn.recv()
    except (EOFError, OSError) as exc:
        worker.process.join(2)
        raise _Died(worker.process.exitcode) from exc
    return result


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _reap(process: BaseProcess, grace_s: float = 2.0) -> None:
    """Wait for a retired worker to exit (it does, once its pipe closes); kill it otherwise."""
    process.join(grace_s)
    if process.exitcode is None and process.pid is not None:
        _kill(process.pid)
        process.join(grace_s)
    try:
        process.close()
    except ValueError:  # still running after SIGKILL (should not happen): leave the object
        log.error("worker %s did not exit", process.pid)


def stop_multiprocessing_helpers() -> None:
    """Stop this process's forkserver and resource tracker (multiprocessing's private singletons).

    Both would otherwise linger after a graceful stop until every descendant closed its copy of
    their pipes. Only called once every worker has exited; blocking.
    """
    from multiprocessing import forkserver, resource_tracker

    # their private state: the stdlib offers no public way to stop either
    server: Any = forkserver._forkserver
    if server._forkserver_pid is not None:
        _kill(server._forkserver_pid)
        server._stop()
    tracker: Any = resource_tracker._resource_tracker
    if tracker._pid is not None:
        _kill(tracker._pid)  # it ignores SIGTERM and SIGINT by design
        tracker._stop()


class WorkerPool:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._ctx = multiprocessing.get_context("forkserver")
        self._workers: set[_Worker] = set()
        self._idle: deque[_Worker] = deque()
        self._waiters: deque[asyncio.Future[_Worker]] = deque()
        self._background: set[asyncio.Future[Any]] = set()
        # Threads that wait on pipes: one per busy worker, plus starts and reaps.
        self._threads = ThreadPoolExecutor(settings.workers * 2 + 4, thread_name_prefix="gradtrace-pool")
        self._in_flight = 0
        self._capacity = settings.workers + settings.queue_limit
        self._closing = False
        self.ready = False
        self.tasks_run: Counter[str] = Counter()  # tasks handed to a worker, by name (not pings)

    # -- facts for /readyz and the tests ---------------------------------------------------
    @property
    def workers(self) -> int:
        """How many workers the pool keeps (its full capacity)."""
        return self._settings.workers

    @property
    def workers_alive(self) -> int:
        return len(self._workers)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> bool:
        """Start every worker (the first start runs the forkserver, which imports torch)."""
        self._ctx.set_forkserver_preload(_PRELOAD)
        await asyncio.gather(*(self._replace() for _ in range(self.workers)))
        self.ready = bool(self._workers)
        return self.ready

    async def close(self) -> None:
        self._closing = True
        for waiter in self._waiters:
            waiter.cancel()
        workers = list(self._workers)
        for worker in workers:
            self._retire(worker)
        for worker in workers:
            if worker.busy:  # shutting down with a trace still running: it will not be answered
                _kill(worker.pid)
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
        await asyncio.get_running_loop().run_in_executor(self._threads, stop_multiprocessing_helpers)
        self._threads.shutdown(wait=False)

    def _start_process(self) -> _Worker:
        """Fork one worker and wait for its "ready" (blocking: runs in a pool thread)."""
        parent, child = self._ctx.Pipe()
        init_args = (
            self._settings.worker_memory_mb,
            self._settings.worker_cpu_s,
            self._settings.debug_trace_delay_s,
        )
        process = self._ctx.Process(
            target=worker_main,
            args=(child, init_args, _TASKS_PER_WORKER),
            name="gradtrace-worker",
            daemon=True,
        )
        started = time.monotonic()
        with children_spared():  # the first start also starts the forkserver (importing torch)
            process.start()
        child.close()  # the worker holds the only other end: its death is EOF here
        try:
            if not parent.poll(_START_TIMEOUT_S):
                raise TimeoutError(f"no 'ready' after {_START_TIMEOUT_S:g} s")
            _, pid = parent.recv()
        except BaseException:
            parent.close()
            _reap(process, 0.1)
            raise
        log.info("worker %s ready in %.2f s", pid, time.monotonic() - started)
        return _Worker(process, parent, pid)

    async def _replace(self) -> None:
        """Start one worker, retrying until it runs or the pool closes."""
        while not self._closing:
            try:
                worker = await asyncio.get_running_loop().run_in_executor(self._threads, self._start_process)
            except Exception as exc:
                log.error("a worker failed to start (%s): retrying in %g s", exc, _RESTART_BACKOFF_S)
                await asyncio.sleep(_RESTART_BACKOFF_S)
                continue
            if self._closing:
                worker.conn.close()
                await asyncio.get_running_loop().run_in_executor(self._threads, _reap, worker.process)
                return
            self._workers.add(worker)
            asyncio.get_running_loop().add_reader(worker.process.sentinel, self._on_exit, worker)
            self.ready = True
            self._give(worker)
            return

    def _in_background(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _on_exit(self, worker: _Worker) -> None:
        """The event loop saw a worker's process end (killed, crashed, or recycled)."""
        if worker.alive:
            log.warning("worker %s exited unexpectedly: replacing it", worker.pid)
        self._retire(worker)

    def _retire(self, worker: _Worker) -> None:
        """Take a worker out of service (once) and start its replacement."""
        if worker not in self._workers:
            return
        self._workers.discard(worker)
        worker.alive = False
        asyncio.get_running_loop().remove_reader(worker.process.sentinel)
        if worker in self._idle:
            self._idle.remove(worker)
        if not worker.busy:
            self._dispose(worker)
        if not self._closing:
            self._in_background(self._replace())

    def _dispose(self, worker: _Worker) -> None:
        # Closing the pipe makes a worker that is still alive (e.g. its forkserver died, which
        # looks like an exit here) leave its loop; _reap makes sure it is gone.
        worker.conn.close()
        self._in_background(asyncio.get_running_loop().run_in_executor(self._threads, _reap, worker.process))

    # -- handing workers out ---------------------------------------------------------------
    def _give(self, worker: _Worker) -> None:
        """A worker is free: to the longest-waiting request, or to the idle set."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(worker)
                return
        self._idle.append(worker)

    async def _acquire(self, deadline: float) -> _Worker:
        """A live idle worker, waiting until ``deadline`` (loop time); TimeoutError past it."""
        while True:
            while self._idle:
                worker = self._idle.popleft()
                if worker.alive:
                    return worker
            waiter: asyncio.Future[_Worker] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    worker = await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._give(waiter.result())  # handed over just as we gave up: pass it on
                else:
                    waiter.cancel()
                raise
            if worker.alive:
                return worker

    def _release(self, worker: _Worker) -> None:
        """The thread that used a worker's pipe is done with it."""
        worker.busy = False
        worker.tasks += 1
        if not worker.alive:  # retired while it was busy
            self._dispose(worker)
        elif worker.tasks >= _TASKS_PER_WORKER or self._closing:
            self._retire(worker)  # a recycled worker exits by itself; its replacement starts
        else:
            self._give(worker)

    async def _run_on(self, worker: _Worker, task: tuple[str, tuple[Any, ...]], run_timeout: float) -> Any:
        worker.busy = True
        job = asyncio.get_running_loop().run_in_executor(self._threads, _exchange, worker, task, run_timeout)
        job.add_done_callback(lambda _: self._release(worker))
        try:
            # The outer bound covers a send or a read that blocks on a stopped worker.
            async with asyncio.timeout(_ACK_TIMEOUT_S + run_timeout + 5):
                return await asyncio.shield(job)
        except _Died:
            self._retire(worker)  # out of service now, before its thread hands it back
            raise
        except (_NotStarted, _RunTimedOut, TimeoutError):
            # Hung or dead: out of service, and killed so that the thread's pipe call returns.
            self._retire(worker)
            _kill(worker.pid)
            raise

    # -- the public operations -------------------------------------------------------------
    async def run_trace(self, spec: ModelSpec) -> Answer:
        """Trace one parsed spec in a worker (it is pickled across, not parsed again there).
        Raises WorkerUnavailable (503) when it could not."""
        return await self._run_task("run_trace", (spec,), "trace")

    async def run_compare(self, trace_a: bytes, trace_b: bytes, permalinks: dict[str, str]) -> Answer:
        """Compare two traces (JSON bytes) in a worker, with a trace's bounds and failures."""
        return await self._run_task("run_compare", (trace_a, trace_b, permalinks), "comparison")

    async def _run_task(self, name: str, args: tuple[Any, ...], what: str) -> Answer:
        if self._in_flight >= self._capacity:
            raise WorkerUnavailable("overloaded", "all workers are busy and the queue is full; retry shortly")
        self._in_flight += 1
        try:
            return await self._run_bounded(name, args, what)
        finally:
            self._in_flight -= 1

    async def _run_bounded(self, name: str, args: tuple[Any, ...], what: str) -> Answer:
        settings = self._settings
        deadline = asyncio.get_running_loop().time() + settings.queue_timeout_s
        for _attempt in range(2):
            try:
                worker = await self._acquire(deadline)
            except TimeoutError as exc:
                if self.workers_alive < self.workers:  # still replacing workers that died
                    raise WorkerUnavailable(
                        "worker_unavailable", "the workers are being restarted; retry shortly"
                    ) from exc
                raise WorkerUnavailable(
                    "overloaded",
                    f"no worker became free within {settings.queue_timeout_s:g} s; retry shortly",
                ) from exc
            started = time.monotonic()
            self.tasks_run[name] += 1
            try:
                value = await self._run_on(worker, (name, args), settings.trace_timeout_s)
                return Answer(value, time.monotonic() - started)
            except _NotStarted as exc:
                # Collateral: the worker was lost before it started this task. Run it elsewhere.
                log.warning("worker %s lost a task before starting it (%s): retrying", worker.pid, exc)
                # One loop turn first: deaths that happened meanwhile (all workers killed at
                # once) are seen, so the retry does not pick another dead worker.
                await asyncio.sleep(0)
            except (_RunTimedOut, TimeoutError) as exc:
                raise WorkerUnavailable(
                    "trace_timeout",
                    f"the {what} ran longer than {settings.trace_timeout_s:g} s and was stopped",
                ) from exc
            except _Died as exc:
                return Answer(self._death_problem(exc, what), time.monotonic() - started)
        raise WorkerUnavailable("worker_unavailable", f"no worker could take this {what}")

    @staticmethod
    def _death_problem(exc: _Died, what: str) -> Problem:
        """The worker died running THIS task: its request pays, no retry (the spec may be why)."""
        log.warning("worker died during a %s: exit code %s", what, exc.exitcode)
        if exc.exitcode == worker_tasks.EXIT_OUT_OF_MEMORY:
            return Problem("memory_limit", f"the {what} needed more memory than a worker may use")
        if exc.exitcode == -signal.SIGXCPU:
            raise WorkerUnavailable(
                "trace_timeout", f"the {what} used more CPU time than allowed and was stopped"
            ) from exc
        raise WorkerUnavailable(
            "worker_crashed", f"the worker running this {what} stopped; it has been replaced"
        ) from exc

    async def ping(self) -> int | None:
        """The pid of an idle worker that answered, or None when none could (all busy, or lost)."""
        try:
            worker = await self._acquire(asyncio.get_running_loop().time())
            return await self._run_on(worker, ("ping", ()), _ACK_TIMEOUT_S)
        except (TimeoutError, _NotStarted, _RunTimedOut, _Died):  # that worker is being replaced
            return None
