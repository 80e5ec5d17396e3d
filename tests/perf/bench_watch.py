"""The "watch" section of ``make bench``: what ``gradtrace.watch`` costs a training step.

One training step = zero_grad, forward, loss, backward, SGD step. Bare against watched at
every=1 and every=10, beside the anchors on the same loop (``wandb.watch`` offline, TorchLens's
training monitor; ``make bench`` installs both, a run without them leaves their columns
empty), in rounds that alternate every mode (a new run directory each time). Each mode's
figure is the median over rounds of the mean step time of a round, by the process's CPU time
(``time.process_time``, one torch thread: what the step costs, which waiting for a core on a
loaded machine does not change) and by wall time beside it. A watched round's first step is
run before its timing starts and not counted: it numbers the modules (once per run, and again
only when the graph changes size), which the steps of a long run do not pay. Run alone:
``.venv/bin/python tests/perf/bench_watch.py [--rounds 3] [--models chain60,encoder2,gpt2]
[--no-anchors]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gradtrace  # noqa: E402

TARGETS = {1: 2.5, 10: 1.15}  # issue 34: at most this many bare steps


def _builders() -> dict[str, tuple[str, Callable[[], tuple[Any, Any, Callable[[Any], Any]]], int]]:
    from bench_big_model import BUILDERS, DESCRIPTIONS

    # (steps per round: GPT-2 small's SGD step on a CPU is ~1 s)
    return {
        k: (DESCRIPTIONS[k], BUILDERS[k], 10 if k == "gpt2" else 40) for k in ("chain60", "encoder2", "gpt2")
    }


def _steps(
    model: Any, x: Any, loss_fn: Callable[[Any], Any], opt: Any, n: int, scope: Any = None, first: int = 0
) -> tuple[float, float]:
    """``n`` training steps (numbered from ``first``): (wall, process CPU time) per step."""
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(first, first + n):
        with scope(i) if scope is not None else contextlib.nullcontext():
            opt.zero_grad()
            loss_fn(model(x)).backward()
            opt.step()
    return (time.perf_counter() - t0) / n, (time.process_time() - c0) / n


def _after_first(
    model: Any, x: Any, loss_fn: Any, opt: Any, n: int, scope: Any = None
) -> tuple[float, float]:
    """One step untimed (a watch's first step, see the module's docstring), then ``n`` timed."""
    _steps(model, x, loss_fn, opt, 1, scope)
    return _steps(model, x, loss_fn, opt, n, scope, first=1)


class _Anchors:
    """wandb.watch (offline: WANDB_MODE=offline, one run for the whole section, nothing sent)
    and TorchLens's training monitor (``torchlens.trackers.watch``, its gradients signal into
    its in-memory sink), where they import; ``missing`` says which did not."""

    def __init__(self, tmp: str, use: bool = True) -> None:
        self.missing: dict[str, str] = {}
        self.wandb: Any = None
        self.run: Any = None
        self.trackers: Any = None
        if not use:
            self.missing = {"wandb": "not run (--no-anchors)", "torchlens": "not run (--no-anchors)"}
            return
        os.environ["WANDB_MODE"] = "offline"
        os.environ.setdefault("WANDB_SILENT", "true")
        try:
            import wandb

            self.wandb = wandb
            self.run = wandb.init(mode="offline", dir=tmp, project="gradtrace-bench")
        except ImportError as exc:
            self.missing["wandb"] = f"not installed ({exc})"
        try:
            import torchlens.trackers as trackers

            self.trackers = trackers
        except ImportError as exc:
            self.missing["torchlens"] = f"no training monitor ({exc})"

    def wandb_steps(
        self, model: Any, x: Any, loss_fn: Any, opt: Any, n: int, every: int
    ) -> tuple[float, float]:
        self.wandb.watch(model, log="gradients", log_freq=every)
        try:
            return _after_first(model, x, loss_fn, opt, n)
        finally:
            self.wandb.unwatch(model)

    def torchlens_steps(
        self, model: Any, x: Any, loss_fn: Any, opt: Any, n: int, every: int
    ) -> tuple[float, float]:
        sink = self.trackers.MemorySink()
        session = self.trackers.watch(model, to=sink, signals=("gradients",), optimizer=opt, every=every)
        try:
            return _after_first(model, x, loss_fn, opt, n, scope=session.step)  # (its step scope)
        finally:
            session.close()

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()


MODES = (
    "bare",
    "every=10",
    "every=1",
    "wandb every=10",
    "wandb every=1",
    "torchlens every=10",
    "torchlens every=1",
)


def measure(key: str, rounds: int, anchors: _Anchors) -> dict[str, Any]:
    description, build, n = _builders()[key]
    model, x, loss_fn = build()
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    _steps(model, x, loss_fn, opt, 2)  # warm up
    times: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
    nodes = 0
    n_anchor = 10 if key == "gpt2" else 20  # (the anchors at every=1 cost seconds a step)
    for _ in range(rounds):
        for every in (10, 1):  # (bare, watched, bare, watched: each watched mode beside a bare round)
            times["bare"].append(_steps(model, x, loss_fn, opt, n))
            with tempfile.TemporaryDirectory() as d:
                with gradtrace.watch(model, Path(d) / "run", every=every, full_traces=False) as w:
                    times[f"every={every}"].append(_after_first(model, x, loss_fn, opt, n))
                nodes = w.last_nodes or nodes
            if anchors.wandb is not None:
                times[f"wandb every={every}"].append(
                    anchors.wandb_steps(model, x, loss_fn, opt, n_anchor, every)
                )
            if anchors.trackers is not None:
                times[f"torchlens every={every}"].append(
                    anchors.torchlens_steps(model, x, loss_fn, opt, n_anchor, every)
                )
    med = {
        k: (statistics.median(w for w, _c in v), statistics.median(c for _w, c in v))
        for k, v in times.items()
        if v
    }
    return {"key": key, "description": description, "nodes": nodes, "steps": n, **med}


def _cell(r: dict[str, Any], mode: str) -> str:
    """CPU time per step (its ratio to a bare step), then wall time's ratio."""
    if mode not in r:
        return "—"
    (wall, cpu), (bare_wall, bare_cpu) = r[mode], r["bare"]
    return f"{cpu * 1e3:.2f} ms ({cpu / bare_cpu:.2f}×; wall {wall / bare_wall:.2f}×)"


