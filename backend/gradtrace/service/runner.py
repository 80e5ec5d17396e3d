"""Where a ``TraceService``'s tasks run: the ``TaskRunner`` it is given.

Two runners: ``WorkerPool`` (``service/workers.py``), the torch worker processes ``gradtrace
serve`` uses, with their CPU, memory and wall-clock bounds and crash isolation; and
``InThreadRunner`` here, the same task functions (``service/worker_tasks.py``) run one at a time
in a thread of this process, without any of those bounds. The second is for tests of the HTTP
contract in process (envelopes, caching, OpenAPI): what needs the bounds (kills, memory caps,
restarts) is tested against the pool.

A task answers an ``Answer``: the result's bytes or the ``Problem`` that refuses it, and how
long it held a worker (charged to the client). A runner raises ``WorkerUnavailable`` (a 503
Problem) when it could not run the task at all.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gradtrace.problem import Problem
from gradtrace.service import worker_tasks

if TYPE_CHECKING:
    from gradtrace.spec import ModelSpec


@dataclass(frozen=True)
class Answer:
    """What a task answered (result bytes, or the Problem refusing it) and the worker seconds it took."""

    value: bytes | Problem
    seconds: float = 0.0


class WorkerUnavailable(Problem):
    """The request could not be run for reasons that are not its fault: 503, retry later."""

    def __init__(self, code: str, message: str, retry_after: int = 2) -> None:
        super().__init__(code, message, status=503, headers={"Retry-After": str(retry_after)})


class TaskRunner(Protocol):
    """What ``TraceService`` needs of the place its tasks run (and /readyz reports)."""

    ready: bool
    tasks_run: Counter[str]  # tasks run, by name (not pings)

    @property
    def workers(self) -> int: ...
    @property
    def workers_alive(self) -> int: ...
    @property
    def in_flight(self) -> int: ...

    async def start(self) -> bool: ...
    async def close(self) -> None: ...
    async def run_trace(self, spec: ModelSpec) -> Answer: ...
    async def run_compare(self, trace_a: bytes, trace_b: bytes, permalinks: dict[str, str]) -> Answer: ...
    async def ping(self) -> int | None: ...


class InThreadRunner:
    """The worker's tasks, one at a time in one thread of this process, unbounded (tests only:
    a task that runs out of memory here ends this process, as it ends a worker)."""

    workers = 1

    def __init__(self, settings: object = None) -> None:  # a runner factory's signature: nothing to read
        self.ready = False
        self.tasks_run: Counter[str] = Counter()
        self._in_flight = 0
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="gradtrace-in-thread")

    @property
    def workers_alive(self) -> int:
        return 1 if self.ready else 0

    @property
    def in_flight(self) -> int:
        return self._in_flight

    async def start(self) -> bool:
        self.ready = True
        return True

    async def close(self) -> None:
        self.ready = False
        self._thread.shutdown(wait=False)

    async def run_trace(self, spec: ModelSpec) -> Answer:
        return await self._run("run_trace", lambda: worker_tasks.run_trace(spec))

    async def run_compare(self, trace_a: bytes, trace_b: bytes, permalinks: dict[str, str]) -> Answer:
        return await self._run("run_compare", lambda: worker_tasks.run_compare(trace_a, trace_b, permalinks))

    async def ping(self) -> int | None:
        return os.getpid()

    async def _run(self, name: str, task: Callable[[], bytes | Problem]) -> Answer:
        self.tasks_run[name] += 1
        self._in_flight += 1
        started = time.monotonic()
        try:
            value = await asyncio.get_running_loop().run_in_executor(self._thread, task)
        finally:
            self._in_flight -= 1
        return Answer(value, time.monotonic() - started)
