"""The run view of a gradtrace.watch run, in real Chromium: from ``gradtrace view RUN_DIR``, and
from the hosted service (the gallery's two training runs and a pasted program, run in the jail).
The Step slider moves the graph's colours (the gradient norms of another step); repeated layers
fold into a layer × step heatmap; a flag's button goes to its step and node; a saved full trace
opens in the player; the run's file opens from the player's Open."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import get_json, nodes_under_minimap, open_example
from server_process import gradtrace_view

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "watch"))


@pytest.fixture(scope="module")
def sigmoid_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from watch_models import DeepMLP, mlp_step, train

    import gradtrace

    path = tmp_path_factory.mktemp("watch") / "sigmoid-mlp"
    torch.manual_seed(0)
    model = DeepMLP(depth=8)
    with gradtrace.watch(model, path, every=1):  # full traces: the first step, the step after a flag
        train(model, mlp_step, 12, lr=0.5)
    return path


def _fills(page: Any) -> list[str]:
    return page.eval_on_selector_all("#graph .watch-node rect", "rs => rs.map(r => r.getAttribute('fill'))")


def test_the_step_slider_moves_the_colours(
    page: Any, sigmoid_run: Path, tmp_path: Path, screenshots: Path
) -> None:
    with gradtrace_view(sigmoid_run, tmp_path) as url:
        assert "/watch.html?run=sigmoid-mlp" in url
        page.goto(url)
        page.wait_for_selector("body.is-ready", timeout=60000)
        slider = page.get_by_role("slider", name="Step", exact=True)
        assert slider.get_attribute("type") == "range" and slider.get_attribute("max") == "11"
        assert slider.input_value() == "11"  # opens at the last logged step
        last = _fills(page)
        assert len(last) > 40 and len(set(last)) > 5  # a log-scale ramp, not one colour
        slider.fill("0")
        first = _fills(page)
        assert first != last
        assert page.locator("#step-now").inner_text().startswith("0 ")
        # the vanishing flag: its button goes to its step and node, whose sparkline is drawn
        flag = page.get_by_role("button", name=re.compile(r"^vanishing · step 0"))
        slider.fill("5")
        flag.click()
        assert slider.input_value() == "0"
        assert page.locator("#inspector h2").inner_text() == "layers.0/AccumulateGrad#weight"
        assert page.locator("#inspector .watch-spark polyline").count() == 1
        assert (
            page.locator(".watch-node.is-selected").get_attribute("data-key")
            == "layers.0/AccumulateGrad#weight"
        )
        page.get_by_role("button", name="Play", exact=True).click()
        deadline = time.monotonic() + 20
        while slider.input_value() != "11" and time.monotonic() < deadline:
            page.wait_for_timeout(100)
        assert slider.input_value() == "11"  # played to the last step
        page.screenshot(path=str(screenshots / "watch-run-view.png"))
        # step 0's saved full trace, read from the run by gradtrace view, opens in the player
        slider.fill("0")
        opener = page.get_by_role("button", name="Open step 0 in the player (first logged step)")
        assert "the loop's own loss" in (opener.get_attribute("title") or "")
        opener.click()
        page.wait_for_url(re.compile(r"/\?handoff=trace"))
        page.wait_for_selector("body.is-ready", timeout=60_000)
        assert int(page.evaluate("() => document.body.dataset.nodes")) > 30
        page.screenshot(path=str(screenshots / "watch-step0-in-player.png"))
        # the loss and the head's ops sit in the graph's bottom corner, where the minimap stands
        assert page.locator("#minimap").is_visible()
        assert not nodes_under_minimap(page), nodes_under_minimap(page)


# ---- the hosted service: the gallery's training runs, run on the server in its jail ----------

LABEL_W, CELL_H = 64, 12  # the heatmap's geometry (watchheatmap.js)


def _heat(page: Any, prefix: str, row: int, col: int) -> list[int]:
    """The heatmap cell's colour (RGBA) for block ``row`` at logged step index ``col``."""
    return page.evaluate(
        """([prefix, row, col, labelW, cellH]) => {
          const c = document.querySelector(`#blocks canvas[data-prefix="${prefix}"]`);
          const cellW = (c.width - labelW) / Number(c.dataset.cols);
          const x = Math.floor(labelW + col * cellW + cellW / 2), y = Math.floor(row * cellH + cellH / 2);
          return Array.from(c.getContext("2d").getImageData(x, y, 1, 1).data);
        }""",
        [prefix, row, col, LABEL_W, CELL_H],
    )


