"""The capture against its floor: issue 21's targets, ≤ 4× bare and ≤ 2× the floor.

Not a test: a script, run by hand and by bench.py as its own section. The floor is what a
hook-based recorder cannot go below: the same model run with every hook gradtrace registers in
place but with empty bodies — the process-wide module forward pre- and post-hooks, a
``TorchFunctionMode`` that lets every torch call through, and a pre- and a post-hook on every
node of the graph (found by one walk from the loss before the backward, and removed after it).
The log floor is what a pass that only logs (issue 21, item 1) costs at least: the same hooks,
each appending a plain tuple, the backward's keeping a clone of each gradient; and beside it
``to_json_bytes`` of a finished trace, which any design pays.
Each model runs in a process of its own; in every round that process times a bare forward +
backward, the floor, the log floor, the serialisation, ``gradtrace.trace(...).to_json_bytes()`` and
the same forward and backward inside ``gradtrace.record()`` with its ``to_json_bytes()`` in turn, so the noise of a shared machine hits them alike. Figures are medians of the rounds; ratios are medians of the
per-round ratios. One torch thread.

Models: the bench chain, encoder and resnet-style convs (bench_models.py); torchvision's
resnet18 (its Python code only, as the engine's third-party tests load it, from
``var/bench-torchvision``) at 1 × 3 × 32 × 32 (eval mode: one sample) and 8 × 3 × 224 × 224; a Llama-style decoder and GPT-2 small built by transformers from configs
(random weights, nothing downloaded). A model whose package is missing is reported n/a.

Every run is timed by both clocks at once: the wall clock and the process's CPU time
(``time.process_time``). On a machine shared with other jobs, waiting for a core counts in no CPU
column (those figures are the work each run does, not how long it took there). The script prints
the wall clock's table, or with ``--cpu-time`` the CPU time's; bench.py's section prints both,
from the same runs.

Run: PYTHONPATH=backend .venv/bin/python tests/perf/bench_floor.py [--models chain60,gpt2] [--rounds 5]
     [--log-without-clones] [--cpu-time]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# torchvision's wheel, installed apart from the venv by `make bench` (pip's --target): installed
# beside this torch, transformers would find it and fail importing its C++ operators
TORCHVISION_DIR = HERE.parents[1] / "var" / "bench-torchvision"
BARE_LIMIT, FLOOR_LIMIT = 4.0, 2.0  # the targets: × bare, × the floor
LOG_LIMIT = 1.5  # issue 32's: capture + to_json_bytes ÷ (the log floor + the trace's JSON)


# ---- the models (built in the child) --------------------------------------------------------
def _bench(key: str) -> Callable[[], tuple[Any, Any, Callable[[Any], Any]]]:
    def build() -> tuple[Any, Any, Callable[[Any], Any]]:
        sys.path.insert(0, str(HERE))
        from bench_models import MODELS, loss_of

        model, x = MODELS[key].build()
        return model, x, loss_of

    return build


def _torchvision_resnet18(shape: tuple[int, ...]) -> Callable[[], tuple[Any, Any, Callable[[Any], Any]]]:
    def build() -> tuple[Any, Any, Callable[[Any], Any]]:
        import torch

        sys.path.insert(0, str(HERE.parent))
        from third_party import torchvision_python_only

        if torchvision_python_only(also_in=TORCHVISION_DIR) is None:
            raise ModuleNotFoundError("torchvision is not installed")
        from torchvision.models.resnet import resnet18

        torch.manual_seed(0)
        model = resnet18(num_classes=10)
        if shape[0] == 1:  # (BatchNorm in training refuses one value per channel: 1 × 1 at the end)
            model.eval()
        return model, torch.randn(*shape), lambda out: out.sum()

    return build


def _llama() -> tuple[Any, Any, Callable[[Any], Any]]:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=1000,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    model = LlamaForCausalLM(config)
    return model, torch.randint(0, 1000, (2, 16)), lambda out: out.logits.sum()


def _gpt2() -> tuple[Any, Any, Callable[[Any], Any]]:
    sys.path.insert(0, str(HERE))
    from bench_big_model import gpt2_small

    return gpt2_small()


MODELS: dict[str, tuple[str, Callable[[], tuple[Any, Any, Callable[[Any], Any]]]]] = {
    "chain60": ("60 × (Linear(32) + LayerNorm + GELU), batch 16", _bench("chain60")),
    "encoder2": ("2-layer TransformerEncoder d64, 8 × 16 tokens", _bench("encoder2")),
    "resnet": ("resnet18-style convs (8 BasicBlocks), 2 × 3 × 32 × 32", _bench("resnet")),
    "tv_resnet18": (
        "torchvision resnet18 (eval mode), 1 × 3 × 32 × 32",
        _torchvision_resnet18((1, 3, 32, 32)),
    ),
    "tv_resnet18_224": ("torchvision resnet18, 8 × 3 × 224 × 224", _torchvision_resnet18((8, 3, 224, 224))),
    "llama": ("Llama-style decoder from LlamaConfig (2 layers, d64), 2 × 16 tokens", _llama),
    "gpt2": ("GPT-2 small from GPT2Config() (124 M parameters), 1 × 32 tokens", _gpt2),
}


# ---- the floor: gradtrace's hooks, empty ----------------------------------------------------
def _nodes(root: Any) -> Iterator[Any]:
    """Every node of the graph behind ``root`` (a grad_fn), once."""
    seen = {root}
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        for source, _nr in node.next_functions:
            if source is not None and source not in seen:
                seen.add(source)
                stack.append(source)


@contextmanager
def forward_hooks(pre: Callable, post: Callable, mode: Any) -> Iterator[None]:
    """The forward's hooks as gradtrace registers them: the process-wide module pre and post
    hooks (``pre``, ``post``) and a TorchFunctionMode (``mode``), removed on exit."""
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    handles = [register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True)]
    try:
        with mode:
            yield
    finally:
        for handle in handles:
            handle.remove()


def hooked_run(
    model: Any,
    x: Any,
    loss_fn: Callable[[Any], Any],
    forward: Any,
    node_pre: Callable[[Any], Callable],
    node_post: Callable[[Any], Callable],
) -> None:
    """A forward inside ``forward`` (see forward_hooks), then a backward with a pre and a post
    hook on every node of the graph (``node_pre(node)``, ``node_post(node)``: the hooks of
    ``node``), found by one walk from the loss and removed after it."""
    with forward:
        loss = loss_fn(model(x))
    handles = []
    for node in _nodes(loss.grad_fn):
        handles.append(node.register_prehook(node_pre(node)))
        handles.append(node.register_hook(node_post(node)))
    try:
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()


def floor_run(model: Any, x: Any, loss_fn: Callable[[Any], Any]) -> None:
    """A forward and backward with the hooks gradtrace registers, every body empty."""
    from torch.overrides import TorchFunctionMode

    class PassThrough(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            return func(*args, **(kwargs or {}))

    def module_pre(module: Any, args: Any) -> None:
        return None

    def module_post(module: Any, args: Any, output: Any) -> None:
        return None

    def pre(grad_outputs: Any) -> None:
        return None

    def post(grad_inputs: Any, grad_outputs: Any) -> None:
        return None

    forward = forward_hooks(module_pre, module_post, PassThrough())
    hooked_run(model, x, loss_fn, forward, lambda _node: pre, lambda _node: post)


# ---- the log floor: the same hooks, logging plain tuples --------------------------------
def log_run(model: Any, x: Any, loss_fn: Callable[[Any], Any], clones: bool = True) -> list[tuple]:
    """A forward and backward whose hooks only log: what issue 21's item 1 allows the pass to
    do. Each hook appends a plain tuple: the module and its inputs or output, each torch call
    and its result, each node and a clone of each gradient it receives or sends (the engine
    frees or overwrites them). No record, no summary, no graph walk beyond the one that hooks
    the nodes. Its log, returned. ``clones=False`` logs the gradients themselves: a bound no
    real capture reaches (it loses a gradient the engine overwrites), the most favourable."""
    import torch
    from torch.overrides import TorchFunctionMode

    log: list[tuple] = []
    append = log.append

    class Logging(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            result = func(*args, **(kwargs or {}))
            append(("call", func, args, result))
            return result

    def module_pre(module: Any, args: Any) -> None:
        append(("module_pre", module, args))

    def module_post(module: Any, args: Any, output: Any) -> None:
        append(("module_post", module, output))

    def kept(grads: tuple) -> list[Any]:
        if not clones:
            return list(grads)
        return [None if g is None else g.detach().clone() for g in grads]

    def pre(node: Any) -> Callable[[tuple], None]:
        return lambda grad_outputs: append(("node_pre", node, kept(grad_outputs)))

    def post(node: Any) -> Callable[[tuple, tuple], None]:
        return lambda grad_inputs, grad_outputs: append(("node_post", node, kept(grad_inputs)))

    with torch.enable_grad():
        hooked_run(model, x, loss_fn, forward_hooks(module_pre, module_post, Logging()), pre, post)
    return log


# ---- one model, in this (fresh) process -----------------------------------------------------
def child(key: str, rounds: int, clones: bool = True) -> dict[str, Any]:
    """``rounds`` rounds of every run on ``key``: the graph's size and each run's times, by the
    wall clock ("wall") and by the process's CPU time ("cpu"), measured around the same calls."""
    import torch

    import gradtrace

    torch.set_num_threads(1)
    model, x, loss_fn = MODELS[key][1]()

    def bare() -> None:
        loss_fn(model(x)).backward()

    def floor() -> None:
        floor_run(model, x, loss_fn)

    def logged() -> None:
        log_run(model, x, loss_fn, clones)

    def traced() -> None:
        gradtrace.trace(model, x, loss_fn).to_json_bytes()

    def recorded() -> None:  # (the same forward and backward, as a program: issue 32)
        with gradtrace.record() as rec:
            loss_fn(model(x)).backward()
        rec.trace.to_json_bytes()

    def timed(fn: Callable[[], None]) -> tuple[float, float]:
        model.zero_grad(set_to_none=True)
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - t0, time.process_time() - c0

    for fn in (bare, floor, logged, traced, recorded):  # (warm: first calls load code and caches)
        timed(fn)
    model.zero_grad(set_to_none=True)
    trace = gradtrace.trace(model, x, loss_fn)
    nodes, json_bytes = len(trace.doc.graph.nodes), len(trace.to_json_bytes())
    serialised = trace.to_json_bytes  # (the finished trace's bytes alone: what any design writes)

    names = ("bare", "floor", "log", "json", "traced", "recorded")
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        for name, fn in (
            ("bare", bare),
            ("floor", floor),
            ("log", logged),
            ("json", serialised),
            ("traced", traced),
            ("recorded", recorded),
        ):
            w, c = timed(fn)
            wall[name].append(w)
            cpu[name].append(c)
    del trace, serialised
    return {"nodes": nodes, "json_bytes": json_bytes, "wall": wall, "cpu": cpu}


