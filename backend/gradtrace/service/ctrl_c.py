"""Processes the server starts leave Ctrl-C to it.

A terminal sends Ctrl-C's SIGINT to its whole foreground process group: the API process and
every process it started (the CPU lane's helpers, the workers' forkserver and its workers). The
API process stops them all on its way out; each of them that got the signal too printed a
``KeyboardInterrupt`` traceback (a helper waiting for a job, the forkserver importing torch,
a helper still importing FastAPI when Ctrl-C came early). Setting SIGINT to ignored in a child
comes too late for the signals that arrive while it starts, so the parent starts its children
with SIGINT blocked: a signal mask is inherited across fork and exec, and a child born with
SIGINT blocked never sees it.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def children_spared() -> Iterator[None]:
    """Processes (and threads) started inside are born with SIGINT blocked. The calling thread's
    own Ctrl-C meanwhile is only held back: delivered as the block ends."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
