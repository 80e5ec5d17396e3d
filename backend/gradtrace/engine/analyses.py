"""Every analysis of a capture, listed in one place (each an implementation of
``analysis.Analysis``: what it observes, what it adds to the trace). The order is part of the
output: the capture calls them, and assemble asks them for their records, in this order (the
value budget is spent in it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gradtrace.engine.analysis import Analysis
from gradtrace.engine.diagnostics import Diagnostics
from gradtrace.engine.grad_norms import GradNorms
from gradtrace.engine.linear_reconstruction import LinearAnalysis
from gradtrace.engine.memory import SavedMemory

ANALYSES: tuple[Callable[[], Analysis], ...] = (Diagnostics, SavedMemory, LinearAnalysis, GradNorms)


def new_analyses() -> list[Analysis]:
    """A fresh instance of each analysis, for one capture."""
    return [make() for make in ANALYSES]


def kept_call_types(analyses: list[Analysis]) -> tuple[type[nn.Module], ...]:
    """The module types whose calls the forward keeps, for any of ``analyses``."""
    return tuple(dict.fromkeys(t for a in analyses for t in a.keeps_calls_of))


def saved_observer(
    analyses: list[Analysis],
) -> Callable[[str, Any, int, list[tuple[str, torch.Tensor]]], None] | None:
    """What the recorder calls for every node that saved tensors (None: no analysis asks)."""
    observers = [a.saved for a in analyses if a.wants_saved]
    if not observers:
        return None
    if len(observers) == 1:  # (the usual: called per node, no loop in between)
        return observers[0]

    def every(node_id: str, node: Any, seq: int, tensors: list[tuple[str, torch.Tensor]]) -> None:
        for observe in observers:
            observe(node_id, node, seq, tensors)

    return every
