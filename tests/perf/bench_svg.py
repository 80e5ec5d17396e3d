"""Warm SVG of a model: gradtrace ``trace.save("x.svg")`` against torchviz ``make_dot`` + Graphviz.

Both warm and in-process, interleaved round by round (medians): torchviz as ``tests/perf/bench.py``
times it (forward, ``make_dot``, ``dot -Tsvg``); gradtrace saving a trace captured in the same
round, as ``bench.py`` does (a new trace each round; the renderer keeps the model's layout and
chip spots). A model whose every capture is the same to the last number (no BatchNorm running
stats, no dropout: the encoders) draws the same picture each round, which the in-process SVG
cache answers; so the save is timed a second time with that cache emptied first: the drawing
itself, whatever the trace. With ``--training`` an SGD step comes before every capture: the
numbers change as in a training loop, and with them most chips' widths, so the renderer places
the chips again (only the layout is kept). gradtrace's time is broken down into writing what the renderer
reads (Python: the trace JSON without its base64 numbers, ``drawing_json``) and the Node
renderer's request (transfer, parse, layout lookup, SVG, answer).

Run: .venv/bin/python tests/perf/bench_svg.py [--models chain60,encoder2,resnet,encoder12] [--rounds 9]
Needs torchviz (``pip install torchviz``) and Graphviz's ``dot``. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import torch
from torchviz import make_dot

import gradtrace
from gradtrace.render import diagram
from gradtrace.render.node_tool import run_render
from gradtrace.render.options import DrawOptions
from gradtrace.render.source import drawing_json

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_models import MODELS, loss_of, timed  # noqa: E402


def bench(key: str, rounds: int, out: Path, training: bool = False) -> dict[str, float]:
    model, x = MODELS[key].build()
    params = dict(model.named_parameters())
    sgd = torch.optim.SGD(model.parameters(), lr=0.05)

    def viz_svg() -> None:
        make_dot(loss_of(model(x)), params=params).pipe(format="svg")

    def capture() -> gradtrace.Trace:
        if training:
            model.zero_grad(set_to_none=True)
            loss_of(model(x)).backward()
            sgd.step()
        model.zero_grad(set_to_none=True)
        return gradtrace.trace(model, x, loss_of)

    viz_svg()
    capture().save(out)  # the first drawing: starts Node, lays the model out
    times: dict[str, list[float]] = {k: [] for k in ("torchviz", "gradtrace", "drawn", "json", "node")}
    args = DrawOptions().svg_args()
    for _ in range(rounds):
        times["torchviz"].append(timed(viz_svg))
        trace = capture()
        times["gradtrace"].append(timed(lambda: trace.save(out)))  # noqa: B023
        trace = capture()
        diagram._cache.clear()
        times["drawn"].append(timed(lambda: trace.save(out)))  # noqa: B023
        trace = capture()
        data = b""

        def encode() -> None:
            nonlocal data
            data = drawing_json(trace)  # noqa: B023

        times["json"].append(timed(encode))
        times["node"].append(timed(lambda: run_render(data, args)))  # noqa: B023
    return {k: statistics.median(v) * 1000 for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="chain60,encoder2,resnet,encoder12")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--training", action="store_true", help="an SGD step before every capture")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(
        "| model | torchviz + dot SVG | gradtrace SVG (warm) | ratio | SVG cache emptied | ratio "
        "| of which: drawing JSON | Node request |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for key in args.models.split(","):
            m = bench(key, args.rounds, Path(tmp) / f"{key}.svg", args.training)
            print(
                f"| {MODELS[key].description} | {m['torchviz']:.1f} ms | {m['gradtrace']:.1f} ms | "
                f"{m['gradtrace'] / m['torchviz']:.2f}× | {m['drawn']:.1f} ms | "
                f"{m['drawn'] / m['torchviz']:.2f}× | {m['json']:.1f} ms | {m['node']:.1f} ms |",
                flush=True,
            )


if __name__ == "__main__":
    main()
