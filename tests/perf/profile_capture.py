"""Where a capture's time goes: gradtrace.trace + to_json against a bare forward+backward.

    python tests/perf/profile_capture.py chain60 encoder2 [--rounds 9] [--profile chain60]

Rounds interleave bare and gradtrace on the same model (the machine's noise hits both
alike); the table gives medians and the ratio. ``--profile KEY`` adds a cProfile of a few
captures of that model (top functions by own time). Not a timed test: a tool.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
from pathlib import Path

import torch

import gradtrace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_models import MODELS, loss_of, timed  # noqa: E402


def ratios(key: str, rounds: int) -> tuple[float, float, float]:
    """(median bare s, median gradtrace s, median of per-round ratios)."""
    model, x = MODELS[key].build()

    def bare() -> None:
        model.zero_grad(set_to_none=True)
        loss_of(model(x)).backward()

    def traced() -> None:
        model.zero_grad(set_to_none=True)
        gradtrace.trace(model, x, loss_of).to_json()

    bare()
    traced()
    b, g = [], []
    for _ in range(rounds):
        b.append(timed(bare))
        g.append(timed(traced))
    return (
        statistics.median(b),
        statistics.median(g),
        statistics.median(gi / bi for gi, bi in zip(g, b, strict=True)),
    )


def profile(key: str, captures: int, top: int) -> None:
    model, x = MODELS[key].build()
    gradtrace.trace(model, x, loss_of).to_json()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(captures):
        model.zero_grad(set_to_none=True)
        gradtrace.trace(model, x, loss_of).to_json()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=["chain60", "encoder2"])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--captures", type=int, default=5)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print("| model | bare f+b | gradtrace + to_json | ratio (median of rounds) |")
    print("|---|---:|---:|---:|")
    for key in args.models:
        b, g, r = ratios(key, args.rounds)
        print(f"| {key} | {b * 1e3:.1f} ms | {g * 1e3:.1f} ms | {r:.1f}× |", flush=True)
    if args.profile:
        profile(args.profile, args.captures, args.top)


if __name__ == "__main__":
    main()
