"""In real Chromium: every player kind opens at its default size with text ≥ 11 CSS px on screen
(measured: font-size × the text's screen scale), nothing clipped at the top, the loss in view
and the legend folded away in small frames.

The kinds: the standalone HTML at 1280×720; the notebook cell (its iframe at the notebook's
height) on a 1280×720 page; the embed page at the Share dialog's 520 px and the docs plugins'
default height (the same player page, in an iframe of that size in a docs column).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from svg_checks import example_trace

import gradtrace
from gradtrace.docs_plugins.diagrams import DEFAULT_HEIGHT_PX
from gradtrace.render import notebook_html, standalone_html
from gradtrace.render.page import NOTEBOOK_HEIGHT_PX

pytestmark = pytest.mark.browser

SHARE_IFRAME_HEIGHT = 520  # share.js's snippet
GALLERY = ("two-layer-linear", "conv-net", "tiny-attention", "mlp-hooks-reconstruction", "sgd-before-step")

# The smallest on-screen text, the nodes cut by the panel's top edge, whether the graph is whole
# on screen, the loss's box, the overlays' boxes (tools, folded legend) a node must not sit under.
MEASURE = """() => {
  const svg = document.getElementById('graph');
  const panel = svg.getBoundingClientRect();
  const inside = (b) => b.width > 0 && b.bottom > panel.top && b.top < panel.bottom && b.right > panel.left && b.left < panel.right;
  let smallest = Infinity;
  for (const t of svg.querySelectorAll('text')) {
    const b = t.getBoundingClientRect();
    if (!inside(b) || getComputedStyle(t).visibility === 'hidden') continue;
    const m = t.getScreenCTM();
    smallest = Math.min(smallest, parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b));
  }
  const nodes = [...svg.querySelectorAll('.gt-node[data-node-id]')].map((n) => n.getBoundingClientRect());
  const cutAtTop = nodes.filter((b) => b.top < panel.top - 0.5 && b.bottom > panel.top + 0.5).length;
  const whole = nodes.every((b) => b.top >= panel.top - 0.5 && b.bottom <= panel.bottom + 0.5 && b.left >= panel.left - 0.5 && b.right <= panel.right + 0.5);
  const low = nodes.reduce((a, b) => (a && a.bottom >= b.bottom ? a : b), null);
  const overlays = [...document.querySelectorAll('.graph-tools, .legend.is-folded')].map((e) => e.getBoundingClientRect());
  const hidden = whole ? nodes.filter((b) => overlays.some((o) => o.width && b.left < o.right && b.right > o.left && b.top < o.bottom && b.bottom > o.top)).length : 0;
  const legend = document.querySelector('.graph-panel .legend');
  return { smallest, cutAtTop, whole, hidden, n: nodes.length,
           loss: low && { top: low.top, bottom: low.bottom, left: low.left, right: low.right },
           panel: { top: panel.top, bottom: panel.bottom, left: panel.left, right: panel.right },
           legendFolded: legend ? legend.classList.contains('is-folded') : null };
}"""


def gpt2_tiny_trace() -> gradtrace.Trace:
    """A GPT-2 built from a tiny config (no weights downloaded): 2 layers, 32 wide, 2 heads."""
    transformers = pytest.importorskip("transformers")
    import torch

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 100, (1, 6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gradtrace.trace(model, ids, lambda out: out.logits.float().pow(2).mean(), title="GPT-2 tiny")


_TRACES: dict[str, gradtrace.Trace] = {}


def trace_of(name: str) -> gradtrace.Trace:
    if name not in _TRACES:
        _TRACES[name] = gpt2_tiny_trace() if name == "gpt2-tiny" else example_trace(name)
    return _TRACES[name]


def _check(m: dict[str, Any], where: str) -> None:
    assert m["n"] > 0, where
    print(f"{where}: smallest text {m['smallest']:.2f} px, whole graph {m['whole']}")
    assert m["smallest"] >= 11 - 1e-3, f"{where}: smallest text {m['smallest']:.2f} px"
    assert m["cutAtTop"] == 0, f"{where}: {m['cutAtTop']} node(s) cut at the top"
    assert m["hidden"] == 0, f"{where}: {m['hidden']} node(s) under the tools or the legend"
    loss, panel = m["loss"], m["panel"]
    assert panel["top"] - 0.5 <= loss["top"] and loss["bottom"] <= panel["bottom"] + 0.5, (
        f"{where}: loss not in view"
    )
    assert panel["left"] - 0.5 <= loss["left"] and loss["right"] <= panel["right"] + 0.5, (
        f"{where}: loss not in view"
    )


def _open(context: Any, url: str) -> Any:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    return page, errors


@pytest.mark.parametrize("name", [*GALLERY, "gpt2-tiny"])
def test_standalone_html_opens_readable_at_1280x720(browser: Any, tmp_path: Path, name: str) -> None:
    file = tmp_path / "player.html"
    file.write_text(standalone_html(trace_of(name)), encoding="utf-8")
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page, errors = _open(context, file.as_uri())
    page.wait_for_selector("body.is-ready", timeout=30_000)
    m = page.evaluate(MEASURE)
    _check(m, f"standalone {name}")
    assert m["legendFolded"] is True  # 720 px tall: the key folds into its button
    # Playing, the camera follows: the running node stays on screen at readable zoom.
    page.select_option("#speed", "60")
    page.click("#play")
    page.wait_for_function("document.body.dataset.phase === 'backward'", timeout=30_000)
    page.click("#play")  # pause
    running = page.evaluate(
        """() => { const n = document.querySelector('.gt-node[data-state="active"], .gt-node[data-state="running"]');
                  if (!n) return null; const b = n.getBoundingClientRect(), p = document.getElementById('graph').getBoundingClientRect();
                  return b.bottom > p.top && b.top < p.bottom && b.right > p.left && b.left < p.right; }"""
    )
    assert running in (None, True), f"standalone {name}: the running node is off screen"
    assert page.evaluate(MEASURE)["smallest"] >= 11 - 1e-3
    assert errors == []
    context.close()


@pytest.mark.parametrize("name", ["two-layer-linear", "conv-net", "gpt2-tiny"])
@pytest.mark.parametrize("height", [SHARE_IFRAME_HEIGHT, DEFAULT_HEIGHT_PX])
def test_embedded_player_opens_readable_at_its_suggested_height(
    browser: Any, tmp_path: Path, name: str, height: int
) -> None:
    """The player page in an iframe of the Share snippet's / the docs plugins' height, in a
    760 px docs column."""
    (tmp_path / "player.html").write_text(standalone_html(trace_of(name)), encoding="utf-8")
    host = tmp_path / "host.html"
    host.write_text(
        '<!doctype html><body style="margin:0"><main style="width:760px;margin:20px auto">'
        f'<iframe src="player.html" width="100%" height="{height}" style="border:0"></iframe></main>',
        encoding="utf-8",
    )
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page, errors = _open(context, host.as_uri())
    frame = page.frame_locator("iframe")
    frame.locator("body.is-ready").wait_for(timeout=30_000)
    m = page.frames[1].evaluate(MEASURE)
    _check(m, f"iframe {height}px {name}")
    assert m["legendFolded"] is True
    assert errors == []
    context.close()


@pytest.mark.parametrize("name", ["two-layer-linear", "tiny-attention", "gpt2-tiny"])
def test_notebook_cell_opens_readable(browser: Any, tmp_path: Path, name: str) -> None:
    host = tmp_path / "notebook.html"
    host.write_text(
        '<!doctype html><body style="margin:0"><div style="width:1000px;margin:10px auto">'
        f"{notebook_html(trace_of(name), player=True)}</div>",
        encoding="utf-8",
    )
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page, errors = _open(context, host.as_uri())
    page.frame_locator("iframe").locator("body.is-ready").wait_for(timeout=30_000)
    m = page.frames[1].evaluate(MEASURE)
    assert (
        page.evaluate("document.querySelector('iframe').getBoundingClientRect().height")
        == NOTEBOOK_HEIGHT_PX + 2
    )
    _check(m, f"notebook {name}")
    assert errors == []
    context.close()
