"""The "watch" section of ``make bench``: what ``gradtrace.watch`` costs a training step.

One training step = zero_grad, forward, loss, backward, SGD step. Bare against watched at
every=1 and every=10, in rounds that interleave the three (a new run directory each time);
each figure is the median over rounds of the mean step time of a round. Run alone:
``.venv/bin/python tests/perf/bench_watch.py [--rounds 3] [--models chain60,encoder2,gpt2]``.
"""

from __future__ import annotations

import argparse
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


def _steps(model: Any, x: Any, loss_fn: Callable[[Any], Any], opt: Any, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        opt.zero_grad()
        loss_fn(model(x)).backward()
        opt.step()
    return (time.perf_counter() - t0) / n


def measure(key: str, rounds: int) -> dict[str, Any]:
    description, build, n = _builders()[key]
    model, x, loss_fn = build()
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    _steps(model, x, loss_fn, opt, 2)  # warm up
    times: dict[str, list[float]] = {"bare": [], "every=10": [], "every=1": []}
    nodes = 0
    for _ in range(rounds):
        times["bare"].append(_steps(model, x, loss_fn, opt, n))
        for every in (10, 1):
            with tempfile.TemporaryDirectory() as d:
                with gradtrace.watch(model, Path(d) / "run", every=every, full_traces=False) as w:
                    times[f"every={every}"].append(_steps(model, x, loss_fn, opt, n))
                nodes = w.last_nodes or nodes
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"key": key, "description": description, "nodes": nodes, "steps": n, **med}


def section(rounds: int = 3, models: list[str] | None = None) -> list[str]:
    torch.set_num_threads(1)
    lines = [
        "## gradtrace.watch: cost per training step",
        "",
        "A training step (zero_grad, forward, loss, backward, SGD step) bare and under "
        "`gradtrace.watch(model, dir, every=N, full_traces=False)`; medians over rounds interleaving the "
        f"three ({rounds} rounds). Targets (issue 34): every=10 ≤ {TARGETS[10]}×, every=1 ≤ {TARGETS[1]}× "
        "a bare step. `wandb.watch` and TorchLens's training monitor are not installed here: not compared.",
        "",
        "| model | grad_fn nodes | bare step | every=10 | every=1 |",
        "|---|---:|---:|---:|---:|",
    ]
    for key in models or ["chain60", "encoder2", "gpt2"]:
        print(f"watch: {key} …", file=sys.stderr, flush=True)
        r = measure(key, rounds)
        b = r["bare"]
        lines.append(
            f"| {r['description']} | {r['nodes']} | {b * 1e3:.2f} ms | {r['every=10'] * 1e3:.2f} ms "
            f"({r['every=10'] / b:.2f}×) | {r['every=1'] * 1e3:.2f} ms ({r['every=1'] / b:.2f}×) |"
        )
    lines.append("")
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", default="chain60,encoder2,gpt2")
    args = parser.parse_args()
    print("\n".join(section(args.rounds, args.models.split(","))))
