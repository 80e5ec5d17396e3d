"""Big models, measured: peak memory of a trace against a bare run (issue 21 item 8).

Not a test: a script, run by hand (and by bench.py as its own section). Each measurement runs
in a fresh Python process, so its peak RSS (the kernel's high-water mark, VmHWM) is that one
job's: (a) a bare forward+backward, (b) ``gradtrace.trace`` (capture only), (c) the same and
``to_json_bytes()``, (d) the same forward and backward inside ``gradtrace.record()`` and its
trace's ``to_json_bytes()`` (issue 32: the same bound). Reported: wall time, peak RSS, the JSON's length, the bytes the trace keeps
(its base64 blocks decoded plus the rest of the JSON) and the bound of item 8, ``peak <= 1.2 ×
(bare peak + trace bytes)``, pass or fail.

GPT-2 small is built from ``transformers.GPT2Config()`` defaults (124 M parameters, random
weights: nothing is downloaded), 1 × 32 tokens, loss ``logits.sum()``; the 60-layer chain and
the 2-layer encoder of bench_models.py for comparison. One torch thread everywhere.

Run: PYTHONPATH=backend .venv/bin/python tests/perf/bench_big_model.py [--models gpt2,chain60]
     [--phases] (RSS at each phase boundary of (c), printed after the table)
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

MB = 1 << 20
MODES = ("bare", "capture", "json", "record_json")
SLACK = 1.2  # item 8: bare peak + the bytes the trace keeps + 20%


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def rss() -> int:
    return _status_kb("VmRSS")


def peak_rss() -> int:
    return _status_kb("VmHWM")


# ---- the models (built in the child) ------------------------------------------------------
def gpt2_small() -> tuple[Any, Any, Callable[[Any], Any]]:
    """GPT-2 small from ``GPT2Config()`` (random weights, nothing downloaded), 1 × 32 tokens, loss
    ``logits.sum()`` (bench_floor.py measures the same)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config())  # random weights from the config: no download
    ids = torch.randint(0, model.config.vocab_size, (1, 32))
    return model, ids, lambda out: out.logits.sum()


def _bench_model(key: str) -> Callable[[], tuple[Any, Any, Callable[[Any], Any]]]:
    def build() -> tuple[Any, Any, Callable[[Any], Any]]:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_models import MODELS, loss_of

        model, x = MODELS[key].build()
        return model, x, loss_of

    return build


BUILDERS: dict[str, Callable[[], tuple[Any, Any, Callable[[Any], Any]]]] = {
    "gpt2": gpt2_small,
    "chain60": _bench_model("chain60"),
    "encoder2": _bench_model("encoder2"),
}
DESCRIPTIONS = {
    "gpt2": "GPT-2 small (GPT2Config(), 124 M parameters), 1 × 32 tokens",
    "chain60": "60 × (Linear(32) + LayerNorm + GELU), batch 16",
    "encoder2": "2-layer TransformerEncoder d64, 8 × 16 tokens",
}


# ---- one measurement, in this (fresh) process ---------------------------------------------
def kept_bytes(trace: Any) -> tuple[int, int]:
    """(the bytes the trace keeps: its blocks decoded plus the JSON without them, the blocks'
    base64 length). Read after the peak was taken: this reads the document."""
    blocks = trace.doc.tensor_data
    decoded = sum(len(base64.b64decode(b)) for b in blocks)
    rest = len(trace.to_json_bytes(numbers=False))
    return decoded + rest, sum(len(b) for b in blocks)