def _flags_fit(page: Any) -> bool:
    """The flags row fits the page's width: it wraps, it never scrolls sideways."""
    return page.evaluate(
        "() => { const f = document.getElementById('flags'); return f.scrollWidth <= f.clientWidth }"
    )


def _open_gallery_run(page: Any, base: str, example: str) -> None:
    page.goto(f"{base}/watch.html?example={example}")
    page.wait_for_selector("body.is-ready, body.is-failed", timeout=180_000)
    assert page.locator("#status").inner_text() == "", page.locator("#status").inner_text()


@pytest.mark.parametrize("example", ["watch-sigmoid-mlp", "watch-relu-residual"])
def test_a_gallery_run_opens_scrubs_and_folds_its_layers(
    page: Any, run_server: str, screenshots: Path, example: str
) -> None:
    _open_gallery_run(page, run_server, example)
    slider = page.get_by_role("slider", name="Step", exact=True)
    assert slider.get_attribute("max") == "49" and slider.input_value() == "49"
    assert page.get_by_role("combobox", name="Training run").input_value() == example
    last = _fills(page)
    slider.fill("0")
    assert _fills(page) != last  # the colours follow the step
    # layers.0 … layers.7 folded into one heatmap: a row per layer, a column per logged step
    heat = page.locator('#blocks canvas[data-prefix="layers."]')
    assert heat.get_attribute("data-rows") == "8" and heat.get_attribute("data-cols") == "50"
    first_layer, last_layer = _heat(page, "layers.", 0, 0), _heat(page, "layers.", 7, 0)
    flags = [b.get_attribute("aria-label") for b in page.locator("#flags button").all()]
    if example == "watch-sigmoid-mlp":
        assert flags[0] == "vanishing · step 0 · layers.0/AccumulateGrad#weight"
        assert first_layer != last_layer  # the vanished gradient is another colour than the last layer's
        # the flags grouped by kind, a button per flagged step: layers.0–4 all stall at step 4
        assert page.locator("#flags .watch-flag-kind-name").all_inner_texts() == ["vanishing", "stalled (14)"]
        assert flags[1] == "stalled · step 4 · layers.0.weight and 9 more"
    else:
        assert not [f for f in flags if f.startswith("vanishing")]
    assert _flags_fit(page)
    page.screenshot(path=str(screenshots / f"{example}-1440.png"))
    page.set_viewport_size({"width": 1280, "height": 720})
    assert _flags_fit(page)
    page.screenshot(path=str(screenshots / f"{example}-1280.png"))
    # a click on a heatmap cell goes to that step and that layer's node
    box = heat.bounding_box()
    page.mouse.click(box["x"] + LABEL_W + 2, box["y"] + 3 * CELL_H + 4)
    assert slider.input_value() == "0"
    assert page.locator("#inspector h2").inner_text() == "layers.3/AccumulateGrad#weight"
    if example != "watch-sigmoid-mlp":
        return
    # the flag goes to its step and node; the step's saved full trace opens in the player
    slider.fill("20")
    page.get_by_role("button", name=re.compile(r"^vanishing · step 0")).click()
    assert slider.input_value() == "0"
    assert (
        page.locator(".watch-node.is-selected").get_attribute("data-key") == "layers.0/AccumulateGrad#weight"
    )
    with page.expect_download() as saved:
        page.get_by_role("button", name="Download").click()
    run_file = Path(saved.value.path())
    page.get_by_role("button", name=re.compile(r"^Open step 0 in the player")).click()
    page.wait_for_url(re.compile(r"/\?handoff=trace"))
    page.wait_for_selector("body.is-ready", timeout=60_000)
    assert int(page.evaluate("() => document.body.dataset.nodes")) > 30
    assert "step 0" in page.locator("#example option:checked").inner_text()
    page.screenshot(path=str(screenshots / "watch-sigmoid-mlp-step0-in-player-1280.png"))
    assert page.locator("#minimap").is_visible()
    assert not nodes_under_minimap(page), nodes_under_minimap(page)
    # the player's Open, given the run's file, hands it to the run view
    page.locator("#open-trace-file").set_input_files(str(run_file))
    page.wait_for_url(re.compile(r"/watch\.html\?handoff=run"))
    page.wait_for_selector("body.is-ready", timeout=60_000)
    assert page.locator("#flags button").first.get_attribute("aria-label") == flags[0]
    assert slider.get_attribute("max") == "49"
    # the run view's Open reads a file the player's way (off the page, its size checked first) and
    # shows a run in place; a file that is no run or trace is refused, the run shown left as it is
    page.locator("#open-run-file").set_input_files(str(run_file))
    page.get_by_text(f"A run opened from the file {run_file.name}, read in this browser.").wait_for()
    assert page.url.endswith("/watch.html?handoff=run")
    assert page.locator("#flags button").first.get_attribute("aria-label") == flags[0]
    bad = run_file.with_name("not-json.json")
    bad.write_text("{not json")
    page.locator("#open-run-file").set_input_files(str(bad))
    page.get_by_text("not-json.json cannot be opened: it is not JSON").wait_for()
    assert slider.get_attribute("max") == "49"


