"""A worker's warm-up: one tiny trace before its first real one.

The first trace in a process pays for torch's lazy imports and one-time set-up (memory and
time no later trace needs). Paid when the worker starts, before its budgets are armed, the
per-task memory cap measures the trace and not torch's start-up, and the first user's trace is
as fast as the later ones. Nothing runs at import time: the worker calls ``warm_up``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from gradtrace.problem import Problem

if TYPE_CHECKING:
    from gradtrace.spec import ModelSpec

log = logging.getLogger(__name__)

WARM_UP_SPEC = {
    "spec_version": 1,
    "title": "warm-up",
    "modules": {"lin": {"type": "Linear", "in_features": 2, "out_features": 1}},
    "inputs": {"x": {"value": [[1.0, 2.0]], "requires_grad": True}},
    "forward": ["y = lin(x)", "loss = (tanh(y) ** 2).sum()"],
}


def warm_up(run_trace: Callable[[ModelSpec], bytes | Problem]) -> bool:
    """Run the warm-up spec through ``run_trace``; never raises (the tasks report a broken engine).

    Parsed here as the API parses a request's spec: ``run_trace`` takes the parsed spec."""
    try:
        from gradtrace.spec import parse_spec

        answer = run_trace(parse_spec(WARM_UP_SPEC))
    except Exception:
        log.exception("worker warm-up trace failed")
        return False
    if isinstance(answer, Problem):
        log.warning("worker warm-up trace answered %s: %s", answer.code, answer.message)
        return False
    return True
