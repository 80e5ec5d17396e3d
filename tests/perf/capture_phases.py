"""Where ``gradtrace.trace(...).to_json_bytes()`` spends its time, phase by phase, beside the
log floor's forward and backward (issue 32, item 4: the measured reason for a model that misses
the 1.5× target).

Not a test: a tool. In one process per model, round after round: a bare forward + backward,
the log floor (bench_floor.log_run) and a traced run whose phases are timed by wrapping the
engine's entry points (a handful of calls per trace: no per-op overhead): the session's setup
(hooks installed, model scanned), the recorded forward (from the setup's end to the backward's
start: ``trace()`` runs its forward as a program does, found as it runs), the recorded backward,
the assembly (of which ``Summarizer.finalize``, every number read to the host, and the analyses),
the final gradients' copies and the trace object, then ``to_json_bytes``. Beside them, the part of
the forward and backward spent reading large tensors already in host memory where they are seen
(``Summarizer._finish_large`` before the assembly: their float64 stats and base64; a hundred or
two calls per trace). Last, the same capture with no value work (every summary one constant
record: no keys, copies, stats nor blocks; its trace not a real one, its JSON not written): what
the events and records cost alone, and so the values' share of the capture (median of the
rounds' shares). Medians of the rounds; one torch thread.

Run: PYTHONPATH=backend .venv/bin/python tests/perf/capture_phases.py [--models chain60,llama] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PHASES = ("setup", "forward", "backward", "assemble", "finalize", "analyses", "after", "json", "read_in_pass")


def _timing(store: dict[str, float], name: str, fn: Callable) -> Callable:
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            store[name] += time.perf_counter() - t0

    return timed


def child(key: str, rounds: int) -> dict[str, Any]:
    import torch

    import gradtrace
    from gradtrace.engine import analysis, assemble, capture, session, summarize
    from gradtrace.trace_schema import TensorStats, TensorValue

    sys.path.insert(0, str(HERE))
    from bench_floor import MODELS, log_run

    torch.set_num_threads(1)
    model, x, loss_fn = MODELS[key][1]()
    now: dict[str, float] = defaultdict(float)
    init_timed = _timing(now, "setup", session.TraceSession.__init__)
    backward_pass = _timing(now, "backward", session.TraceSession.backward_pass)
    marks: dict[str, float] = {}  # (the forward: from the setup's end to the first backward's start)

    def setup_ended(*args: Any, **kwargs: Any) -> None:
        init_timed(*args, **kwargs)
        marks["setup_end"] = time.perf_counter()

    def backward_started(*args: Any, **kwargs: Any) -> Any:
        marks.setdefault("backward_start", time.perf_counter())
        return backward_pass(*args, **kwargs)

    session.TraceSession.__init__ = setup_ended  # type: ignore[method-assign]
    session.TraceSession.backward_pass = backward_started  # type: ignore[method-assign]
    assembling = _timing(now, "assemble", assemble.assemble_trace)

    def assemble_marked(*args: Any, **kwargs: Any) -> Any:
        marks["assemble_start"] = time.perf_counter()
        return assembling(*args, **kwargs)

    capture.assemble_trace = assemble_marked
    finish_large = summarize.Summarizer._finish_large

    def large_read(self: Any, *args: Any) -> None:  # (read in the pass: before the assembly)
        t0 = time.perf_counter()
        try:
            finish_large(self, *args)
        finally:
            if "assemble_start" not in marks:
                now["read_in_pass"] += time.perf_counter() - t0

    summarize.Summarizer._finish_large = large_read  # type: ignore[method-assign]
    summarize.Summarizer.finalize = _timing(now, "finalize", summarize.Summarizer.finalize)  # type: ignore[method-assign]
    analysis.Analysis.add = _timing(now, "analyses", analysis.Analysis.add)  # type: ignore[method-assign]
    for cls in analysis.Analysis.__subclasses__():
        for name in ("add", "add_after_values"):
            if name in vars(cls):
                setattr(cls, name, _timing(now, "analyses", vars(cls)[name]))

    def bare() -> None:
        loss_fn(model(x)).backward()

    def logged() -> None:
        log_run(model, x, loss_fn)

    def traced() -> dict[str, float]:
        now.clear()
        marks.clear()
        t0 = time.perf_counter()
        trace = gradtrace.trace(model, x, loss_fn)
        total = time.perf_counter() - t0
        now["forward"] = marks["backward_start"] - marks["setup_end"]
        t1 = time.perf_counter()
        trace.to_json_bytes()
        now["json"] = time.perf_counter() - t1
        # (what follows the assembly in trace(): the final gradients' copies, the Trace, teardown)
        now["after"] = total - now["setup"] - now["forward"] - now["backward"] - now["assemble"]
        now["total"] = total + now["json"]
        return dict(now)

    # the same capture with no value work: every summary one constant record (no keys, copies,
    # stats or blocks; not a trace anyone reads, its JSON not written): what the passes' events
    # and records cost alone, and so the values' share of the capture
    summarizer = summarize.Summarizer
    real = summarizer.__call__, summarizer.final
    constant = TensorValue(
        shape=[1],
        dtype="float32",
        stats=TensorStats(numel=1, min=0.0, max=0.0, mean=0.0, std=0.0, norm=0.0),
        truncated=True,
    )

    def no_values(self: Any, t: Any) -> TensorValue | None:
        return constant if isinstance(t, torch.Tensor) else None

    def unvalued() -> None:
        summarizer.__call__, summarizer.final = no_values, no_values  # type: ignore[method-assign, assignment]
        try:
            gradtrace.trace(model, x, loss_fn)
        finally:
            summarizer.__call__, summarizer.final = real  # type: ignore[method-assign]

    def timed(fn: Callable[[], Any]) -> float:
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    timed(bare), timed(logged), timed(unvalued), timed(traced)
    out: dict[str, list[float]] = defaultdict(list)
    for _ in range(rounds):
        out["bare"].append(timed(bare))
        out["log"].append(timed(logged))
        out["unvalued"].append(timed(unvalued))
        model.zero_grad(set_to_none=True)
        for name, seconds in traced().items():
            out[name].append(seconds)
        out["values_share"].append(1 - out["unvalued"][-1] / (out["total"][-1] - out["json"][-1]))
    return {name: statistics.median(values) for name, values in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="chain60,encoder2,resnet,tv_resnet18,tv_resnet18_224,llama,gpt2")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.rounds)))
        return
    print(
        "| model | bare | log floor | trace + JSON | setup | forward | backward | of these two: large host "
        "tensors read | assembly (finalize; analyses) | after | to_json_bytes | capture without value work "
        "(the values' share of the capture) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key in args.models.split(","):
        cmd = [sys.executable, __file__, "--child", key, "--rounds", str(args.rounds)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode:
            print(f"| {key} | {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'failed'} |")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])

        def ms(name: str, r: dict[str, float] = r) -> str:
            return f"{r.get(name, 0.0) * 1000:,.1f}"

        print(
            f"| {key} | {ms('bare')} | {ms('log')} | {ms('total')} | {ms('setup')} | {ms('forward')} "
            f"| {ms('backward')} | {ms('read_in_pass')} | {ms('assemble')} ({ms('finalize')}; {ms('analyses')}) | {ms('after')} "
            f"| {ms('json')} | {ms('unvalued')} ({r['values_share']:.0%}) |",
            flush=True,
        )


if __name__ == "__main__":
    main()
