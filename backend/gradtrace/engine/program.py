"""A program recorded as it runs: the engine beneath ``gradtrace.record()``.

``with gradtrace.record() as rec:`` runs the block as written, with the capture of a trace on
for its duration (``start_recording``: the one capture entry, capture.Capture, that
``trace()`` and a spec run use too, with the session given the block's frame: how its passes,
models and leaves are found and named is session.py's docstring).
"""

from __future__ import annotations

import functools
import types

from gradtrace.engine.capture import Capture
from gradtrace.engine.session import LIBRARY_MAX_NODES, TraceSession
from gradtrace.engine.summarize import DEFAULT_FINAL_VALUE_LIMIT, DEFAULT_VALUE_BUDGET


def start_recording(
    frame: types.FrameType,
    *,
    max_nodes: int = LIBRARY_MAX_NODES,
    value_budget: int = DEFAULT_VALUE_BUDGET,
    final_value_limit: int = DEFAULT_FINAL_VALUE_LIMIT,
    title: str | None = None,
) -> Capture:
    """A ``record()`` block's capture, started (``frame``: the frame running the ``with``);
    ``finish(exc)`` it as the block ends."""
    capture = Capture("gradtrace.record()", "program", title or "program")
    capture.start(
        functools.partial(
            TraceSession,
            frame,
            max_nodes=max_nodes,
            value_budget=value_budget,
            final_value_limit=final_value_limit,
        )
    )
    return capture
