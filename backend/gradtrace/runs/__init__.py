"""Training runs recorded by ``gradtrace.watch``: the file on disk, its reader and the flags.

Torch-free: ``store`` writes and reads the SQLite file (its schema is documented there and in
the README), ``flags`` finds vanishing, exploding, non-finite, dead and stalled gradients in
the numbers of each logged step. The engine (``gradtrace.engine.watch``) computes the numbers
on the tensors' devices and hands them here once per logged step.
"""

from __future__ import annotations

from gradtrace.runs.flags import Flag, FlagRules
from gradtrace.runs.store import NodeInfo, Run, RunWriter, StepRecord, load_run

__all__ = ["Flag", "FlagRules", "NodeInfo", "Run", "RunWriter", "StepRecord", "load_run"]
