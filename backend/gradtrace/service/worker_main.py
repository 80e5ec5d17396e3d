"""The main loop of one torch worker process (the child side of ``service/workers.py``).

Each worker owns one end of a pipe to the API process and nothing else: it says ``ready``,
then for each task acknowledges it (``started``) before running it and sends back the tagged
result (``done``). The acknowledgement is how the API tells the two ways a task can be lost
apart: a worker that dies before ``started`` never ran the task (run it elsewhere); one that
dies after it was running it (that request pays).

A worker exits by itself after ``max_tasks`` tasks (recycling bounds whatever torch leaks) and
as soon as the API's end of the pipe closes, so no worker outlives the API process.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from gradtrace.service import worker_tasks

# Task names the API may send: plain names cross the pipe, never pickled functions.
TASKS: dict[str, Callable[..., Any]] = {
    "run_trace": worker_tasks.run_trace,
    "run_compare": worker_tasks.run_compare,
    "ping": worker_tasks.ping,
}


def worker_main(conn: Connection, init_args: tuple[Any, ...], max_tasks: int) -> None:
    # Ctrl-C in a terminal reaches the whole process group: the API shuts the workers down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker_tasks.init_worker(*init_args)
    try:
        conn.send(("ready", os.getpid()))
        for _ in range(max_tasks):
            name, args = conn.recv()
            conn.send(("started", None))
            conn.send(("done", TASKS[name](*args)))
    except (EOFError, OSError):  # the API process is gone or closed the pipe: stop
        pass
    finally:
        conn.close()
