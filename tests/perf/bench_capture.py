"""Capture cost: gradtrace.trace vs a bare forward+backward of the same ~1,000-node model.

Run: .venv/bin/python tests/perf/bench_capture.py [--repeats 7] [--layers 200]
Prints a table of medians measured side by side in one run (interleaved, so machine noise
hits both), and the ratios. Not collected by pytest (a benchmark, not a timed test).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
from torch import nn

import gradtrace


def make_model(layers: int, width: int) -> nn.Module:
    gen = torch.Generator().manual_seed(0)
    blocks: list[nn.Module] = []
    for _ in range(layers):
        lin = nn.Linear(width, width)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(width, width, generator=gen) / width**0.5)
        blocks += [lin, nn.Tanh()]
    return nn.Sequential(*blocks)


def bare(model: nn.Module, x: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    (model(x) ** 2).mean().backward()


def capture(model: nn.Module, x: torch.Tensor) -> gradtrace.Trace:
    model.zero_grad(set_to_none=True)
    return gradtrace.trace(model, x, lambda y: (y**2).mean())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=200)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = make_model(args.layers, args.width)
    x = torch.randn(args.batch, args.width, generator=torch.Generator().manual_seed(1),
                    requires_grad=True)
    trace = capture(model, x)  # warm-up, and the size of the graph
    nodes = len(trace.doc.graph.nodes)
    bare(model, x)
    times: dict[str, list[float]] = {"bare forward+backward": [], "gradtrace.trace": [],
                                     "gradtrace.trace + to_json": []}
    json_bytes = 0
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        bare(model, x)
        t1 = time.perf_counter()
        tr = capture(model, x)
        t2 = time.perf_counter()
        json_bytes = len(tr.to_json())
        t3 = time.perf_counter()
        times["bare forward+backward"].append(t1 - t0)
        times["gradtrace.trace"].append(t2 - t1)
        times["gradtrace.trace + to_json"].append(t3 - t1)
    base = statistics.median(times["bare forward+backward"])
    out = sys.stdout
    out.write(f"model: {args.layers} x (Linear({args.width},{args.width}) + Tanh), batch {args.batch}; "
              f"{nodes} graph nodes, {len(trace.doc.events)} events, trace JSON {json_bytes / 1e6:.2f} MB; "
              f"torch {torch.__version__}, 1 thread, median of {args.repeats}\n")
    out.write(f"{'what':30s} {'median ms':>10s} {'min ms':>10s} {'ratio':>7s}\n")
    for name, values in times.items():
        med = statistics.median(values)
        out.write(f"{name:30s} {med * 1e3:10.2f} {min(values) * 1e3:10.2f} {med / base:7.1f}x\n")


if __name__ == "__main__":
    main()
