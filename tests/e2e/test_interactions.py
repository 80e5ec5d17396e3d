"""The viewer's interactions in real Chromium: inspector numbers (seed 002), errors at the
line the API names, links that reopen the same view, embed mode, exports, offline embedding,
graph <-> timeline links, the inserted-node toggle and module collapse."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import (
    docs_server,
    drawn_states,
    expected_states,
    fmt4,
    get_json,
    open_example,
    post_json,
    wait_step,
)

pytestmark = pytest.mark.browser
SEED002 = "full-backward-hook"


def node_where(trace: dict[str, Any], op: str) -> dict[str, Any]:
    return next(n for n in trace["graph"]["nodes"] if n.get("op") == op)


def post_seq(trace: dict[str, Any], node_id: str) -> int:
    return next(e["seq"] for e in trace["events"] if e["kind"] == "node_post" and e.get("node") == node_id)


def test_inspector_shows_seed002_numbers(page: Any, live_server: str, example_traces: dict[str, Any]) -> None:
    trace = example_traces[SEED002]
    hook_node = node_where(trace, "BackwardHookFunctionBackward")
    hook_nodes = [n for n in trace["graph"]["nodes"] if n.get("op") == "BackwardHookFunctionBackward"]
    # The inserted node at f1's input runs after the module's backward hook fired.
    node = max(hook_nodes, key=lambda n: post_seq(trace, n["id"]))
    step = post_seq(trace, node["id"])
    open_example(page, live_server, SEED002, f"&step={step}")
    wait_step(page, step)
    page.get_by_role("button", name="Fit").click()  # the whole graph: every node clickable
    page.locator(f'#graph [data-node-id="{node["id"]}"]').click()
    inspector = page.get_by_role("region", name="Inspector")
    inspector.get_by_text("BackwardHookFunctionBackward").first.wait_for()
    text = inspector.inner_text()
    assert "\u22120.4080" in text  # ∂L/∂x1: grad_input of the hooked module
    assert "\u22121.848" in text  # ∂L/∂y: grad_output, 4 significant digits on screen
    titles = inspector.locator(".num").evaluate_all("els => els.map(e => e.title)")
    assert any(t.startswith("\u22121.8476") for t in titles), titles  # more digits on hover
    assert hook_node["inserted"] is True
    assert (
        page.locator(f'#graph [data-node-id="{node["id"]}"]').get_attribute("class").count("gt-inserted") == 1
    )


def test_node_click_marks_its_events_and_event_click_selects_node(
    page: Any, live_server: str, example_traces: dict[str, Any]
) -> None:
    trace = example_traces["two-layer-linear"]
    last = len(trace["events"]) - 1
    open_example(page, live_server, "two-layer-linear", f"&step={last}")
    target = next(n for n in trace["graph"]["nodes"] if n["kind"] == "op" and n.get("op") != "AccumulateGrad")
    page.get_by_role("button", name="Fit").click()  # the whole graph: every node clickable
    page.locator(f'#graph [data-node-id="{target["id"]}"]').click()
    marked = page.locator("#events li.is-marked").evaluate_all("els => els.map(e => Number(e.dataset.seq))")
    expected = [
        e["seq"]
        for e in trace["events"]
        if e.get("node") == target["id"] or (not e.get("node") and e.get("target") == target["id"])
    ]
    assert marked == expected
    # And back: clicking an event row seeks there and selects its node.
    row = next(e for e in trace["events"] if e["kind"] == "node_pre")
    page.locator(f'#events li[data-seq="{row["seq"]}"]').click()
    wait_step(page, row["seq"])
    assert page.locator("#graph .gt-selected").get_attribute("data-node-id") == row["node"]
    assert drawn_states(page)[row["node"]] == "active"


def test_invalid_spec_shows_the_api_message_at_its_line(page: Any, live_server: str) -> None:
    open_example(page, live_server, SEED002)
    editor = page.get_by_role("textbox", name="Spec")
    spec = json.loads(editor.input_value())
    spec["forward"][1] = "y = nosuchmodule(x1)"
    text = json.dumps(spec, indent=2)
    editor.fill(text)
    page.get_by_role("button", name="Run").click()
    error = page.locator("#spec-error")
    error.wait_for(state="visible")
    # The API's own message and path, shown at the line of that path in the text.
    req_err = None
    try:
        post_json(live_server + "/api/v1/trace", spec)
    except Exception as exc:  # urllib raises HTTPError with the JSON body
        req_err = json.loads(exc.read())["error"]  # type: ignore[attr-defined]
    assert req_err is not None and req_err["path"].startswith("/forward/1")
    assert req_err["message"] in error.inner_text()
    line = next(i + 1 for i, ln in enumerate(text.splitlines()) if "nosuchmodule" in ln)
    assert error.get_attribute("data-line") == str(line)
    assert page.locator(".gutter-line.has-error").inner_text() == str(line)
    # A JSON syntax error is caught before any request, at its line.
    editor.fill('{\n  "title": "x",\n  "forward": [\n}')
    page.get_by_role("button", name="Run").click()
    assert error.get_attribute("data-line") == "4"


def test_copied_url_reopens_the_same_view(
    page: Any, context: Any, live_server: str, example_traces: dict[str, Any]
) -> None:
    trace = example_traces["retain-graph-accumulation"]
    step = len(trace["events"]) * 2 // 3
    open_example(page, live_server, "retain-graph-accumulation")
    page.get_by_label("Timeline").fill(str(step))
    wait_step(page, step)
    leaf = next(n for n in trace["graph"]["nodes"] if n["kind"] == "tensor" and n["role"] == "parameter")
    page.get_by_role("button", name="Fit").click()  # the whole graph: every node clickable
    page.locator(f'#graph [data-node-id="{leaf["id"]}"]').click()
    page.wait_for_timeout(400)  # the hash is written on a short throttle
    url = page.url
    assert f"step={step}" in url and f"node={leaf['id']}" in url
    other = context.new_page()
    other.goto(url)
    other.wait_for_selector("body.is-ready", timeout=60000)
    wait_step(other, step)
    assert drawn_states(other) == drawn_states(page) == expected_states(trace, step)
    assert other.locator("#graph .gt-selected").get_attribute("data-node-id") == leaf["id"]
    assert (
        other.get_by_role("region", name="Inspector").inner_text()
        == page.get_by_role("region", name="Inspector").inner_text()
    )
    other.close()


def test_grad_accumulates_on_second_backward(
    page: Any, live_server: str, example_traces: dict[str, Any]
) -> None:
    trace = example_traces["retain-graph-accumulation"]
    writes = [e for e in trace["events"] if e["kind"] == "grad_write" and e["payload"].get("accumulated")]
    assert writes, "the example accumulates"
    w = writes[0]
    first = next(e for e in trace["events"] if e["kind"] == "grad_write" and e["node"] == w["node"])
    assert first["seq"] < w["seq"]
    chip = page.locator(f'#graph [data-leaf="{w["node"]}"] text')
    # After the first backward the chip shows the first .grad; on the second it shows the sum.
    open_example(page, live_server, "retain-graph-accumulation", f"&step={w['seq'] - 1}")
    wait_step(page, w["seq"] - 1)
    assert chip.inner_html() == ".grad " + fmt4(first["payload"]["after"]["values"][0])
    page.get_by_role("button", name="Step forward").click()
    wait_step(page, w["seq"])
    assert chip.inner_html() == ".grad " + fmt4(w["payload"]["after"]["values"][0])
    assert w["payload"]["after"]["values"][0] != first["payload"]["after"]["values"][0]
    fan = page.locator(f'#graph [data-fanin="{w["node"]}"]')
    assert fan.get_attribute("data-state") == "shown"  # the += badge


def test_share_and_embed_mode(
    page: Any, context: Any, live_server: str, example_traces: dict[str, Any]
) -> None:
    open_example(page, live_server, "two-layer-linear")
    page.get_by_role("button", name="Share").click()
    url = page.locator("#share-url")
    url.wait_for()
    for _ in range(100):  # the snippets fill in when POST /api/v1/specs answers
        if page.locator("#share-iframe").input_value():
            break
        page.wait_for_timeout(100)
    iframe_snippet = page.locator("#share-iframe").input_value()
    md = page.locator("#share-markdown").input_value()
    m = re.search(r'src="([^"]+/embed/([A-Za-z0-9_-]+))"', iframe_snippet)
    assert m, iframe_snippet
    assert "diagram.svg" in md
    embed_url, spec_id = m.group(1), m.group(2)
    # The snippet works as pasted: a docs page on another origin (a second little HTTP
    # server on loopback) shows the player inside its iframe.
    with docs_server(f"<!doctype html><h1>Docs</h1>{iframe_snippet}") as docs:
        host = context.new_page()
        host.goto(docs)
        host.frame_locator("iframe").locator("body.is-ready").wait_for(timeout=60000)
        host.close()
    embed = context.new_page()
    embed.goto(embed_url)
    embed.wait_for_selector("body.is-ready", timeout=60000)
    assert embed.locator("#spec").count() == 0  # the player without the editor
    link = embed.get_by_role("link", name=re.compile("open in gradtrace"))
    assert spec_id in link.get_attribute("href")
    trace = get_json(f"{live_server}/api/v1/specs/{spec_id}/trace")
    fwd_end = next(p["last_seq"] for p in trace["passes"] if p["phase"] == "forward")
    wait_step(embed, fwd_end)  # an embed opens on the whole forward graph
    embed.screenshot(path=str(Path(__file__).parent / "screenshots" / "embed.png"))
    embed.get_by_role("button", name="Restart").click()
    wait_step(embed, 0)
    embed.get_by_role("button", name="Step forward").click()
    wait_step(embed, 1)
    states = drawn_states(embed)
    assert states == {k: v for k, v in expected_states(trace, 1).items() if k in states}
    # The permalink reopens the full viewer with the saved spec.
    full = context.new_page()
    full.goto(url.input_value())
    full.wait_for_selector("body.is-ready", timeout=60000)
    assert json.loads(full.get_by_role("textbox", name="Spec").input_value())["title"] == trace["title"]
    embed.close()
    full.close()


def test_exports_svg_png_json(
    page: Any, live_server: str, example_traces: dict[str, Any], tmp_path: Path
) -> None:
    trace = example_traces["two-layer-linear"]
    open_example(page, live_server, "two-layer-linear", "&step=10")
    paths = {}
    for kind in ("SVG", "Animated SVG", "PNG", "JSON"):
        page.locator("#export-menu summary").click()
        with page.expect_download() as dl:
            page.get_by_role("button", name=kind, exact=True).click()
        paths[kind] = tmp_path / dl.value.suggested_filename
        dl.value.save_as(paths[kind])
    root = ET.parse(paths["SVG"]).getroot()
    assert root.tag.endswith("svg")
    ns = {"s": "http://www.w3.org/2000/svg"}
    node_ids = {g.get("data-node-id") for g in root.iterfind(".//s:g[@data-node-id]", ns)}
    # The picture of step 10: the nodes built so far (not yet created ones are left out).
    assert node_ids == {k for k, v in expected_states(trace, 10).items() if v != "hidden"}
    assert root.find("s:style", ns) is not None and ".gt-node" in root.find("s:style", ns).text
    animated = ET.parse(paths["Animated SVG"]).getroot()
    assert "@keyframes" in "".join(animated.itertext())
    png = paths["PNG"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000
    assert json.loads(paths["JSON"].read_text()) == trace


def test_embedded_data_makes_no_network_request(
    page: Any, live_server: str, example_traces: dict[str, Any]
) -> None:
    trace = example_traces["two-layer-linear"]
    html = (Path(__file__).resolve().parents[2] / "frontend" / "embed.html").read_text()
    data = json.dumps({"trace": trace, "layout": None, "mode": "embed"}).replace("</", "<\\/")
    # A precomputed layout skips ELK too: take it from a first load.
    html_with = html.replace(
        "</head>", f'<script type="application/json" id="gradtrace-data">{data}</script></head>'
    )
    requests: list[str] = []
    page.route(
        live_server + "/standalone.html", lambda r: r.fulfill(body=html_with, content_type="text/html")
    )
    page.on("request", lambda r: requests.append(r.url))
    page.goto(live_server + "/standalone.html")
    page.wait_for_selector("body.is-ready", timeout=60000)
    assert not [u for u in requests if "/api/" in u], requests
    page.get_by_role("button", name="Restart").click()
    wait_step(page, 0)
    page.get_by_role("button", name="Step forward").click()
    wait_step(page, 1)
    assert drawn_states(page) == expected_states(trace, 1)


def test_inserted_toggle_and_module_collapse(
    page: Any, live_server: str, example_traces: dict[str, Any]
) -> None:
    trace = example_traces[SEED002]
    inserted = {n["id"] for n in trace["graph"]["nodes"] if n["inserted"]}
    assert inserted
    last = len(trace["events"]) - 1
    open_example(page, live_server, SEED002, f"&step={last}")
    page.get_by_label("inserted nodes").uncheck()
    page.wait_for_selector(f'#graph [data-node-id="{next(iter(inserted))}"]', state="detached")
    drawn = drawn_states(page)
    assert set(drawn) == {n["id"] for n in trace["graph"]["nodes"]} - inserted
    assert drawn == {k: v for k, v in expected_states(trace, last).items() if k in drawn}
    # Double-click the f1 module box: it collapses into one node m:f1, and back. (Fit first:
    # the opening view of a graph taller than the panel shows its bottom, the loss.)
    page.locator("#fit").click()
    page.locator('#graph .gt-group[data-module="f1"] > .gt-group-title').dblclick()
    page.wait_for_selector('#graph .gt-node--module[data-module="f1"]')
    assert not any(
        (n.get("module") or "").startswith("f1")
        for n in trace["graph"]["nodes"]
        if n["id"] in drawn_states(page)
    )
    page.locator('#graph .gt-node--module[data-module="f1"]').dblclick()
    page.wait_for_selector('#graph .gt-group[data-module="f1"]')


def test_a_speed_the_list_does_not_offer_is_shown_not_left_blank(page: Any, live_server: str) -> None:
    open_example(page, live_server, "two-layer-linear", "&speed=8")
    assert page.locator("#speed option:checked").inner_text() == "8 events/s"
    texts = page.locator("#speed option").all_inner_texts()
    assert texts.index("8 events/s") == texts.index("5 events/s") + 1  # in its place by speed


def test_keyboard_space_plays_and_home_restarts(
    page: Any, live_server: str, example_traces: dict[str, Any]
) -> None:
    trace = example_traces["two-layer-linear"]
    open_example(page, live_server, "two-layer-linear", "&speed=60")
    page.locator("#graph").click(position={"x": 5, "y": 5})
    page.keyboard.press(" ")
    page.get_by_role("button", name="Pause").wait_for()
    page.keyboard.press(" ")
    page.get_by_role("button", name="Play").wait_for()
    page.keyboard.press("End")
    wait_step(page, len(trace["events"]) - 1)
    page.keyboard.press("Home")
    wait_step(page, 0)


def test_event_list_follows_fast_playback_and_lands_on_the_step(
    page: Any, live_server: str, example_traces: dict[str, Any]
) -> None:
    # At ≥ 15 events/s the list follows the current event a few times a second, not every frame;
    # once playback stops (paused, or at the end) it shows exactly the current step.
    trace = example_traces["tiny-attention"]
    open_example(page, live_server, "tiny-attention", "&speed=60&step=0")
    page.get_by_role("button", name="Play").click()
    page.wait_for_timeout(600)
    page.get_by_role("button", name="Pause").click()
    step = page.locator("body").get_attribute("data-step")
    assert 0 < int(step) < len(trace["events"]) - 1
    page.wait_for_selector(f'#events li.is-current[data-seq="{step}"]', timeout=2000)
    assert page.locator("#events li.is-current").count() == 1
    page.get_by_role("button", name="Play").click()
    wait_step(page, len(trace["events"]) - 1)
    page.wait_for_selector(f'#events li.is-current[data-seq="{len(trace["events"]) - 1}"]', timeout=2000)
    # Stepping by hand marks at once.
    page.get_by_role("button", name="Step back").click()
    assert page.locator("#events li.is-current").get_attribute("data-seq") == str(len(trace["events"]) - 2)