def _row(r: dict[str, Any]) -> str:
    cells = " | ".join(_cell(r, m) for m in MODES[1:])
    wall, cpu = r["bare"]
    return f"| {r['description']} | {r['nodes']} | {cpu * 1e3:.2f} ms (wall {wall * 1e3:.2f} ms) | {cells} |"


def section(rounds: int = 3, models: list[str] | None = None, anchors_too: bool = True) -> list[str]:
    torch.set_num_threads(1)
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        anchors = _Anchors(tmp, anchors_too)
        try:
            results = []
            for key in models or ["chain60", "encoder2", "gpt2"]:
                print(f"watch: {key} …", file=sys.stderr, flush=True)
                results.append(measure(key, rounds, anchors))
                print(_row(results[-1]), file=sys.stderr, flush=True)  # (each model as it is measured)
        finally:
            anchors.close()
    load_after = os.getloadavg()
    missing = "; ".join(f"{k}: {v}" for k, v in anchors.missing.items()) or "both installed"
    lines = [
        "## gradtrace.watch: cost per training step",
        "",
        "A training step (zero_grad, forward, loss, backward, SGD step) bare and under "
        "`gradtrace.watch(model, dir, every=N, full_traces=False)`, beside `wandb.watch(model, "
        'log="gradients", log_freq=N)` (offline) and TorchLens\'s training monitor '
        '(`torchlens.trackers.watch(model, to=MemorySink(), signals=("gradients",), optimizer=opt, every=N)` '
        "in its `session.step(i)` scope) on the same loop. Each cell: the process's CPU time per step "
        "(one torch thread) and its ratio to a bare step, then the ratio by wall time; medians over "
        f"rounds alternating every mode ({rounds} rounds of {_builders()['chain60'][2]} steps, 10 on GPT-2; "
        "the anchors 20, 10 on GPT-2), a watched round's first step (it numbers the modules, once "
        "per run) not counted. Targets (issue 34): "
        f"every=10 ≤ {TARGETS[10]}×, every=1 ≤ {TARGETS[1]}× a bare step. What each records per logged "
        "step: gradtrace, norms in and out of every grad_fn node plus each parameter's gradient norm, "
        "weight norm and update ratio; wandb, a 64-bin histogram of each parameter's gradient; "
        "TorchLens, scalar summaries of each parameter's gradient. "
        f"Anchors: {missing}. Machine load (1-min average, {os.cpu_count()} CPUs): "
        f"{load[0]:.1f} before, {load_after[0]:.1f} after.",
        "",
        "| model | grad_fn nodes | bare step | gradtrace every=10 | gradtrace every=1 | wandb every=10 "
        "| wandb every=1 | TorchLens every=10 | TorchLens every=1 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines.extend(_row(r) for r in results)
    lines.append("")
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", default="chain60,encoder2,gpt2")
    parser.add_argument(
        "--no-anchors", action="store_true", help="gradtrace's rows only (no wandb, TorchLens)"
    )
    args = parser.parse_args()
    print("\n".join(section(args.rounds, args.models.split(","), not args.no_anchors)))
