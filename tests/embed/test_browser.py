"""In real Chromium: the standalone HTML plays the backward pass with the network blocked; the
SVGs draw (and the animated one moves) inside an <img> tag; the notebook output boots."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from svg_checks import example_trace

from gradtrace.render import diagram_svg, notebook_html, standalone_html

pytestmark = pytest.mark.browser


def offline(context: Any) -> list[str]:
    """Abort every request that is not the local file itself; return what was attempted."""
    attempted: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith(("file://", "data:", "about:")):
            r.continue_()
        else:
            attempted.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    return attempted


def test_standalone_html_plays_the_backward_pass_offline(browser: Any, tmp_path: Path) -> None:
    trace = example_trace("two-layer-linear")
    page_file = tmp_path / "player.html"
    page_file.write_text(standalone_html(trace), encoding="utf-8")
    context = browser.new_context(viewport={"width": 1100, "height": 800})
    attempted = offline(context)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.as_uri())
    page.wait_for_selector("body.is-ready", timeout=20_000)
    n_nodes = len(trace.doc.graph.nodes)
    assert page.locator(".gt-node[data-node-id]").count() == n_nodes
    page.select_option("#speed", "60")
    page.click("#play")
    page.wait_for_function("document.body.dataset.phase === 'backward'", timeout=20_000)
    page.wait_for_selector('.gt-node[data-state="done"]', state="attached", timeout=20_000)
    page.wait_for_selector('.gt-edge[data-state="done"]', state="attached", timeout=20_000)
    page.screenshot(path=str(tmp_path / "player.png"))
    assert attempted == [] and errors == []
    context.close()


def _pixels_of_img(page: Any, selector: str) -> list[int]:
    """RGBA bytes of an <img> drawn into a canvas (a data: SVG does not taint it)."""
    return page.evaluate(
        """(sel) => { const img = document.querySelector(sel);
            const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
            const g = c.getContext('2d'); g.drawImage(img, 0, 0);
            return Array.from(g.getImageData(0, 0, c.width, c.height).data); }""",
        selector,
    )


def _ink(rgba: list[int]) -> int:
    """Pixels that are not the light theme's white background."""
    return sum(1 for i in range(0, len(rgba), 4) if rgba[i + 3] and min(rgba[i : i + 3]) < 235)


def test_svgs_draw_inside_an_img_tag_and_the_animated_one_moves(page: Any) -> None:
    trace = example_trace("two-layer-linear")
    still = base64.b64encode(diagram_svg(trace).encode()).decode()
    moving = base64.b64encode(diagram_svg(trace, animated=True).encode()).decode()
    page.set_viewport_size({"width": 1400, "height": 1400})
    page.set_content(
        '<body style="margin:0;display:flex;align-items:flex-start">'
        f'<img id="moving" src="data:image/svg+xml;base64,{moving}">'
        f'<img id="still" src="data:image/svg+xml;base64,{still}"></body>'
    )
    page.wait_for_function("[...document.images].every(i => i.complete && i.naturalWidth > 0)")
    still_ink = _ink(_pixels_of_img(page, "#still"))
    assert still_ink > 5_000  # nodes, edges, labels, chips: a real picture, not a blank box
    # The animation runs inside the <img> (CSS keyframes, no script): the picture changes.
    shots = []
    for _ in range(3):
        shots.append(page.locator("#moving").screenshot())
        page.wait_for_timeout(1_200)
    assert len(set(shots)) > 1


def test_notebook_output_boots_the_player(browser: Any) -> None:
    trace = example_trace("two-layer-linear")
    context = browser.new_context()
    attempted = offline(context)
    page = context.new_page()
    page.set_content(f"<h1>notebook</h1>{notebook_html(trace, player=True)}")
    frame = page.frame_locator("iframe.gradtrace-player")
    frame.locator("body.is-ready").wait_for(timeout=20_000)
    assert frame.locator(".gt-node[data-node-id]").count() == len(trace.doc.graph.nodes)
    # The inspector is there for whoever clicks a node: the node's own numbers, in the cell.
    frame.locator('.gt-node[data-node-id="n5"]').click()  # the parameter W1.weight
    inspector = frame.locator("#inspector")
    inspector.wait_for(state="visible", timeout=10_000)
    assert "W1.weight" in inspector.inner_text()
    assert attempted == []
    context.close()
