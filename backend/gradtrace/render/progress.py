"""A word on the terminal while a drawing takes long: what it is doing, then how long it took.

A drawing of a big model can take many seconds (ELK laying out a thousand nodes, Chromium
rasterising a tall PNG); in silence that looks like a hang. When one has run for
``GRADTRACE_PROGRESS_AFTER`` seconds (2 by default) a line goes to stderr, e.g.
``gradtrace: laying out and drawing 1,023 nodes…``, and a second one when it is done. Only
where a person reads stderr: a terminal, or a notebook (whose cell shows it); never in a pipe,
a log file or a server. Quick drawings print nothing.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

DEFAULT_AFTER_S = 2.0


def _after() -> float:
    raw = os.environ.get("GRADTRACE_PROGRESS_AFTER", "")
    try:
        return max(0.0, float(raw)) if raw.strip() else DEFAULT_AFTER_S
    except ValueError:
        return DEFAULT_AFTER_S


def _someone_reads(stream: object) -> bool:
    """stderr is a terminal, or a notebook kernel's stream (ipykernel's OutStream)."""
    if type(stream).__module__.startswith("ipykernel"):
        return True
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed or odd stream: say nothing
        return False


@contextmanager
def progress(what: str | Callable[[], str]) -> Iterator[None]:
    """Around a drawing: ``gradtrace: {what}…`` on stderr if it is still running after the
    threshold, then ``gradtrace: done in N.N s``. ``what`` may be a function, called only
    then (e.g. counting a big trace's nodes costs nothing when the drawing is quick)."""
    stream = sys.stderr
    if not _someone_reads(stream):
        yield
        return
    start = time.monotonic()
    finished = threading.Event()
    spoke = threading.Event()

    def speak() -> None:
        if not finished.wait(_after()):
            print(f"gradtrace: {what() if callable(what) else what}…", file=stream, flush=True)
            spoke.set()

    # (the drawing waits on a subprocess, without the GIL: this thread can speak meanwhile)
    watcher = threading.Thread(target=speak, name="gradtrace-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        finished.set()
        watcher.join()
        if spoke.is_set():
            print(f"gradtrace: done in {time.monotonic() - start:.1f} s", file=stream, flush=True)
