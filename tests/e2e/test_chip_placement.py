"""Gradient chips sit on the edge they belong to, in real Chromium at 1440×900.

At the end of the first backward (every gradient chip shown), each chip's centre lies on its own
edge's drawn path; the few that found no room on it (marked data-beside) touch the line with
their side — none is scanned off to where another edge runs. The picture is kept for a look.
Overlaps are test_first_sight.py's business.
"""

from __future__ import annotations

from typing import Any

import pytest
from e2e_helpers import open_example, wait_step

pytestmark = pytest.mark.browser

# Each shown gradient chip: its centre's distance to its own edge's path, in graph units.
CHIP_OFF_PATH = """() => {
  const inv = document.querySelector('#graph .gt-viewport').getScreenCTM().inverse();
  const toGraph = (x, y) => new DOMPoint(x, y).matrixTransform(inv);
  const out = {};
  for (const chip of document.querySelectorAll('#graph .gt-grad--edge:not([data-state=hidden])')) {
    const r = chip.querySelector('rect').getBoundingClientRect();
    const c = toGraph(r.left + r.width / 2, r.top + r.height / 2);
    const path = document.querySelector(`#graph .gt-edge[data-edge-id="${CSS.escape(chip.dataset.edgeId)}"] path`);
    const ctm = path.getScreenCTM();
    const a = toGraph(r.left, r.top), b = toGraph(r.right, r.bottom);
    let centre = Infinity, side = Infinity;
    for (let s = 0, n = path.getTotalLength(); s <= n; s += 0.5) {
      const p = path.getPointAtLength(s).matrixTransform(ctm);
      const g = toGraph(p.x, p.y);
      centre = Math.min(centre, Math.hypot(g.x - c.x, g.y - c.y));
      side = Math.min(side, Math.hypot(Math.max(a.x - g.x, 0, g.x - b.x), Math.max(a.y - g.y, 0, g.y - b.y)));
    }
    const beside = chip.hasAttribute('data-beside');
    out[chip.dataset.edgeId] = { off: beside ? side : centre, beside, text: chip.querySelector('text').textContent };
  }
  return out;
}"""


def _open_expanded_at(page: Any, live_server: str, example_id: str, step: int) -> None:
    """The example opened with every module expanded, at ``step``."""
    open_example(page, live_server, example_id, f"&step={step}&collapsed=-")
    wait_step(page, step)


@pytest.mark.parametrize(
    "example_id", ["tiny-attention", "conv-net", "hook-no-input-grad", "two-layer-linear"]
)
def test_each_gradient_chip_sits_on_its_edge(
    page: Any, live_server: str, example_traces: dict[str, Any], screenshots: Any, example_id: str
) -> None:
    trace = example_traces[example_id]
    step = next(p["last_seq"] for p in trace["passes"] if p["phase"] == "backward")
    _open_expanded_at(page, live_server, example_id, step)
    chips = page.evaluate(CHIP_OFF_PATH)
    with_grads = {e["id"] for e in trace["graph"]["edges"] if any(g["seq"] <= step for g in e["grads"])}
    assert chips and {k.split("~")[0] for k in chips} <= with_grads
    # On the line: the centre within 2 px of it; beside it: the chip's side within 4 px (gap 3).
    off = {k: v for k, v in chips.items() if v["off"] > (4 if v["beside"] else 2)}
    assert sum(v["beside"] for v in chips.values()) <= len(chips) // 4, chips
    assert not off, f"chips off their edge: {off}"
    page.screenshot(path=str(screenshots / f"chips-on-edges-{example_id}.png"))


# Each shown .grad and value chip: the gap between its box and its node's box, in graph units.
NODE_CHIP_GAPS = """() => {
  const inv = document.querySelector('#graph .gt-viewport').getScreenCTM().inverse();
  const toGraph = (x, y) => new DOMPoint(x, y).matrixTransform(inv);
  const box = (e) => {
    const r = e.getBoundingClientRect();
    const a = toGraph(r.left, r.top), b = toGraph(r.right, r.bottom);
    return { x: a.x, y: a.y, width: b.x - a.x, height: b.y - a.y };
  };
  const out = [];
  const chips = document.querySelectorAll('#graph .gt-grad--leaf:not([data-state=hidden]), #graph .gt-value:not([data-state=hidden])');
  for (const chip of chips) {
    const id = chip.dataset.leaf ?? chip.dataset.value;
    const c = box(chip.querySelector('rect'));
    const n = box(document.querySelector(`#graph .gt-node[data-node-id="${CSS.escape(id)}"] rect`));
    const gap = Math.hypot(Math.max(n.x - (c.x + c.width), 0, c.x - (n.x + n.width)), Math.max(n.y - (c.y + c.height), 0, c.y - (n.y + n.height)));
    out.push({ node: id, text: chip.querySelector('text').textContent, gap, chip: c });
  }
  return out;
}"""

# Px (graph units) a .grad or value chip may be from its node's box; tests/frontend/chips.test.mjs
# holds the golden traces to the same bound. Most sit 6 px away; the farthest measured is 14 px
# (shared-weights-fan-in's TanhBackward0 value: every nearer spot crosses an edge line).
NODE_CHIP_REACH = 16


@pytest.mark.parametrize(
    "example_id",
    [
        "tiny-attention",
        "conv-net",
        "retain-grad-intermediate",
        "shared-weights-fan-in",
        "sgd-training-step",
    ],
)
def test_each_grad_and_value_chip_sits_next_to_its_node(
    page: Any, live_server: str, example_traces: dict[str, Any], screenshots: Any, example_id: str
) -> None:
    trace = example_traces[example_id]
    step = max(p["last_seq"] for p in trace["passes"] if p["phase"] == "backward")
    _open_expanded_at(page, live_server, example_id, step)
    chips = page.evaluate(NODE_CHIP_GAPS)
    written = {ev["node"] for ev in trace["events"] if ev["kind"] == "grad_write" and ev["seq"] <= step}
    shown = {c["node"] for c in chips if c["text"].startswith(".grad")}
    assert written <= shown, f".grad written but no chip: {written - shown}"
    far = [c for c in chips if c["gap"] > NODE_CHIP_REACH]
    page.screenshot(path=str(screenshots / f"node-chips-{example_id}.png"))
    assert not far, f"chips away from their node: {far}"
