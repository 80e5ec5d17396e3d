"""A run where users already look: TensorBoard event files and ``wandb.log`` dicts.

Both write the same scalars, named by what they measure:
``loss``; ``grad_norm/<param>``, ``update_ratio/<param>``; ``node_grad_out/<node key>``
(what the node passes back, per grad_fn node); ``flags/<kind>`` (1 at the step a flag fired).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gradtrace.runs.store import Run


def scalars(run: Run) -> Iterator[tuple[int, dict[str, float]]]:
    """(step, {tag: value}) for each logged step, the values that exist at that step."""
    fired: dict[int, list[str]] = {}
    for f in run.flags:
        fired.setdefault(f.step, []).append(f.kind)
    for step in run.steps:
        v = run.step_values(step)
        row: dict[str, float] = {}
        if v["loss"] is not None:
            row["loss"] = v["loss"]
        for name, q in v["params"].items():
            row[f"grad_norm/{name}"] = q["param_grad"]
            if q["update_ratio"] is not None:
                row[f"update_ratio/{name}"] = q["update_ratio"]
        for key, q in v["nodes"].items():
            row[f"node_grad_out/{key}"] = q["grad_out"]
        for kind in fired.get(step, []):
            row[f"flags/{kind}"] = 1.0
        yield step, row


def to_tensorboard(run: Run, logdir: str | Path) -> Path:
    """Write the run as TensorBoard event files in ``logdir`` (TensorBoard's own writer and
    protocol buffers; needs the ``tensorboard`` package: ``pip install gradtrace[watch]``).
    Returns ``logdir``."""
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.event_file_writer import EventFileWriter
    except ImportError as exc:  # (an optional extra)
        raise ImportError(
            "run.to_tensorboard needs the tensorboard package: pip install tensorboard"
        ) from exc
    Path(logdir).mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(logdir))
    try:
        for step, row in scalars(run):
            values = [summary_pb2.Summary.Value(tag=tag, simple_value=value) for tag, value in row.items()]
            writer.add_event(event_pb2.Event(step=step, summary=summary_pb2.Summary(value=values)))
    finally:
        writer.close()
    return Path(logdir)


def to_wandb(run: Run) -> list[dict[str, Any]]:
    """The run as ``wandb.log``-ready dicts, one per logged step, each with its ``step``:
    ``for row in run.to_wandb(): wandb.log(row, step=row["step"])``. Needs no wandb."""
    return [{"step": step, **row} for step, row in scalars(run)]