def measure(key: str, rounds: int, clones: bool = True) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", key, "--rounds", str(rounds)]
    if not clones:
        cmd.append("--log-without-clones")
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        missing = "ModuleNotFoundError" in done.stderr
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        if missing:
            return {"missing": reason}
        raise RuntimeError(f"{key} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ---- report ---------------------------------------------------------------------------------
def _ms(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.1f} ms"


def _ratio(num: list[float], den: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(num, den, strict=True))


def _to_log(times: list[float], logged: list[float]) -> str:
    """A capture's time over the log floor plus its JSON (issue 32's target), marked."""
    ratio = _ratio(times, logged)
    return f"**{ratio:.1f}×** {'pass' if ratio <= LOG_LIMIT else 'miss'}"


CLOCKS = {"wall": "wall clock", "cpu": "CPU time of the process"}


def measure_all(keys: list[str], rounds: int, clones: bool = True) -> dict[str, dict[str, Any]]:
    """Every model of ``keys`` measured, each in a process of its own."""
    results = {}
    for key in keys:
        print(f"floor: {key} …", file=sys.stderr, flush=True)
        results[key] = measure(key, rounds, clones)
    return results


def report(results: dict[str, dict[str, Any]], clock: str = "wall") -> list[str]:
    """The table of ``results`` (measure_all) by one clock: "wall" or "cpu"."""
    lines = [
        "| model | nodes | JSON | bare f+b | floor (empty hooks) | log floor (+ its JSON) "
        "| gradtrace + `to_json_bytes` "
        f"| gradtrace ÷ bare (≤ {BARE_LIMIT:g}×) | gradtrace ÷ floor (≤ {FLOOR_LIMIT:g}×) "
        f"| `record()` + `to_json_bytes` | trace, record ÷ (log floor + its JSON) (≤ {LOG_LIMIT:g}×) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    missing = []
    for key, measured in results.items():
        description = MODELS[key][0]
        if "missing" in measured:
            lines.append(f"| {description} |{' n/a |' * 10}")
            missing.append(f"{key}: {measured['missing']}")
            continue
        r = {"nodes": measured["nodes"], "json_bytes": measured["json_bytes"], **measured[clock]}
        to_bare, to_floor = _ratio(r["traced"], r["bare"]), _ratio(r["traced"], r["floor"])
        floor_to_bare = _ratio(r["floor"], r["bare"])
        logged = [log + json_ for log, json_ in zip(r["log"], r["json"], strict=True)]
        lines.append(
            f"| {description} | {r['nodes']:,} | {r['json_bytes'] / 1e6:,.1f} MB | {_ms(statistics.median(r['bare']))} "
            f"| {_ms(statistics.median(r['floor']))} ({floor_to_bare:.1f}×) "
            f"| {_ms(statistics.median(r['log']))} ({_ratio(r['log'], r['bare']):.1f}×); "
            f"{_ms(statistics.median(logged))} ({_ratio(logged, r['bare']):.1f}×) "
            f"| {_ms(statistics.median(r['traced']))} "
            f"| **{to_bare:.1f}×** {'pass' if to_bare <= BARE_LIMIT else 'miss'} "
            f"| **{to_floor:.1f}×** {'pass' if to_floor <= FLOOR_LIMIT else 'miss'} "
            f"| {_ms(statistics.median(r['recorded']))} "
            f"| {_to_log(r['traced'], logged)}; {_to_log(r['recorded'], logged)} |"
        )
    return lines + [""] + [f"- n/a: {m}" for m in missing]


def section(keys: list[str] | None = None, rounds: int = 5) -> list[str]:
    """BENCHMARKS.md's section (bench.py): the same runs by the wall clock, then by CPU time."""
    load = os.getloadavg()
    results = measure_all(keys or list(MODELS), rounds)
    load_after = os.getloadavg()
    return [
        "## The capture against its floor (issue 21's targets)",
        "",
        "The floor is the same model with every hook gradtrace registers in place and empty: the "
        "process-wide module forward hooks, a pass-through `TorchFunctionMode`, a pre- and a post-hook "
        "on every autograd node. Bare, floor and gradtrace (capture + `to_json_bytes`) alternate in each "
        f"round, in one process per model ({rounds} rounds, medians; ratios are medians of the "
        "per-round ratios; tests/perf/bench_floor.py).",
        "",
        "The log floor is the most a pass that only logs could be, the records and their numbers "
        "aside: the same hooks, each appending a plain tuple (the module, the torch call and its "
        "result, the node and a clone of each gradient it receives or sends: the engine frees or "
        'overwrites them). "+ its JSON" adds, in the same round, `to_json_bytes` of the finished '
        "trace alone: what any design writes. Both ratios are to bare. The last two columns are "
        "issue 32's: `with gradtrace.record(): loss_fn(model(x)).backward()` and its `to_json_bytes`, "
        "in the same rounds, and both captures over the log floor plus its JSON (target ≤ 1.5×).",
        "",
        "Each run is timed by the wall clock and by the process's CPU time at once: the first table "
        "is the wall clock's, the second the CPU time's, of the same runs. On a shared machine a run "
        "that waits for a core is longer by the wall clock only; the CPU time is the work each run "
        f"does. Machine load (1-min average, {os.cpu_count()} CPUs): {load[0]:.1f} before, "
        f"{load_after[0]:.1f} after.",
        "",
        "By the wall clock:",
        "",
        *report(results, "wall"),
        "",
        "By CPU time (the same runs):",
        "",
        *report(results, "cpu"),
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"among {', '.join(MODELS)}")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--log-without-clones",
        action="store_true",
        help="the log floor keeps the gradients themselves, not clones (the most favourable bound)",
    )
    parser.add_argument(
        "--cpu-time", action="store_true", help="time by the process's CPU time, not the wall clock"
    )
    parser.add_argument("--child", choices=list(MODELS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    clones = not args.log_without_clones
    if args.child:
        print(json.dumps(child(args.child, args.rounds, clones)))
        return
    clock = "cpu" if args.cpu_time else "wall"
    results = measure_all(args.models.split(","), args.rounds, clones)
    print(f"({CLOCKS[clock]})\n")
    print("\n".join(report(results, clock)))


if __name__ == "__main__":
    main()