def child(mode: str, key: str, phases: bool) -> dict[str, Any]:
    import torch

    import gradtrace
    import gradtrace.engine  # noqa: F401  (imported in every mode: the code's pages are no trace's cost)

    torch.set_num_threads(1)
    model, x, loss_fn = BUILDERS[key]()
    out: dict[str, Any] = {"mode": mode, "model": key, "rss_built": rss()}
    marks: list[tuple[str, int, int]] = [("built", rss(), peak_rss())]
    t0 = time.perf_counter()
    if mode == "bare":
        loss_fn(model(x)).backward()
        out["seconds"] = time.perf_counter() - t0
        out["peak"] = peak_rss()
        return out
    if mode == "record_json":  # (issue 32: the same forward and backward as a program)
        with gradtrace.record() as rec:
            loss_fn(model(x)).backward()
        trace = rec.trace
    else:
        trace = gradtrace.trace(model, x, loss_fn)
    t_capture = time.perf_counter() - t0
    marks.append(("traced", rss(), peak_rss()))
    text_len = None
    if mode in ("json", "record_json"):
        text = trace.to_json_bytes()
        text_len = len(text)
        marks.append(("to_json_bytes", rss(), peak_rss()))
        del text
        marks.append(("json freed", rss(), peak_rss()))
    out["seconds"] = time.perf_counter() - t0
    out["capture_seconds"] = t_capture
    out["peak"] = peak_rss()
    out["kept"], out["block_chars"] = kept_bytes(trace)
    out["json_len"] = text_len if text_len is not None else len(trace.to_json_bytes())
    out["blocks"] = len(trace.doc.tensor_data)
    if phases:
        out["marks"] = marks
    return out


def measure(mode: str, key: str, phases: bool) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", mode, "--models", key] + (["--phases"] if phases else [])
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{key} {mode} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ---- report -------------------------------------------------------------------------------
def mb(n: float) -> str:
    return f"{n / MB:,.0f} MB"


def report(keys: list[str], phases: bool) -> list[str]:
    lines = [
        "| model | bare | capture | capture + to_json_bytes | JSON | trace keeps | bound 1.2 × (bare + kept) "
        "| capture peak | + to_json peak | `record()` + to_json peak |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for key in keys:
        r = {mode: measure(mode, key, phases) for mode in MODES}
        bare, cap, js, recorded = r["bare"], r["capture"], r["json"], r["record_json"]
        bound = SLACK * (bare["peak"] + cap["kept"])

        def verdict(peak: int, bound: float = bound) -> str:
            return f"{mb(peak)} {'pass' if peak <= bound else 'FAIL'} ({peak / bound:.2f} of the bound)"

        lines.append(
            f"| {DESCRIPTIONS[key]} | {bare['seconds']:.2f} s, {mb(bare['peak'])} "
            f"| {cap['seconds']:.2f} s | {js['seconds']:.2f} s | {mb(js['json_len'])} ({js['blocks']} blocks, "
            f"{mb(js['block_chars'])} base64) | {mb(cap['kept'])} | {mb(bound)} | {verdict(cap['peak'])} "
            f"| {verdict(js['peak'])} | {verdict(recorded['peak'])} |"
        )
        extra = js["peak"] - cap["peak"]
        notes.append(
            f"{key}: to_json_bytes raised the peak by {mb(extra)}, "
            f"{extra / max(js['block_chars'], 1):.2f}× the base64 blocks (the output itself is 1×)"
        )
        if phases:
            for mode in ("capture", "json"):
                marks = ", ".join(
                    f"{name} rss {mb(now)} / peak {mb(hwm)}" for name, now, hwm in r[mode]["marks"]
                )
                notes.append(f"{key} {mode}: {marks}")
    return lines + [""] + [f"- {n}" for n in notes]


def section(keys: list[str] | None = None) -> list[str]:
    """BENCHMARKS.md's section (bench.py): the table and its notes, or why it is missing."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return ["## Big models: peak memory", "", "n/a: `transformers` is not installed (GPT-2 small).", ""]
    return [
        "## Big models: peak memory",
        "",
        "Each figure from a fresh process (peak RSS: the kernel's high-water mark, VmHWM); the bound of "
        "issue 21 item 8 is 1.2 × (bare peak + the bytes the trace keeps: its blocks decoded and the rest "
        "of its JSON). Times are one run each, not medians (tests/perf/bench_big_model.py). The last "
        "column is the same forward and backward inside `gradtrace.record()`, with its `to_json_bytes()` "
        "(issue 32), against the same bound.",
        "",
        *report(keys or list(BUILDERS), phases=False),
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(BUILDERS), help=f"among {', '.join(BUILDERS)}")
    parser.add_argument("--phases", action="store_true", help="RSS at each phase boundary")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    keys = args.models.split(",")
    if args.child:
        print(json.dumps(child(args.child, keys[0], args.phases)))
        return
    print("\n".join(report(keys, args.phases)))


if __name__ == "__main__":
    main()
