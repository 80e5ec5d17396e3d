"""`make bench`: what gradtrace costs, next to the tools people use, in one interleaved run.

Not a test: it measures, prints one Markdown table per section, and with ``--write FILE``
writes them into BENCHMARKS.md. Every figure is a median of rounds that interleave the
competitors (round r runs bare, gradtrace, torchviz, TorchLens on the same model in turn), so
the noise of this shared machine hits them alike; ratios are to the bare forward+backward of
the same round set.

- capture: bare forward+backward; ``gradtrace.trace``; its ``to_json``; both; torchviz
  ``make_dot`` after a forward, and with its SVG through Graphviz ``dot``; TorchLens capturing
  activations and gradients (``CaptureOptions(save_grads=True)`` + ``Trace.backward``), run in
  its own Python process (bench_torchlens.py: TorchLens refuses multiprocessing children, and
  keeps torch's functions wrapped once it has run), interleaved round by round with this one.
- drawing: ``trace.save("x.svg")`` warm (in-process, after a first), cold (the first in a new
  process, import excluded), and the CLI ``gradtrace render trace.json -o x.svg`` (wall clock).
- the floor: bare, the same run with gradtrace's hooks registered and empty, and gradtrace, on
  the chain, the encoder, resnet-style convs, torchvision resnet18 and config-built Llama-style
  and GPT-2 small models: issue 21's ≤ 4× bare and ≤ 2× the floor (bench_floor.py).
- big models: peak memory of GPT-2 small (config-built), the chain and the encoder, bare and
  traced, each in a fresh process, against bare peak + trace bytes + 20% (bench_big_model.py).
- watch: a training step bare and under ``gradtrace.watch`` at every=1 and every=10, on chain60,
  encoder2 and GPT-2 small (bench_watch.py).
- gallery: every example spec through ``gradtrace.trace_spec``.
- service: a real ``gradtrace serve`` on loopback, 4 and 32 client threads, cached and uncached.

Run: .venv/bin/python tests/perf/bench.py [--models chain60,encoder2] [--repeats 5] [--quick]
Needs torchviz, torchlens and Graphviz's ``dot`` for their columns (``make bench`` installs
them); a missing anchor shows as "n/a" with the reason below the table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

import gradtrace
from gradtrace.render import diagram

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_first_svg import FIRST_SVG_MODELS, available, bench_first_svg  # noqa: E402
from bench_models import MODELS, BenchModel, loss_of, timed  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


# ---- timing helpers -----------------------------------------------------------------------
def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def fmt_ms(seconds: float) -> str:
    if seconds != seconds:  # NaN: not measured
        return "n/a"
    return f"{seconds * 1e3:,.0f} ms" if seconds >= 0.1 else f"{seconds * 1e3:,.1f} ms"


def fmt_ratio(a: float, b: float) -> str:
    if a != a or b != b or b == 0:
        return "n/a"
    return f"{a / b:,.1f}×"


# ---- TorchLens, in its own process --------------------------------------------------------
class TorchLensRunner:
    """bench_torchlens.py in a Python process of its own, one capture per ``round()``."""

    def __init__(self, key: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("bench_torchlens.py")), key],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        first = self.proc.stdout.readline().strip()
        self.reason = None if first == "ready" else (first.removeprefix("unavailable ") or "no answer")

    def round(self) -> float:
        if self.reason:
            return float("nan")
        self.proc.stdin.write("round\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


# ---- capture -------------------------------------------------------------------------------
def torchviz_available() -> str | None:
    try:
        import torchviz  # noqa: F401
    except ImportError:
        return "torchviz is not installed"
    if shutil.which("dot") is None:
        return "Graphviz `dot` is not on PATH (SVG column)"
    return None


# bare forward+backward, capture and serialise: timed this many times in each round (TorchLens,
# torchviz and the drawings once: they take up to seconds)
CAPTURE_SAMPLES_PER_ROUND = 5


def bench_capture(bm: BenchModel, repeats: int, notes: list[str], workdir: Path) -> dict[str, object]:
    torch.set_num_threads(1)
    model, x = bm.build()

    def fresh() -> None:
        """Every round starts from no gradients, the input's too (chain inputs require grad:
        kept, its .grad would accumulate and each trace after the first record one more
        snapshot, of the .grad before the write)."""
        model.zero_grad(set_to_none=True)
        x.grad = None

    def bare() -> None:
        fresh()
        loss_of(model(x)).backward()

    def capture() -> gradtrace.Trace:
        fresh()
        return gradtrace.trace(model, x, loss_of)

    viz_reason = torchviz_available()
    if viz_reason is None:
        from torchviz import make_dot

        params = dict(model.named_parameters())

        def viz() -> object:
            return make_dot(loss_of(model(x)), params=params)

        def viz_svg() -> None:
            viz().pipe(format="svg")
    else:
        notes.append(f"{bm.key}: torchviz columns n/a — {viz_reason}")

    if viz_reason is None:
        try:
            viz_svg()  # warm-up; torchviz walks the graph recursively
        except RecursionError:
            viz_reason = "torchviz's recursive walk exceeds Python's recursion limit on a graph this deep"
            notes.append(f"{bm.key}: torchviz columns n/a — {viz_reason}")

    trace = capture()  # warm-up, and the graph's size
    doc = trace.to_dict()
    nodes = len(doc["graph"]["nodes"])
    json_bytes = len(trace.to_json())
    notebook_bytes = len(trace._repr_html_().encode())  # the cell a notebook shows for `trace`
    svg_path = workdir / f"{bm.key}.svg"
    svg_reason = None
    try:
        trace.save(svg_path)  # the first drawing of this process: warm-up
    except Exception as exc:  # noqa: BLE001 - a renderer failure is a figure we cannot give
        svg_reason = f"{type(exc).__name__}: {exc}"[:200]
        notes.append(f"{bm.key}: gradtrace SVG n/a — {svg_reason}")
    trace_path = workdir / f"{bm.key}.trace.json"
    trace_path.write_text(trace.to_json(), encoding="utf-8")
    bare()
    lens = TorchLensRunner(bm.key)
    if lens.reason:
        notes.append(f"{bm.key}: TorchLens n/a — {lens.reason}")
    t: dict[str, list[float]] = {
        k: [] for k in ["bare", "capture", "serialise", "viz", "viz_svg", "svg", "lens"]
    }
    try:
        for _ in range(repeats):
            tr = None

            def cap() -> None:
                nonlocal tr
                tr = capture()

            # the cheap figures (milliseconds) several times a round, alternating: their
            # medians then move less with this shared machine than 5 samples did
            for _ in range(CAPTURE_SAMPLES_PER_ROUND):
                t["bare"].append(timed(bare))
                t["capture"].append(timed(cap))
                t["serialise"].append(timed(lambda: tr.to_json()))  # noqa: B023
            if viz_reason is None:
                t["viz"].append(timed(viz))
                t["viz_svg"].append(timed(viz_svg))
            if svg_reason is None:
                # a real drawing, not the in-process SVG cache's answer (an unchanged model's
                # captures are identical round after round); the layout cache stays warm
                diagram._cache.clear()
                t["svg"].append(timed(lambda: tr.save(svg_path)))  # noqa: B023
            t["lens"].append(lens.round())
    finally:
        lens.close()
    m = {k: med(v) for k, v in t.items()}
    cap_ser = [a + b for a, b in zip(t["capture"], t["serialise"], strict=True)]
    m["capture+serialise"] = med(cap_ser)
    return {
        "model": bm,
        "nodes": nodes,
        "json_mb": json_bytes / 1e6,
        "notebook_mb": notebook_bytes / 1e6,
        "m": m,
        "trace_path": trace_path,
    }


def capture_table(rows: list[dict[str, object]]) -> str:
    head = (
        "| model | nodes | bare f+b | gradtrace capture | serialise | capture + serialise | "
        "JSON | notebook cell | torchviz make_dot | torchviz + dot SVG | TorchLens | TorchLens ÷ gradtrace | "
        "gradtrace SVG (warm) | gradtrace SVG ÷ torchviz SVG |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    lines = []
    for r in rows:
        m = r["m"]
        b = m["bare"]
        lines.append(
            f"| {r['model'].description} | {r['nodes']:,} | {fmt_ms(b)} | "
            f"{fmt_ms(m['capture'])} ({fmt_ratio(m['capture'], b)}) | "
            f"{fmt_ms(m['serialise'])} ({fmt_ratio(m['serialise'], b)}) | "
            f"**{fmt_ratio(m['capture+serialise'], b)}** | {r['json_mb']:.2f} MB | {r['notebook_mb']:.2f} MB | "
            f"{fmt_ms(m['viz'])} ({fmt_ratio(m['viz'], b)}) | {fmt_ms(m['viz_svg'])} | "
            f"{fmt_ms(m['lens'])} ({fmt_ratio(m['lens'], b)}) | **{fmt_ratio(m['lens'], m['capture+serialise'])}** | "
            f"{fmt_ms(m['svg'])} | {fmt_ratio(m['svg'], m['viz_svg'])} |"
        )
    return head + "\n".join(lines) + "\n"


# ---- drawing: cold, and the CLI ------------------------------------------------------------
_COLD = """
import sys, time
t0 = time.perf_counter()
import gradtrace
t1 = time.perf_counter()
tr = gradtrace.Trace.load(sys.argv[1])
t2 = time.perf_counter()
tr.save(sys.argv[2])
t3 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2)
"""


def gradtrace_cli() -> list[str]:
    exe = Path(sys.executable).with_name("gradtrace")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "gradtrace"]


def bench_drawing(trace_path: Path, repeats: int, workdir: Path) -> dict[str, float]:
    """First drawings in new processes, each with an empty layout cache (a first time), and
    the CLI again once the first run stored its layout on disk (~/.cache/gradtrace)."""
    out = workdir / "cold.svg"
    cold, imports, cli, cli_stored = [], [], [], []

    def fresh_cache() -> dict[str, str]:
        return {**os.environ, "GRADTRACE_CACHE_DIR": tempfile.mkdtemp(prefix="bench-layouts-", dir=workdir)}

    def cli_run(env: dict[str, str]) -> float | None:
        t0 = time.perf_counter()
        ok = subprocess.run(
            [*gradtrace_cli(), "render", str(trace_path), "-o", str(workdir / "cli.svg")],
            capture_output=True,
            check=False,
            env=env,
        )
        return time.perf_counter() - t0 if ok.returncode == 0 else None

    for _ in range(repeats):
        done = subprocess.run(
            [sys.executable, "-c", _COLD, str(trace_path), str(out)],
            capture_output=True,
            text=True,
            check=False,
            env=fresh_cache(),
        )
        if done.returncode == 0:
            imp, _load, draw = (float(v) for v in done.stdout.split())
            cold.append(draw)
            imports.append(imp)
        env = fresh_cache()
        for series in (cli, cli_stored):  # the first run lays out and stores; the second reads
            took = cli_run(env)
            if took is not None:
                series.append(took)
    return {"cold": med(cold), "import": med(imports), "cli": med(cli), "cli_stored": med(cli_stored)}


def first_svg_section(repeats: int, workdir: Path) -> list[str]:
    """A trace in hand to an SVG on disk, in a new process, beside `node -e 0`, torchviz, torchview."""
    results = bench_first_svg(list(FIRST_SVG_MODELS), repeats, workdir)
    lines = [
        "## The first SVG of a small model in a new process",
        "",
        "From a trace (or a forward) in hand to the SVG on disk; the import of torch and the tool, the model "
        "and the capture are not counted. `node -e 0` is a bare Node start in the same rounds, the floor of "
        "any drawing that starts Node. gradtrace: its startup snapshot built (it is, after the first drawing "
        "on a machine), no layout on disk; the same model again (layout on disk); without the snapshot "
        "(`GRADTRACE_SNAPSHOT=off`, no layout on disk).",
        "",
        "| model | `node -e 0` | gradtrace, snapshot | gradtrace, layout on disk | gradtrace, no snapshot "
        "| torchviz + dot | torchview + dot |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, (description, _where, _shape) in FIRST_SVG_MODELS.items():
        row = {column: med(values) for column, values in results[key].items()}
        cells = [
            row.get(c, float("nan")) for c in ("node", "snapshot", "stored", "plain", "torchviz", "torchview")
        ]
        lines.append(f"| {description} | " + " | ".join(fmt_ms(v) for v in cells) + " |")
    lines.append("")
    for tool in ("torchviz", "torchview"):
        reason = available(tool)
        if reason:
            lines += [f"{tool}: n/a ({reason}).", ""]
    return lines


# ---- the gallery ---------------------------------------------------------------------------
def bench_gallery(repeats: int) -> dict[str, float]:
    from gradtrace.examples import example_ids, get_example

    per: list[float] = []
    for ex_id in example_ids():
        spec = get_example(ex_id)
        per.append(med([timed(lambda s=spec: gradtrace.trace_spec(s)) for _ in range(repeats)]))
    return {"count": len(per), "median": med(per), "max": max(per), "total": sum(per)}


# ---- the service ---------------------------------------------------------------------------
def bench_service(requests: int, quick: bool) -> list[dict[str, object]]:
    import httpx

    sys.path.insert(0, str(REPO / "tests"))
    from server_process import ServerProcess

    spec = json.loads(
        (REPO / "backend" / "gradtrace" / "examples" / "full-backward-hook.json").read_text(encoding="utf-8")
    )
    server = ServerProcess(
        Path(tempfile.mkdtemp(prefix="bench-service-")), env={"GRADTRACE_RATE_PER_MINUTE": "0"}
    )
    rows = []
    try:
        server.wait_ready()
        with httpx.Client(base_url=server.url, timeout=60) as warm:
            warm.post("/api/v1/trace", json=spec)
        serial = 0
        for clients in (4, 32):
            for cached in (True, False):
                n = requests if cached else max(8, requests // 4)
                if quick:
                    n = max(8, n // 4)
                bodies = []
                for _ in range(n):
                    serial += 1
                    bodies.append(spec if cached else {**spec, "title": f"bench {serial}"})
                lat, statuses, wall = _load(server.url, clients, bodies)
                lat.sort()
                rows.append(
                    {
                        "clients": clients,
                        "cached": cached,
                        "n": n,
                        "rps": n / wall,
                        "p50": med(lat),
                        "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
                        "statuses": statuses,
                    }
                )
    finally:
        server.stop()
    return rows


def _load(url: str, clients: int, bodies: list[dict]) -> tuple[list[float], dict[int, int], float]:
    """POST every body to /api/v1/trace from ``clients`` threads: latencies, statuses, wall time."""
    import httpx

    lat: list[float] = []
    statuses: dict[int, int] = {}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    with httpx.Client(base_url=url, timeout=60, limits=limits) as client:

        def one(body: dict) -> None:
            t0 = time.perf_counter()
            code = client.post("/api/v1/trace", json=body).status_code
            lat.append(time.perf_counter() - t0)
            statuses[code] = statuses.get(code, 0) + 1

        t0 = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(one, bodies))
        return lat, statuses, time.perf_counter() - t0


def service_table(rows: list[dict[str, object]]) -> str:
    out = (
        "| clients | cache | requests | req/s | p50 | p99 | statuses |\n|---:|---|---:|---:|---:|---:|---|\n"
    )
    for r in rows:
        statuses = ", ".join(f"{k}: {v}" for k, v in sorted(r["statuses"].items()))
        out += (
            f"| {r['clients']} | {'hit' if r['cached'] else 'miss (distinct specs)'} | {r['n']} | "
            f"{r['rps']:,.1f} | {fmt_ms(r['p50'])} | {fmt_ms(r['p99'])} | {statuses} |\n"
        )
    return out


# ---- the viewer ----------------------------------------------------------------------------
def bench_viewer(quick: bool) -> str | None:
    """The viewer's own benchmark (tests/perf/bench_viewer.py, headless Chromium at 1440×900) at
    about 100, 500, 2,000 and 5,000 drawn nodes (Linear+Tanh blocks of ~7 nodes), and a ~500-node
    backward played at 60 events/s: its lines as a Markdown table."""
    script = REPO / "tests" / "perf" / "bench_viewer.py"
    if not script.exists():
        return None
    rows = []
    play: list[str] = []
    for k, blocks in enumerate((14, 71) if quick else (14, 71, 285, 714)):
        args = [sys.executable, str(script), "--draw-blocks", str(blocks), "--play-blocks", "70"]
        args += ["--seconds", "3", "--rounds", "2" if quick else "3"] if k == 0 else ["--rounds", "0"]
        done = subprocess.run(args, capture_output=True, text=True, check=False, cwd=REPO)
        lines = [line for line in done.stdout.splitlines() if line.startswith(("draw:", "play round"))]
        if done.returncode != 0 or not lines:
            rows.append(f"| {blocks} blocks | failed: {(done.stderr.strip().splitlines() or ['?'])[-1]} |")
            continue
        rows.append(f"| {lines[0].removeprefix('draw: ')} |")
        play += [f"- {line}" for line in lines[1:]]
    out = "| drawing, every module expanded |\n|---|\n" + "\n".join(rows) + "\n"
    if play:
        out += (
            "\nPlaying (each round a fresh page; per-frame work from a DevTools trace):\n\n"
            + "\n".join(play)
            + "\n"
        )
    return out


# ---- the report ----------------------------------------------------------------------------
def machine_line() -> str:
    versions = [f"gradtrace {getattr(gradtrace, '__version__', '?')}", f"torch {torch.__version__}"]
    for name in ("torchviz", "torchlens"):
        try:
            from importlib.metadata import version

            versions.append(f"{name} {version(name)}")
        except Exception:  # noqa: BLE001
            versions.append(f"{name} not installed")
    dot = shutil.which("dot")
    if dot:
        v = subprocess.run([dot, "-V"], capture_output=True, text=True, check=False).stderr.strip()
        versions.append(v.replace("dot - graphviz version", "Graphviz").split(" (")[0])
    node = shutil.which("node")
    versions.append(f"Python {platform.python_version()}")
    cpu = platform.processor() or platform.machine()
    return (
        f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores ({cpu}), one torch thread; "
        + ", ".join(versions)
        + (f"; system node {'present' if node else 'absent'}")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"among {', '.join(MODELS)}")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--requests", type=int, default=200, help="per cached service configuration")
    parser.add_argument("--quick", action="store_true", help="fewer rounds: to check the harness")
    parser.add_argument(
        "--skip",
        default="",
        help="comma-separated sections to skip: service,viewer,gallery,first_svg,floor,big_model,watch",
    )
    parser.add_argument("--write", type=Path, help="write the report (Markdown) to this file")
    args = parser.parse_args()
    repeats = 2 if args.quick else args.repeats
    skip = set(filter(None, args.skip.split(",")))
    torch.set_num_threads(1)
    notes: list[str] = []
    report = ["# Benchmarks", "", f"Machine: {machine_line()}.", ""]
    report.append(
        "Every figure is a median of rounds that interleave what is compared; ratios (×) are to the bare "
        f"forward+backward of the same model in the same rounds ({repeats} rounds; bare, capture and serialise "
        f"{CAPTURE_SAMPLES_PER_ROUND} times each in every round). "
        "Regenerate with `make bench`.\n"
    )
    workdir = Path(tempfile.mkdtemp(prefix="gradtrace-bench-"))
    rows = []
    for key in args.models.split(","):
        print(f"capture: {key} …", file=sys.stderr, flush=True)
        rows.append(bench_capture(MODELS[key], repeats, notes, workdir))
    report += [
        "## Capture, serialisation and drawing, against torchviz and TorchLens",
        "",
        capture_table(rows),
    ]

    draw_rows = []
    for r in rows[:3]:  # the two models and resnet-style convs
        print(f"drawing: {r['model'].key} …", file=sys.stderr, flush=True)
        draw_rows.append((r, bench_drawing(r["trace_path"], max(2, repeats // 2), workdir)))
    if draw_rows:
        report += [
            "## Drawing a saved trace",
            "",
            "| model | first SVG in a new process (import excluded) | `import gradtrace` | CLI `gradtrace render trace.json -o x.svg` (wall) | the CLI again, layout stored on disk |",
            "|---|---:|---:|---:|---:|",
        ]
        for r, d in draw_rows:
            report.append(
                f"| {r['model'].description} | {fmt_ms(d['cold'])} | {fmt_ms(d['import'])} | {fmt_ms(d['cli'])} "
                f"| {fmt_ms(d['cli_stored'])} |"
            )
        report.append("")

    if "first_svg" not in skip:
        print("first SVG …", file=sys.stderr, flush=True)
        report += first_svg_section(max(2, repeats // 2), workdir)

    if "floor" not in skip:
        print("the floor …", file=sys.stderr, flush=True)
        from bench_floor import section as floor_section

        report += floor_section(rounds=repeats)

    if "big_model" not in skip:
        print("big models …", file=sys.stderr, flush=True)
        from bench_big_model import section

        report += section()

    if "watch" not in skip:
        print("watch …", file=sys.stderr, flush=True)
        from bench_watch import section as watch_section

        report += watch_section(rounds=max(2, repeats // 2))

    if "gallery" not in skip:
        print("gallery …", file=sys.stderr, flush=True)
        g = bench_gallery(repeats)
        report += [
            "## The gallery",
            "",
            f"{g['count']} example specs (every seed example) through `gradtrace.trace_spec`: median "
            f"{fmt_ms(g['median'])} per spec, slowest {fmt_ms(g['max'])}, all together {fmt_ms(g['total'])}.",
            "",
        ]
    if "service" not in skip:
        print("service …", file=sys.stderr, flush=True)
        report += [
            "## The service",
            "",
            "A real `gradtrace serve` on loopback (default workers, rate limit off), the `full-backward-hook` "
            "example; cached: the same spec (a cache hit); uncached: a distinct title per request. "
            "503s under 32 clients are the queue limit shedding load, as designed.",
            "",
            service_table(bench_service(args.requests, args.quick)),
        ]
    if "viewer" not in skip:
        print("viewer …", file=sys.stderr, flush=True)
        viewer = bench_viewer(args.quick)
        if viewer:
            report += ["## The viewer (headless Chromium)", "", viewer]
    if notes:
        report += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    text = "\n".join(report)
    print(text)
    if args.write:
        args.write.write_text(text + kept_by_hand(args.write), encoding="utf-8")
        print(f"written to {args.write}", file=sys.stderr)


# The heading from which BENCHMARKS.md is written by hand (history, one-off measurements, what
# was tried): `--write` replaces what is above it and keeps it and what follows.
BY_HAND = "## Measured by hand"


def kept_by_hand(path: Path) -> str:
    """The part of ``path`` from the BY_HAND heading on ("" if it has none), to follow a new report."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    start = old.find("\n" + BY_HAND + "\n")
    return "" if start < 0 else "\n" + old[start + 1 :]


if __name__ == "__main__":
    main()
