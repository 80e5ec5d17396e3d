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


def _gpt2_tiny() -> Any:
    """The issue's model: GPT-2 from a config (2 layers, 64 wide, 3.4 M parameters), no weights
    downloaded; 16 tokens."""
    transformers = pytest.importorskip("transformers")
    import warnings

    import torch

    import gradtrace

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, config.vocab_size, (1, 16))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return gradtrace.trace(model, ids, lambda out: out.logits.float().pow(2).mean(), title="GPT-2 tiny")


MAX_BIG_MODEL_HTML = 2_000_000
MAX_BIG_MODEL_JSON = 4_000_000
MAX_PICTURE_SIDE = 2_000


def test_gpt2_tiny_files_fit_by_default_and_keep_every_number_on_request(tmp_path: Path) -> None:
    import json
    import re

    import numpy as np

    import gradtrace
    from gradtrace.render import FILE_VALUE_BUDGET

    trace = _gpt2_tiny()
    grads = trace.grads
    sizes = {}
    for suffix in (".json", ".html", ".svg"):
        sizes[suffix] = trace.save(tmp_path / f"gpt2{suffix}").stat().st_size
    everything = trace.save(tmp_path / "all.json", values="all")
    print(f"GPT-2 tiny: {sizes}, values='all' JSON {everything.stat().st_size:,} bytes")
    assert sizes[".json"] <= MAX_BIG_MODEL_JSON and sizes[".html"] <= MAX_BIG_MODEL_HTML
    # the picture opens on the blocks (each one box, the gradient's norm between them)
    svg = (tmp_path / "gpt2.svg").read_text(encoding="utf-8")
    width, height = (
        float(v) for v in re.search(r'<svg[^>]*?width="([\d.]+)"[^>]*?height="([\d.]+)"', svg).groups()
    )
    assert max(width, height) <= MAX_PICTURE_SIDE, (width, height)
    assert svg.count("GPT2Block →") >= 2 and "‖g‖" in svg
    # what the default file summarised is marked as the engine marks its own budget
    doc = json.loads((tmp_path / "gpt2.json").read_bytes())
    assert doc["limits"]["finals_truncated"] >= 1 and doc["limits"]["values_truncated"] > 0
    (said,) = [d for d in doc["analyses"]["diagnostics"] if d["code"] == "file_values_summarised"]
    assert f"{FILE_VALUE_BUDGET:,}" in said["message"] and 'values="all"' in said["message"]
    small = gradtrace.Trace.load(tmp_path / "gpt2.json")
    kept = [name for name, g in small.doc.grads.items() if g is not None and not g.truncated]
    assert kept
    for name in kept:  # the final gradients the file kept are exact
        assert np.array_equal(small.array(small.doc.grads[name]), grads[name]), name
    # values="all": every final gradient exactly; in memory they always are
    whole = gradtrace.Trace.load(everything)
    assert set(whole.grads) == set(grads)
    for name, g in grads.items():
        assert (g is None and whole.grads[name] is None) or np.array_equal(whole.grads[name], g), name
    assert trace.grads.keys() == grads.keys()


def test_a_small_model_file_is_written_whole_by_default(tmp_path: Path) -> None:
    trace = example_trace("mlp-hooks-reconstruction")
    default = trace.save(tmp_path / "t.json").read_bytes()
    assert default == trace.save(tmp_path / "all.json", values="all").read_bytes() == trace.to_json_bytes()
