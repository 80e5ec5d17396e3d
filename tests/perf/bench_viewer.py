"""Viewer speed in headless Chromium at 1440×900: drawing a big expanded graph, and frame times
while the backward pass plays.

Traces come from gradtrace.trace on deep Linear+Tanh stacks (no spec limits), embedded in the
page the way standalone HTML files embed them, so the numbers are the viewer's alone:

- draw: an N-node graph, every module expanded (collapsed=-): ELK layout time, then the time
  from the start of drawing the scene until the browser has painted it (two animation frames);
- play: a ~500-node graph, backward pass played at 60 events/s; the gaps between animation
  frames (requestAnimationFrame) while it plays: median, p95, max.

Run: .venv/bin/python tests/perf/bench_viewer.py [--draw-blocks 285] [--play-blocks 70]
Not collected by pytest (a benchmark, not a timed test). Targets (issue 12): draw ≤ 1.5 s at
2,000 nodes, p95 frame ≤ 16.7 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from playwright.sync_api import sync_playwright
from torch import nn

import gradtrace

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from server_process import ServerProcess  # noqa: E402


def deep_trace(blocks: int) -> dict[str, Any]:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(blocks):
        layers += [nn.Linear(4, 4), nn.Tanh()]
    model = nn.Sequential(*layers)
    return gradtrace.trace(model, torch.randn(2, 4), lambda out: out.sum()).to_dict()


def open_with(page: Any, base: str, trace: dict[str, Any], hash_: str) -> None:
    """The viewer with the trace embedded (no API call), as in a standalone HTML file."""
    html = (ROOT / "frontend" / "index.html").read_text()
    data = json.dumps({"trace": trace, "layout": None}).replace("</", "<\\/")
    html = html.replace(
        "</head>", f'<script type="application/json" id="gradtrace-data">{data}</script></head>'
    )
    page.route(base + "/bench.html", lambda r: r.fulfill(body=html, content_type="text/html"))
    page.goto(f"{base}/bench.html#{hash_}")
    page.wait_for_selector("body.is-ready", timeout=180000)


PAINTED = """() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => {
  const draw = performance.getEntriesByName('gt-draw', 'mark').pop().startTime;
  const layout = performance.getEntriesByName('gt-layout', 'measure').pop().duration;
  done({ layout, drawn: performance.now() - draw });
})))"""

RECORD = """(ms) => new Promise((done) => {
  const gaps = []; let last = performance.now(); const end = last + ms;
  const tick = (t) => { gaps.push(t - last); last = t; if (t < end) requestAnimationFrame(tick); else done(gaps); };
  requestAnimationFrame(tick);
})"""


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draw-blocks", type=int, default=285, help="Linear+Tanh blocks of the draw graph")
    ap.add_argument("--play-blocks", type=int, default=70, help="Linear+Tanh blocks of the played graph")
    ap.add_argument("--seconds", type=float, default=6.0, help="how long to record frames while playing")
    args = ap.parse_args()
    big = deep_trace(args.draw_blocks)
    mid = deep_trace(args.play_blocks)
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp))
        try:
            server.wait_ready()
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                open_with(page, server.url, big, "collapsed=-")
                t = page.evaluate(PAINTED)
                print(
                    f"draw: {len(big['graph']['nodes'])} nodes expanded: ELK layout {t['layout']:.0f} ms, "
                    f"scene drawn and painted {t['drawn']:.0f} ms"
                )
                page.close()
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                open_with(page, server.url, mid, "collapsed=-&speed=60")
                bwd = next(x for x in mid["passes"] if x["phase"] == "backward")
                page.get_by_label("Timeline").fill(str(bwd["first_seq"]))
                page.get_by_role("button", name="Play").click()
                gaps = page.evaluate(RECORD, args.seconds * 1000)[1:]
                step = page.evaluate("() => Number(document.body.dataset.step)")
                print(
                    f"play: {len(mid['graph']['nodes'])} nodes, backward at 60 events/s, {len(gaps)} frames "
                    f"(reached step {step} of {bwd['last_seq']}): median {statistics.median(gaps):.1f} ms, "
                    f"p95 {pct(gaps, 95):.1f} ms, max {max(gaps):.1f} ms"
                )
                browser.close()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
