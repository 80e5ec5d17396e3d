"""A graph of several hundred nodes: collapsed by module by default, still exact, expandable,
and loaded in bounded time (the layout runs in ELK's Web Worker)."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from e2e_helpers import drawn_states, expected_states, post_json, wait_step

pytestmark = [pytest.mark.browser, pytest.mark.slow]
LAYERS = 80


def deep_spec() -> dict[str, Any]:
    lines = [f"h{i + 1} = tanh(l{i}({'x' if i == 0 else f'h{i}'}))" for i in range(LAYERS)]
    return {
        "spec_version": 1,
        "title": f"{LAYERS}-layer tanh MLP",
        "modules": {f"l{i}": {"type": "Linear", "in_features": 4, "out_features": 4} for i in range(LAYERS)},
        "inputs": {"x": {"shape": [2, 4], "init": "randn"}},
        "forward": [*lines, f"loss = h{LAYERS}.sum()"],
    }


def test_large_graph_collapses_by_module_and_stays_exact(page: Any, live_server: str) -> None:
    spec = deep_spec()
    trace = post_json(live_server + "/api/v1/trace", spec)
    assert len(trace["graph"]["nodes"]) > 400
    page.goto(live_server + "/#example=two-layer-linear")
    page.wait_for_selector("body.is-ready", timeout=60000)
    page.get_by_role("textbox", name="Spec").fill(json.dumps(spec, indent=2))
    started = time.monotonic()
    page.get_by_role("button", name="Run").click()
    page.wait_for_selector('#graph .gt-node--module[data-module="l0"]', timeout=90000)
    page.wait_for_selector(f'body[data-nodes="{len(trace["graph"]["nodes"])}"]', state="attached")
    elapsed = time.monotonic() - started
    modules = page.locator("#graph .gt-node--module").count()
    assert modules == LAYERS
    drawn = drawn_states(page)
    assert len(drawn) < len(trace["graph"]["nodes"]) / 2
    # Exactness survives collapsing: every drawn node follows the rule at a backward step.
    b = next(p for p in trace["passes"] if p["phase"] == "backward")
    step = (b["first_seq"] + b["last_seq"]) // 2
    page.get_by_label("Timeline").fill(str(step))
    wait_step(page, step)
    expected = expected_states(trace, step)
    drawn = drawn_states(page)
    assert drawn == {k: expected[k] for k in drawn}
    # Expand a collapsed module from the keyboard (focus, Enter, the inspector's button):
    # its nodes come back, with their states.
    page.locator('#graph .gt-node--module[data-module="l3"]').focus()
    page.keyboard.press("Enter")
    page.get_by_role("region", name="Inspector").get_by_role("button", name="Expand l3").click()
    page.wait_for_selector('#graph .gt-group[data-module="l3"]', timeout=60000)
    members = {n["id"] for n in trace["graph"]["nodes"] if n.get("module") == "l3"}
    drawn = drawn_states(page)
    assert members <= set(drawn)
    assert drawn == {k: expected[k] for k in drawn}
    print(f"large graph: {len(trace['graph']['nodes'])} nodes, {LAYERS} modules, shown in {elapsed:.1f} s")
    assert elapsed < 60


def test_expanded_large_graph_culls_off_screen_but_exports_everything(
    page: Any, live_server: str, tmp_path: Any
) -> None:
    spec = deep_spec()
    trace = post_json(live_server + "/api/v1/trace", spec)
    ids = {n["id"] for n in trace["graph"]["nodes"]}
    page.goto(live_server + "/#example=two-layer-linear&collapsed=-")
    page.wait_for_selector("body.is-ready", timeout=60000)
    page.get_by_role("textbox", name="Spec").fill(json.dumps(spec, indent=2))
    page.get_by_role("button", name="Run").click()
    page.wait_for_selector(f'body[data-nodes="{len(ids)}"]', state="attached", timeout=90000)
    b = next(p for p in trace["passes"] if p["phase"] == "backward")
    step = b["first_seq"] + 10
    page.get_by_label("Timeline").fill(str(step))
    wait_step(page, step)
    # Only what is near the screen is in the DOM (Chromium re-lays out a whole SVG on any change).
    attached = drawn_states(page)
    assert 0 < len(attached) < len(ids) / 2
    expected = expected_states(trace, step)
    assert attached == {k: expected[k] for k in attached}
    # The camera followed the running node: it is on screen.
    running = [k for k, v in expected.items() if v == "active"]
    assert running and all(k in attached for k in running)
    # The SVG export still holds every node, in this step's states.
    page.locator("#export-menu summary").click()
    with page.expect_download() as dl:
        page.get_by_role("button", name="SVG", exact=True).click()
    path = tmp_path / "big.svg"
    dl.value.save_as(path)
    ns = {"s": "http://www.w3.org/2000/svg"}
    exported = {
        g.get("data-node-id"): g.get("data-state")
        for g in ET.parse(path).getroot().iterfind(".//s:g[@data-node-id]", ns)
    }
    assert exported == expected
