"""The narration can be read on a laptop, in real Chromium: for every gallery example at
1280×720, every step's sentence is whole inside the Narration region (lists of numbers fold to
"[…]" behind "show the numbers" when they do not fit, never cut), and every example's embed
player at the Share dialog's 520 px tells the story as a caption under the graph.

One page per example, every step through the scrubber (the same input a user drags)."""

from __future__ import annotations

from typing import Any

import pytest
from e2e_helpers import get_json, open_example, post_json, wait_step

pytestmark = pytest.mark.browser

# Every step, at once in the page: the sentence's box inside the region's, the region inside the
# window, nothing scrolled out of sight, no clamped caption; returns the steps that fail.
EVERY_STEP = """() => {
  const slider = document.getElementById('timeline');
  const n = Number(slider.max) + 1;
  const region = document.getElementById('narration');
  const text = document.getElementById('narration-text');
  const bad = [];
  let folded = 0;
  for (let s = 0; s < n; s++) {
    slider.value = String(s);
    slider.dispatchEvent(new Event('input'));
    const a = region.getBoundingClientRect(), t = text.getBoundingClientRect();
    const whole = text.textContent.length > 0 && t.top >= a.top - 0.5 && t.bottom <= a.bottom + 0.5
      && a.top >= 0 && a.bottom <= innerHeight + 0.5 && region.scrollHeight <= region.clientHeight + 1
      && !region.classList.contains('is-clamped');
    if (!whole) bad.push({ step: s, text: text.textContent.slice(0, 90), region: [a.top, a.bottom], sentence: [t.top, t.bottom] });
    if (region.classList.contains('is-folded')) folded++;
  }
  return { bad, folded, n, step: Number(document.body.dataset.step) };
}"""

CAPTION = """() => {
  const el = document.getElementById('narration-text');
  const b = el.getBoundingClientRect(), g = document.getElementById('graph').getBoundingClientRect();
  return { text: el.textContent, top: b.top, bottom: b.bottom, height: b.height, below: b.top >= g.bottom - 0.5,
           inside: b.bottom <= innerHeight + 0.5 && b.right <= innerWidth + 0.5 };
}"""


def test_every_sentence_of_every_example_is_whole_at_1280x720(
    page: Any, live_server: str, examples: list[dict[str, Any]]
) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    folded = 0
    for ex in examples:
        page.goto("about:blank")  # a fresh page: is-ready is this example's, not the last one's
        open_example(page, live_server, ex["id"])
        out = page.evaluate(EVERY_STEP)
        assert out["n"] > 1 and out["step"] == out["n"] - 1
        assert out["bad"] == [], f"{ex['id']}: sentences not whole at 1280×720: {out['bad'][:3]}"
        folded += out["folded"]
    assert folded > 0  # the long chain-rule steps did fold their numbers


def test_every_example_player_has_a_caption_at_520px(
    page: Any, live_server: str, examples: list[dict[str, Any]]
) -> None:
    page.set_viewport_size({"width": 520, "height": 520})
    for ex in examples:
        spec = get_json(f"{live_server}/api/v1/examples/{ex['id']}")
        saved = post_json(live_server + "/api/v1/specs", spec)
        page.goto(f"{live_server}/embed/{saved['id']}")
        page.wait_for_selector("body.is-ready", timeout=60_000)
        step = int(page.evaluate("document.body.dataset.step"))
        wait_step(page, step)
        c = page.evaluate(CAPTION)
        assert c["text"] and c["height"] > 0 and c["below"] and c["inside"], f"{ex['id']}: {c}"