def test_a_pasted_program_that_watches_opens_its_run(page: Any, run_server: str, screenshots: Path) -> None:
    program = get_json(run_server + "/api/v1/program-examples/watch-relu-residual")["python"]
    page.set_viewport_size({"width": 1280, "height": 720})
    open_example(page, run_server, "two-layer-linear")
    gallery = page.get_by_role("link", name=re.compile(r"^Training runs"))
    assert gallery.get_attribute("href") == "/watch.html?example=watch-sigmoid-mlp"
    page.screenshot(path=str(screenshots / "player-training-runs-link-1280.png"))
    page.get_by_role("tab", name="PyTorch").click()
    page.get_by_role("textbox", name="PyTorch").fill(program)
    page.get_by_role("button", name="Run").click()
    link = page.get_by_role("link", name=re.compile(r"^Open its training run: 50 logged steps, 0 flags"))
    link.wait_for(timeout=180_000)
    # the player draws the first logged step's full trace
    page.wait_for_function("() => Number(document.body.dataset.nodes) > 30", timeout=60_000)
    link.click()
    page.wait_for_url(re.compile(r"/watch\.html\?program="))
    page.wait_for_selector("body.is-ready", timeout=60_000)
    assert page.get_by_role("slider", name="Step", exact=True).get_attribute("max") == "49"


def test_a_run_in_a_notebook_cell_draws_offline(page: Any, sigmoid_run: Path, screenshots: Path) -> None:
    """What a notebook shows for a cell ending with the run: the run view in an iframe, its code
    and the run inside the cell (no server), unpacked by the browser."""
    import gradtrace
    from gradtrace.render.run_page import run_notebook_html

    with gradtrace.load_run(sigmoid_run) as run:
        cell = run_notebook_html(run)
    assert len(cell) < 200_000
    page.set_content(f"<!doctype html><body style='margin:0'>{cell}</body>")
    frame = page.frame_locator("iframe.gradtrace-run")
    frame.locator("body.is-ready").wait_for(timeout=30_000)
    slider = frame.get_by_role("slider", name="Step", exact=True)
    assert slider.get_attribute("max") == "11"
    assert frame.locator('#blocks canvas[data-prefix="layers."]').get_attribute("data-rows") == "8"
    assert frame.get_by_role("button", name=re.compile(r"^vanishing · step 0")).count() == 1
    assert frame.locator("#open-trace").is_hidden()  # no player in a notebook cell
    page.screenshot(path=str(screenshots / "watch-run-notebook.png"))
