"""Two checkouts of gradtrace compared on the capture benchmarks, in alternating processes.

Not a test: for a change to the engine, what it costs in capture time and peak memory. Each
round runs, for every model and every checkout, one fresh Python process that times a bare
forward+backward and ``gradtrace.trace`` + ``to_json`` of the same model (interleaved inside
the process too), then one process per checkout that traces once and reports its peak RSS
(``ru_maxrss``), next to a process that runs the bare model once. The checkouts alternate
round by round, so the noise of a shared machine hits them alike.

Run: python tests/perf/bench_checkouts.py BEFORE/backend AFTER/backend [--models chain60,encoder2]
     [--rounds 3] [--repeats 5] [--rss-model chain60:256]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CHILD = r"""
import json, resource, sys, time
import torch
torch.set_num_threads(1)
sys.path.insert(0, {here!r})
from bench_models import MODELS, loss_of
import gradtrace

key, mode, repeats, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
bench = MODELS[key]

def build():
    model, x = bench.build()
    if batch:
        x = torch.randn(batch, *x.shape[1:], requires_grad=x.requires_grad)
    return model, x

def bare():
    model, x = build()
    t0 = time.perf_counter()
    loss_of(model(x)).backward()
    return time.perf_counter() - t0

def traced():
    model, x = build()
    t0 = time.perf_counter()
    trace = gradtrace.trace(model, x, loss_of)
    trace.to_json()
    return time.perf_counter() - t0

if mode == "time":
    bare(); traced()  # (warm)
    b, g = [], []
    for _ in range(repeats):
        b.append(bare()); g.append(traced())
    print(json.dumps({{"bare": b, "traced": g}}))
else:
    (bare if mode == "rss-bare" else traced)()
    print(json.dumps({{"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def child(backend: str, key: str, mode: str, repeats: int, batch: int) -> dict:
    env = dict(os.environ, PYTHONPATH=f"{backend}{os.pathsep}{HERE}")
    out = subprocess.run(
        [sys.executable, "-c", _CHILD.format(here=str(HERE)), key, mode, str(repeats), str(batch)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--models", default="chain60,encoder2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rss-model", default="chain60:256", help="model:batch for the peak RSS rows")
    args = parser.parse_args()
    checkouts = {"before": args.before, "after": args.after}
    ratios: dict[tuple[str, str], list[float]] = {}
    traced: dict[tuple[str, str], list[float]] = {}
    rss: dict[str, list[float]] = {"bare": [], "before": [], "after": []}
    rss_key, rss_batch = args.rss_model.split(":")
    for r in range(args.rounds):
        order = list(checkouts.items()) if r % 2 == 0 else list(reversed(checkouts.items()))
        for key in args.models.split(","):
            for name, backend in order:
                got = child(backend, key, "time", args.repeats, 0)
                bare, trace = statistics.median(got["bare"]), statistics.median(got["traced"])
                ratios.setdefault((key, name), []).append(trace / bare)
                traced.setdefault((key, name), []).append(trace)
        rss["bare"].append(child(args.before, rss_key, "rss-bare", 1, int(rss_batch))["rss_mb"])
        for name, backend in order:
            rss[name].append(child(backend, rss_key, "rss-traced", 1, int(rss_batch))["rss_mb"])
        print(f"round {r + 1} done", file=sys.stderr)
    print("| model | checkout | capture+to_json | ÷ bare (median of rounds) |")
    print("|---|---|---|---|")
    for (key, name), values in ratios.items():
        ms = statistics.median(traced[(key, name)]) * 1e3
        print(f"| {key} | {name} | {ms:,.1f} ms | {statistics.median(values):.2f}× |")
    print()
    print(f"| peak RSS, {rss_key} batch {rss_batch} | MB (median of rounds) |")
    print("|---|---|")
    for name, values in rss.items():
        print(f"| {name} | {statistics.median(values):,.0f} |")


if __name__ == "__main__":
    main()
