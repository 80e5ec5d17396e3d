"""How much a saved player weighs: the standalone HTML of a small model ≤ 400 KB (it was ~2 MB
while the 1.6 MB layout engine travelled in it), laid out at export time and gzipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from svg_checks import example_trace

from gradtrace.render import notebook_html, standalone_html

MAX_SMALL_MODEL_HTML = 400_000


@pytest.mark.parametrize(
    "name", ["two-layer-linear", "conv-net", "tiny-attention", "mlp-hooks-reconstruction"]
)
def test_standalone_html_of_a_small_model_is_light(name: str) -> None:
    page = standalone_html(example_trace(name))
    size = len(page.encode("utf-8"))
    print(f"{name}: standalone HTML {size:,} bytes")
    assert size <= MAX_SMALL_MODEL_HTML, f"{size:,} bytes"
    assert "g.ELK = f()" not in page  # laid out at export time: the layout engine stays home
    assert 'id="gradtrace-packed-player"' in page and 'id="gradtrace-packed-data"' in page


MAX_LATER_CELL = 100_000


@pytest.mark.browser
def test_later_notebook_cells_carry_only_their_trace(browser: Any, tmp_path: Path) -> None:
    """The first cell carries the player's code; a later cell (≤ 100 KB) asks the page for it
    and plays; a cell whose page lacks the code (the first output cleared) says what to do."""
    first = notebook_html(example_trace("two-layer-linear"), player=True)
    later = notebook_html(example_trace("conv-net"), player=False)
    print(f"notebook cells: first {len(first):,} bytes, later {len(later):,} bytes")
    assert (
        len(later) <= MAX_LATER_CELL and "gradtrace-player-" in first and 'id="gradtrace-player-' not in later
    )
    notebook = tmp_path / "notebook.html"
    notebook.write_text(f"<!doctype html><body>{first}<p>next cell</p>{later}</body>", encoding="utf-8")
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(notebook.as_uri())
    for i in (0, 1):
        page.frame_locator("iframe").nth(i).locator("body.is-ready").wait_for(timeout=30_000)
    counts = [
        f.evaluate("document.querySelectorAll('.gt-node[data-node-id]').length") for f in page.frames[1:]
    ]
    assert counts == [len(example_trace(n).doc.graph.nodes) for n in ("two-layer-linear", "conv-net")]
    alone = tmp_path / "alone.html"
    alone.write_text(f"<!doctype html><body>{later}</body>", encoding="utf-8")
    page.goto(alone.as_uri())
    page.frame_locator("iframe").locator("body", has_text="travels once per notebook").wait_for(
        timeout=30_000
    )
    assert errors == []
    context.close()
