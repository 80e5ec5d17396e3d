"""`make bench`'s "first SVG" rows: a trace in hand to an SVG on disk, in a new process.

Each figure times only the drawing (the child imports torch and its tool, builds the model and
captures first, untimed), next to a bare ``node -e 0`` in the same rounds (the floor of any
drawing that starts Node), torchviz (``make_dot`` + Graphviz ``dot``) and torchview
(``draw_graph`` + ``dot``; it runs the forward itself). gradtrace is timed three ways: with its
startup snapshot built and no layout on disk (a model drawn for the first time), with the layout
on disk too (a model drawn before), and with ``GRADTRACE_SNAPSHOT=off``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from torch import nn

from gradtrace.render import node_tool, snapshot

HERE = Path(__file__).resolve().parent


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def _cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 10),
    )


def _encoder2() -> nn.Module:
    from bench_models import _encoder

    return _encoder(2)


# key -> (description, model builder, input shape); the encoder is bench_models' encoder2
FIRST_SVG_MODELS = {
    "mlp": ("MLP 32-64-64-10, batch 8", "bench_first_svg:_mlp", (8, 32)),
    "cnn": ("small CNN (2 convs, pool, linear), 2 x 3 x 16 x 16", "bench_first_svg:_cnn", (2, 3, 16, 16)),
    "encoder2": ("2-layer TransformerEncoder d64, 8 x 16 tokens", "bench_first_svg:_encoder2", (8, 16, 64)),
}

_CHILD = """
import importlib, sys, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, sys.argv[1])
tool, where, shape, out = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
import torch
torch.manual_seed(0)
module, name = where.split(":")
model = getattr(importlib.import_module(module), name)()
x = torch.randn(*map(int, shape.split(",")))
if tool == "gradtrace":
    import gradtrace
    trace = gradtrace.trace(model, x, loss_fn=lambda y: y.float().pow(2).mean())
    t0 = time.perf_counter()
    trace.save(out)
elif tool == "torchviz":
    import torchviz
    loss = model(x).float().pow(2).mean()
    t0 = time.perf_counter()
    torchviz.make_dot(loss, params=dict(model.named_parameters())).render(out[:-4], format="svg", cleanup=True)
else:
    import torchview
    t0 = time.perf_counter()
    torchview.draw_graph(model, input_data=x).visual_graph.render(out[:-4], format="svg", cleanup=True)
print(time.perf_counter() - t0)
"""


def _child(tool: str, key: str, out: Path, env: dict[str, str]) -> float | None:
    _desc, where, shape = FIRST_SVG_MODELS[key]
    args = [sys.executable, "-c", _CHILD, str(HERE), tool, where, ",".join(map(str, shape)), str(out)]
    done = subprocess.run(args, capture_output=True, text=True, check=False, env=env, timeout=300)
    return float(done.stdout.split()[-1]) if done.returncode == 0 and done.stdout.split() else None


def _node_start(node: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([node, "-e", "0"], check=True)
    return time.perf_counter() - t0


def available(tool: str) -> str | None:
    try:
        __import__(tool)
    except ImportError:
        return f"{tool} is not installed"
    return None if shutil.which("dot") else "Graphviz `dot` is not on PATH"


def bench_first_svg(keys: list[str], repeats: int, workdir: Path) -> dict[str, dict[str, list[float]]]:
    """{model: {column: [seconds per round]}}; rounds interleave every column."""
    node = node_tool.node_binary()
    shared = Path(tempfile.mkdtemp(prefix="bench-snapshot-", dir=workdir))
    blob = snapshot.blob_path(node, node_tool.frontend_dir(), shared)
    snapshot.build(node, node_tool.frontend_dir(), blob, wait=True)

    def cache(with_snapshot: bool) -> Path:  # no layouts; the snapshot built above, or none
        folder = Path(tempfile.mkdtemp(prefix="bench-layouts-", dir=workdir))
        if with_snapshot:
            (folder / "snapshots").symlink_to(shared / "snapshots", target_is_directory=True)
        return folder

    results: dict[str, dict[str, list[float]]] = {key: {} for key in keys}
    others = [tool for tool in ("torchviz", "torchview") if available(tool) is None]
    for _ in range(repeats):
        for key in keys:
            row = results[key]
            row.setdefault("node", []).append(_node_start(node))
            fast = {**os.environ, "GRADTRACE_CACHE_DIR": str(cache(True))}
            for column, env in (
                ("snapshot", fast),
                ("stored", fast),  # the same folder again: the layout is on disk now
                (
                    "plain",
                    {**os.environ, "GRADTRACE_CACHE_DIR": str(cache(False)), "GRADTRACE_SNAPSHOT": "off"},
                ),
            ):
                took = _child("gradtrace", key, workdir / f"{key}-{column}.svg", env)
                if took is not None:
                    row.setdefault(column, []).append(took)
            for tool in others:
                took = _child(tool, key, workdir / f"{key}-{tool}.svg", dict(os.environ))
                if took is not None:
                    row.setdefault(tool, []).append(took)
    return results
