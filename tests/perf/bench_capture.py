"""Capture cost: gradtrace.trace vs a bare forward+backward of the same ~1,000-node model.

Two models: a deep MLP, 200 x (Linear + Tanh) (1,404 nodes, at two widths: tiny tensors make
per-tensor overhead the whole story; wide ones make it the numbers), and a realistic stack,
12 TransformerEncoderLayers (d_model 64, 4 heads, ff 256, dropout 0.1; ~1,050 nodes).

Run: .venv/bin/python tests/perf/bench_capture.py [--repeats 7] [--models mlp32,mlp256,encoder]
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


def make_encoder(layers: int = 12, d_model: int = 64) -> nn.Module:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model, 4, dim_feedforward=4 * d_model, dropout=0.1, batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


MODELS = {
    # name -> (description, model factory, input factory)
    "mlp32": (
        "200 x (Linear(32,32) + Tanh), batch 16",
        lambda: make_model(200, 32),
        lambda g: torch.randn(16, 32, generator=g, requires_grad=True),
    ),
    "mlp256": (
        "200 x (Linear(256,256) + Tanh), batch 64",
        lambda: make_model(200, 256),
        lambda g: torch.randn(64, 256, generator=g, requires_grad=True),
    ),
    "encoder": (
        "12 x TransformerEncoderLayer(64, 4 heads, ff 256), batch 8 x 32 tokens",
        make_encoder,
        lambda g: torch.randn(8, 32, 64, generator=g),
    ),
}


def bare(model: nn.Module, x: torch.Tensor) -> None:
    model.zero_grad(set_to_none=True)
    (model(x) ** 2).mean().backward()


def capture(model: nn.Module, x: torch.Tensor) -> gradtrace.Trace:
    model.zero_grad(set_to_none=True)
    return gradtrace.trace(model, x, lambda y: (y**2).mean())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--models",
        default=",".join(MODELS),
        help=f"comma-separated, among {', '.join(MODELS)}; one table each",
    )
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.models.split(","):
        description, make, make_input = MODELS[name]
        run(description, make(), make_input(torch.Generator().manual_seed(1)), args.repeats)


def run(description: str, model: nn.Module, x: torch.Tensor, repeats: int) -> None:
    trace = capture(model, x)  # warm-up, and the size of the graph
    doc = trace.to_dict()
    nodes, events = len(doc["graph"]["nodes"]), len(doc["events"])
    bare(model, x)
    names = ["bare forward+backward", "gradtrace.trace", "gradtrace.trace + to_json"]
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    json_bytes = 0
    for _ in range(repeats):
        w0, c0 = time.perf_counter(), time.process_time()
        bare(model, x)
        w1, c1 = time.perf_counter(), time.process_time()
        tr = capture(model, x)
        w2, c2 = time.perf_counter(), time.process_time()
        json_bytes = len(tr.to_json())
        w3, c3 = time.perf_counter(), time.process_time()
        for name, (wa, wb, ca, cb) in zip(
            names, [(w0, w1, c0, c1), (w1, w2, c1, c2), (w1, w3, c1, c3)], strict=True
        ):
            wall[name].append(wb - wa)
            cpu[name].append(cb - ca)
    # CPU time of this process is the fair measure on a shared machine (wall time counts
    # other processes' turns too); both are shown.
    base_cpu = statistics.median(cpu[names[0]])
    base_wall = statistics.median(wall[names[0]])
    out = sys.stdout
    out.write(
        f"\nmodel: {description}; "
        f"{nodes} graph nodes, {events} events, trace JSON {json_bytes / 1e6:.2f} MB; "
        f"torch {torch.__version__}, 1 thread, median of {repeats}\n"
    )
    out.write(f"{'what':28s} {'cpu ms':>9s} {'ratio':>7s} {'wall ms':>9s} {'ratio':>7s}\n")
    for name in names:
        c = statistics.median(cpu[name])
        w = statistics.median(wall[name])
        out.write(f"{name:28s} {c * 1e3:9.1f} {c / base_cpu:6.1f}x {w * 1e3:9.1f} {w / base_wall:6.1f}x\n")
    out.flush()


if __name__ == "__main__":
    main()
