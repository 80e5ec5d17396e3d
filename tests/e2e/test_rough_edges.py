"""Rough edges a newcomer hit first, each checked in real Chromium at the sizes they were seen.

Hiding the editor: the graph takes the editor's width (it used to get none: the hidden panel
left the grid and the graph slid into the editor's 0 px column).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import pytest
from e2e_helpers import fmt4, get_json, open_example, post_json

from gradtrace.trace import tensor_array

pytestmark = pytest.mark.browser

SIZES = [(1280, 720), (1440, 900), (1920, 1080)]


@pytest.mark.parametrize(("width", "height"), SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_hiding_the_editor_gives_the_graph_its_width(
    page: Any, live_server: str, screenshots: Path, width: int, height: int
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    open_example(page, live_server, "two-layer-linear")
    graph = page.locator(".graph-panel")
    side = page.locator(".side-panel")
    before = graph.bounding_box()
    page.get_by_role("button", name="Editor").click()
    assert page.get_by_role("button", name="Editor").get_attribute("aria-expanded") == "false"
    assert page.locator("#editor-panel").is_hidden()
    page.wait_for_function(
        "(w) => document.querySelector('.graph-panel').getBoundingClientRect().width > w + 200",
        arg=before["width"],
    )
    after = graph.bounding_box()
    right = side.bounding_box()
    # The graph starts at the left edge and reaches the side panel; the side panel keeps its size.
    assert after["x"] == pytest.approx(0, abs=1)
    assert after["x"] + after["width"] == pytest.approx(right["x"], abs=1)
    assert right["x"] + right["width"] == pytest.approx(width, abs=1)
    assert 260 <= right["width"] <= 341
    assert after["height"] == pytest.approx(before["height"], abs=1)
    # The graph is re-framed into the wider panel: every node is inside it.
    nodes = page.locator("#graph .gt-node").evaluate_all(
        "ns => ns.map(n => { const r = n.getBoundingClientRect(); return [r.left, r.right, r.width]; })"
    )
    assert nodes and all(w > 0 for _, _, w in nodes)
    assert min(left for left, _, _ in nodes) >= after["x"] - 1
    assert max(r for _, r, _ in nodes) <= after["x"] + after["width"] + 1
    page.screenshot(path=str(screenshots / f"editor-hidden-{width}x{height}.png"))
    # And back: the editor returns with its own column.
    page.get_by_role("button", name="Editor").click()
    assert page.locator("#editor-panel").is_visible()
    page.wait_for_function(
        "(w) => Math.abs(document.querySelector('.graph-panel').getBoundingClientRect().width - w) < 2",
        arg=before["width"],
    )


COMPARE_SIZES = [(1280, 720), (1440, 900)]


@pytest.mark.parametrize(("width", "height"), COMPARE_SIZES, ids=[f"{w}x{h}" for w, h in COMPARE_SIZES])
def test_compare_table_breaks_no_name_or_number(
    page: Any, live_server: str, screenshots: Path, width: int, height: int
) -> None:
    """The compare table used to sit in the 260 px column and wrap mid-word (`lin.weig ht`)."""
    page.set_viewport_size({"width": width, "height": height})
    open_example(page, live_server, "full-backward-hook-x2", "&compare=full-backward-hook")
    page.wait_for_selector("body[data-compare=ready]", timeout=60000)
    cells = page.locator("#compare-panel .compare-grads tbody").first.evaluate(
        """tbody => [...tbody.querySelectorAll('th, td')].map(cell => {
             const range = document.createRange();
             range.selectNodeContents(cell);
             const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
             return [cell.textContent, lines.size];
           })"""
    )
    assert len(cells) >= 5 * 4
    # A cell without a space (a name, a one-number summary, a factor) sits on one line.
    broken = [text for text, lines in cells if " " not in text.strip() and lines > 1]
    assert not broken, broken
    assert any(text == "f1.f.weight" for text, _ in cells)
    panel = page.locator("#compare-panel")
    assert panel.evaluate("p => p.scrollWidth <= p.clientWidth + 1")
    assert page.locator(".graph-panel").bounding_box()["width"] >= width * 0.4
    page.screenshot(path=str(screenshots / f"compare-table-{width}x{height}.png"))


@pytest.mark.parametrize("example", ["sgd-training-step", "two-losses"])
def test_timeline_bands_show_whole_words_or_nothing(
    page: Any, live_server: str, screenshots: Path, example: str
) -> None:
    """At 1280×720 the bands read `forwar…`: each now shows the longest of its label, a short
    form (`fwd #1`, `bwd #2`) or its number that fits whole; the full label stays its name."""
    page.set_viewport_size({"width": 1280, "height": 720})
    open_example(page, live_server, example)
    bands = page.locator("#bands .band")
    shown = bands.evaluate_all(
        "bs => bs.map(b => [b.getAttribute('aria-label'), b.title, b.textContent, b.scrollWidth <= b.clientWidth])"
    )
    assert len(shown) >= 3
    for name, title, text, fits in shown:
        assert name == title and fits, (name, text)
        short = (
            name.split(" of ")[0].split(" lr=")[0].replace("forward ", "fwd ").replace("backward ", "bwd ")
        )
        assert text in (name, short, "#" + name.split("#")[-1].split()[0] if "#" in name else "", ""), (
            name,
            text,
        )
    assert any(text for _, _, text, _ in shown), "the wide bands keep a label"
    page.get_by_role("button", name=shown[1][0], exact=True).click()  # still reachable by its full name
    page.locator(".scrubber").screenshot(path=str(screenshots / f"bands-{example}-1280.png"))


@pytest.mark.parametrize(("width", "height"), SIZES[:2], ids=[f"{w}x{h}" for w, h in SIZES[:2]])
def test_example_description_shows_whole_lines_and_scrolls_to_the_rest(
    page: Any, live_server: str, screenshots: Path, width: int, height: int
) -> None:
    """conv-net's description was cut through its fifth line at both sizes: the box now holds
    whole lines only, and the rest is reached by scrolling (its last line comes into view)."""
    page.set_viewport_size({"width": width, "height": height})
    open_example(page, live_server, "conv-net")
    box = page.locator("#example-description")
    height_px, line_px, scroll_px = box.evaluate(
        "el => [el.clientHeight, parseFloat(getComputedStyle(el).lineHeight), el.scrollHeight]"
    )
    assert height_px % line_px == 0 and height_px // line_px >= 4, (height_px, line_px)
    assert scroll_px > height_px, "conv-net's description is longer than the box: the test needs a long one"
    box.evaluate("el => { el.scrollTop = el.scrollHeight; }")
    assert box.evaluate("el => Math.abs(el.scrollTop + el.clientHeight - el.scrollHeight) <= 1")
    box.screenshot(path=str(screenshots / f"description-conv-net-{width}.png"))


def test_question_mark_opens_the_keyboard_shortcuts(page: Any, live_server: str, screenshots: Path) -> None:
    open_example(page, live_server, "two-layer-linear")
    dialog = page.get_by_role("dialog", name="Keyboard shortcuts")
    # Typed in the editor, `?` is text, not a command.
    editor = page.get_by_role("textbox", name="Spec")
    editor.focus()
    page.keyboard.press("End")
    page.keyboard.type("?")
    assert dialog.is_hidden() and editor.input_value().endswith("?")
    page.locator("#graph").click(position={"x": 5, "y": 5})
    page.keyboard.press("?")
    dialog.wait_for()
    text = dialog.inner_text()
    for key, action in (
        ("Space", "Play / pause"),
        ("Home", "First / last event"),
        ("Esc", "Clear the selection"),
    ):
        assert key in text and action in text
    page.screenshot(path=str(screenshots / "keyboard-shortcuts.png"))
    # The shortcuts it lists work once it is closed: → steps one event.
    page.keyboard.press("Escape")
    assert dialog.is_hidden()
    before = page.locator("#counter").inner_text().split("/")[0].strip()
    page.keyboard.press("ArrowRight")
    assert page.locator("#counter").inner_text().split("/")[0].strip() == str(int(before) + 1)
    # The ? button opens it too.
    page.get_by_role("button", name="Keyboard shortcuts").click()
    dialog.wait_for()
    dialog.get_by_role("button", name="Close").click()
    assert dialog.is_hidden()


def test_share_copies_a_link_that_keeps_the_view(
    page: Any, context: Any, live_server: str, screenshots: Path
) -> None:
    """Share: Copy buttons put the link and the embed snippet on the clipboard; the link reopens
    the same view (compare, step, node, collapsed); an untouched example reopens as itself."""
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    example = "full-backward-hook-x2"
    spec = get_json(f"{live_server}/api/v1/examples/{example}")
    trace = post_json(live_server + "/api/v1/trace", spec)
    module = next(m["path"] for m in trace["graph"]["modules"] if m["path"])
    node = next(n["id"] for n in trace["graph"]["nodes"] if not (n.get("module") or "").startswith(module))
    step = next(p["first_seq"] for p in trace["passes"] if p["phase"] == "backward") + 2
    view = {"compare": "full-backward-hook", "step": str(step), "node": node, "collapsed": module}
    open_example(page, live_server, example, "&" + urlencode(view))
    page.wait_for_selector("body[data-compare=ready]", timeout=60000)
    page.get_by_role("button", name="Share").click()
    dialog = page.get_by_role("dialog", name="Share")
    page.wait_for_function("() => document.getElementById('share-iframe').value !== ''")
    link = page.locator("#share-url").input_value()
    assert link.startswith(f"{live_server}/#")
    shared = parse_qs(urlparse(link).fragment)
    assert shared == {"example": [example], **{k: [v] for k, v in view.items()}}
    # Sharing does not turn the page into an edit: its own URL still names the example.
    assert "spec=" not in page.evaluate("location.hash")
    for button, field in (("Copy link", "#share-url"), ("Copy embed", "#share-iframe")):
        dialog.get_by_role("button", name=button).click()
        expected = page.locator(field).input_value()
        page.wait_for_function("(t) => navigator.clipboard.readText().then(c => c === t)", arg=expected)
        assert dialog.get_by_role("status").inner_text().startswith("Copied the ")
    assert "<iframe" in page.evaluate("navigator.clipboard.readText()")
    dialog.screenshot(path=str(screenshots / "share-dialog.png"))
    # The link reopens the view: the example (not "Edited spec"), the step, the node, the fold
    # and the comparison.
    other = context.new_page()
    other.goto(link)
    other.wait_for_selector("body.is-ready", timeout=60000)
    other.wait_for_selector("body[data-compare=ready]", timeout=60000)
    assert other.locator("#example").input_value() == example
    assert other.locator("#example option[data-edited]").count() == 0
    assert other.locator("#counter").inner_text().split("/")[0].strip() == str(step)
    reopened = parse_qs(other.evaluate("location.hash")[1:])
    assert {k: reopened.get(k) for k in view} == {k: [v] for k, v in view.items()}
    assert other.locator(f'#graph [data-node-id="{node}"].gt-selected').count() == 1
    other.close()


# Every shown text of a kind, as [kind, text, left, top, right, bottom] in page pixels.
SHOWN_TEXTS = """([badges, labels]) => {
  const shown = (el) => el.checkVisibility({ opacityProperty: true, visibilityProperty: true })
    && getComputedStyle(el).opacity !== '0';
  const boxes = (sel) => [...document.querySelectorAll(sel)].filter(shown).map(el => {
    const r = el.getBoundingClientRect();
    return [el.textContent, r.left, r.top, r.right, r.bottom];
  }).filter(b => b[3] > b[1] && b[4] > b[2]);
  return [boxes(badges), boxes(labels)];
}"""


def overlaps(badges: list[Any], labels: list[Any], slack: float = 1.0) -> list[tuple[str, str]]:
    """The (badge, label) pairs whose boxes intersect by more than `slack` pixels both ways."""
    out = []
    for b in badges:
        for lab in labels:
            w = min(b[3], lab[3]) - max(b[1], lab[1])
            h = min(b[4], lab[4]) - max(b[2], lab[2])
            if w > slack and h > slack:
                out.append((b[0], lab[0]))
    return out


LABELS = "#graph .gt-group-title, #graph .gt-node > text:not(.gt-done-mark), #graph .gt-sublabel"
COMPARE_PAIRS = [
    ("full-backward-hook-x2", "full-backward-hook"),
    ("deprecated-backward-hook", "full-backward-hook"),
    ("sgd-training-step", "sgd-before-step"),
]


@pytest.mark.parametrize(("width", "height"), COMPARE_SIZES, ids=[f"{w}x{h}" for w, h in COMPARE_SIZES])
@pytest.mark.parametrize(("example", "other"), COMPARE_PAIRS, ids=[p[0] for p in COMPARE_PAIRS])
def test_compare_badges_cover_no_title_or_label(
    page: Any, live_server: str, screenshots: Path, width: int, height: int, example: str, other: str
) -> None:
    """Compare mode: the "only here" and factor badges (×2, ×−0.4) sit clear of every module title
    and node label, measured on the drawn boxes at the end of the trace (everything shown)."""
    page.set_viewport_size({"width": width, "height": height})
    open_example(page, live_server, example, f"&compare={other}")
    page.wait_for_selector("body[data-compare=ready]", timeout=60000)
    page.locator("#graph").click(position={"x": 5, "y": 5})
    page.keyboard.press("End")
    page.wait_for_timeout(400)
    badges, labels = page.evaluate(SHOWN_TEXTS, ["#graph .gt-compare-badge-text", LABELS])
    assert badges, "the comparison marks the graph"
    assert not overlaps(badges, labels)
    page.screenshot(path=str(screenshots / f"compare-badges-{example}-{width}x{height}.png"))


@pytest.mark.parametrize("theme", ["dark", "light"])
@pytest.mark.parametrize("example", ["shared-weights-fan-in", "retain-graph-accumulation"])
def test_fan_in_badges_cover_no_label(
    page: Any, live_server: str, screenshots: Path, theme: str, example: str
) -> None:
    """The `+= ×2` badge of a node where gradients meet sits above its box, clear of its label
    (AccumulateGrad's included) and of every other label and module title, at every step it shows."""
    trace = post_json(live_server + "/api/v1/trace", get_json(f"{live_server}/api/v1/examples/{example}"))
    backward = [e["seq"] for e in trace["events"] if e["phase"] == "backward"]
    page.set_viewport_size({"width": 1440, "height": 900})
    open_example(page, live_server, example, f"&theme={theme}")
    seen = 0
    for step in backward:
        page.evaluate(  # the scrubber, as a drag would (a written hash can race the viewer's own)
            "(s) => { const r = document.getElementById('timeline'); r.value = s; r.dispatchEvent(new Event('input')); }",
            step,
        )
        page.wait_for_selector(f'body[data-step="{step}"]', state="attached", timeout=15000)
        badges, labels = page.evaluate(SHOWN_TEXTS, ["#graph [data-fanin] text", LABELS])
        assert not overlaps(badges, labels), (step, badges)
        seen += len(badges)
    assert seen, "the example shows a += badge"
    page.screenshot(path=str(screenshots / f"fan-in-{example}-{theme}.png"))


def test_per_sample_heatmap_has_axes_and_a_colour_scale(
    page: Any, live_server: str, screenshots: Path
) -> None:
    """The heatmap names its axes (token across, sample down, each row and column numbered at
    its cells) and shows its colour scale from 0 to the largest ‖δ ⊗ a‖."""
    example = "mlp-hooks-reconstruction"
    trace = post_json(live_server + "/api/v1/trace", get_json(f"{live_server}/api/v1/examples/{example}"))
    record = next(r for r in trace["analyses"]["per_sample"] if r["weight"] == "fc1.weight")
    (call,) = record["calls"]
    batch, tokens = call["sample_dims"]
    norms = tensor_array(call["position_norms"], trace["tensor_data"])
    leaf = next(
        n for n in trace["graph"]["nodes"] if n["kind"] == "tensor" and n.get("tensor") == "fc1.weight"
    )
    page.set_viewport_size({"width": 1280, "height": 720})
    open_example(page, live_server, example, f"&node={leaf['id']}")
    section = page.locator('[data-section="per-sample"]')
    section.wait_for(timeout=15000)
    assert section.locator(".persample-axis-x").inner_text().startswith("token →")
    assert section.locator(".persample-axis-y").inner_text().startswith("sample ↓")
    xs = section.locator(".persample-ticks-x span")
    ys = section.locator(".persample-ticks-y span")
    assert xs.all_inner_texts() == [str(i) for i in range(tokens)]
    assert ys.all_inner_texts() == [str(i) for i in range(batch)]
    # Each number sits at its column's / row's cells.
    cells = section.locator(".persample-grid .cell")
    for t in range(tokens):
        tick, cell = xs.nth(t).bounding_box(), cells.nth(t).bounding_box()
        assert abs((tick["x"] + tick["width"] / 2) - (cell["x"] + cell["width"] / 2)) < 2
    for b in range(batch):
        tick, cell = ys.nth(b).bounding_box(), cells.nth(b * tokens).bounding_box()
        assert abs((tick["y"] + tick["height"] / 2) - (cell["y"] + cell["height"] / 2)) < 2
        assert tick["x"] + tick["width"] <= cell["x"]
    scale = section.get_by_role("img", name=re.compile("colour scale"))
    ends = scale.locator(".num").all_inner_texts()
    assert ends == ["0", fmt4(float(norms.max()))]
    bar = scale.locator(".persample-scale-bar").bounding_box()
    assert bar["width"] >= 60 and bar["height"] >= 6
    # the darkest cell is the largest norm
    alphas = cells.evaluate_all(
        "cs => cs.map(c => parseFloat(getComputedStyle(c).backgroundColor.split(',')[3]))"
    )
    assert int(max(range(len(alphas)), key=alphas.__getitem__)) == int(norms.reshape(-1).argmax())
    section.screenshot(path=str(screenshots / "per-sample-axes.png"))


def format_bytes(n: int) -> str:
    """The viewer's byte format (memory.js formatBytes), for the sizes the examples save."""
    return f"{n} B" if n < 1024 else f"{n / 1024:.2f} KiB"


@pytest.mark.parametrize("example", ["two-layer-linear", "retain-graph-accumulation"])
def test_bottom_band_at_1280x720_is_readable(
    page: Any, live_server: str, screenshots: Path, example: str
) -> None:
    """At 1280×720 the bottom band fits: the controls, three whole event rows, and a memory strip
    whose plot says what its axes are (0 B up to the peak, events 0 to the last)."""
    trace = post_json(live_server + "/api/v1/trace", get_json(f"{live_server}/api/v1/examples/{example}"))
    peak = trace["analyses"]["memory"]["peak_bytes"]
    page.set_viewport_size({"width": 1280, "height": 720})
    open_example(page, live_server, example)
    assert page.evaluate("document.documentElement.scrollHeight <= innerHeight + 1")
    # The top bar is one row (two rows took the graph 40 px), Editor included.
    bar = page.locator(".topbar").bounding_box()
    assert bar["height"] <= 48
    assert page.get_by_role("button", name="Editor").bounding_box()["y"] < bar["y"] + bar["height"]
    band = page.locator(".transport-panel").bounding_box()
    assert band["y"] + band["height"] <= 720 + 0.5
    for name in ("Restart", "Step back", "Play", "Step forward"):
        box = page.get_by_role("button", name=name, exact=True).bounding_box()
        assert box["width"] >= 32 and box["height"] >= 24 and box["y"] + box["height"] <= 720
    events = page.locator(".events").bounding_box()
    rows = page.locator(".events li, .events tr, .events [role=row]").evaluate_all(
        "rs => rs.map(r => r.getBoundingClientRect()).map(r => [r.top, r.bottom])"
    )
    whole = [r for r in rows if r[0] >= events["y"] - 0.5 and r[1] <= events["y"] + events["height"] + 0.5]
    assert len(whole) >= 3, rows
    plot = page.locator(".memory-plotbox").bounding_box()
    assert plot["height"] >= 26 and plot["width"] >= 200
    labels = {}
    for cls in ("peak", "zero", "events"):
        axis = page.locator(f".memory-axis-{cls}")
        box = axis.bounding_box()
        assert box["x"] >= plot["x"] and box["x"] + box["width"] <= plot["x"] + plot["width"] + 0.5
        assert box["y"] >= plot["y"] and box["y"] + box["height"] <= plot["y"] + plot["height"] + 0.5
        labels[cls] = (axis.inner_text(), box)
    assert labels["peak"][0] == format_bytes(peak)
    assert labels["zero"][0] == "0 B"
    assert labels["events"][0] == f"events 0 → {len(trace['events']) - 1}"
    assert labels["peak"][1]["y"] + labels["peak"][1]["height"] <= labels["zero"][1]["y"]  # up is more
    title = page.locator(".memory-title")
    assert title.inner_text() == "saved tensors" and title.is_visible()
    page.locator(".transport-panel").screenshot(path=str(screenshots / f"bottom-band-{example}-1280x720.png"))
