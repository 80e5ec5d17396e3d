"""Imported by the workers' forkserver: run one tiny trace before any worker is forked.

The first trace in a process pays for torch's lazy imports and one-time set-up (~85 MB of
address space and ~0.3 s here). Done once in the forkserver, every forked worker inherits it
(copy-on-write), so a worker's first trace is as fast as its later ones, and the per-task
memory cap measures the trace, not torch's start-up.

Importing this module never raises: a broken engine must not take the forkserver down
(the tasks will report the error instead).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

_WARM_UP_SPEC = {
    "spec_version": 1,
    "title": "warm-up",
    "modules": {"lin": {"type": "Linear", "in_features": 2, "out_features": 1}},
    "inputs": {"x": {"value": [[1.0, 2.0]], "requires_grad": True}},
    "forward": ["y = lin(x)", "loss = (tanh(y) ** 2).sum()"],
}


def warm_up() -> bool:
    try:
        import torch  # noqa: TID251 - forkserver only

        # Before any op: no intra-op thread pool exists when the workers fork.
        torch.set_num_threads(1)
        from gradtrace.service.worker_tasks import run_trace

        kind, _ = run_trace(_WARM_UP_SPEC)
        return kind == "ok"
    except Exception:
        log.exception("worker warm-up trace failed")
        return False


WARM = warm_up()
