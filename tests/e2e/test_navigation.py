"""Navigation in real Chromium: each load carries what it asked for.

Changing only the hash from one example to another, quickly, must end on the last one asked
for — its spec, its title in the select, its opening step, nothing selected — even though the
earlier loads were still in flight; a reload keeps that view. An edited spec, once run, is a
permalink in the hash that a reload reopens.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from e2e_helpers import open_example, post_json, wait_step

pytestmark = pytest.mark.browser
A, B, C = "two-layer-linear", "full-backward-hook", "tiny-attention"


def opening_step(trace: dict[str, Any]) -> int:
    return next(p["last_seq"] for p in trace["passes"] if p["phase"] == "forward")


def assert_shows(page: Any, example_id: str, trace: dict[str, Any], title: str) -> None:
    """The page shows `example_id` at its opening step, unselected, named in the select."""
    page.wait_for_selector(
        f'body[data-nodes="{len(trace["graph"]["nodes"])}"]', state="attached", timeout=60000
    )
    wait_step(page, opening_step(trace))
    page.wait_for_timeout(600)  # any overtaken load would land by now; the hash write settles
    assert page.locator("body").get_attribute("data-nodes") == str(len(trace["graph"]["nodes"]))
    assert page.locator("body").get_attribute("data-step") == str(opening_step(trace))
    assert page.locator("#example").input_value() == example_id
    assert page.locator("#example option:checked").inner_text() == title
    assert json.loads(page.get_by_role("textbox", name="Spec").input_value())["title"] == trace["title"]
    assert page.locator("#graph .gt-selected").count() == 0
    assert "Click a node" in page.get_by_role("region", name="Inspector").inner_text()
    drawn = page.locator("#graph .gt-node[data-node-id]").evaluate_all(
        "els => els.map(e => e.dataset.nodeId)"
    )
    assert set(drawn) <= {n["id"] for n in trace["graph"]["nodes"]}
    hash_ = page.evaluate("() => location.hash")
    assert f"example={example_id}" in hash_ and "node=" not in hash_


@pytest.mark.parametrize("hold_b", [False, True], ids=["as-served", "b-answers-last"])
def test_quick_hash_changes_end_on_the_last_example(
    page: Any, live_server: str, examples: list[dict[str, Any]], example_traces: dict[str, Any], hold_b: bool
) -> None:
    a = example_traces[A]
    node = next(n["id"] for n in a["graph"]["nodes"] if n["kind"] == "tensor")
    step = len(a["events"]) - 2
    open_example(page, live_server, A, f"&step={step}&node={node}")
    wait_step(page, step)
    assert page.locator("#graph .gt-selected").get_attribute("data-node-id") == node
    # B's spec can answer after all of C has loaded (a slow response): held until then.
    held: list[Any] = []
    if hold_b:
        page.route(f"**/api/v1/examples/{B}", lambda route: held.append(route))
    # A (stepped, selected) -> B -> C, by the hash alone, while B is still loading.
    page.evaluate(f"() => {{ location.hash = 'example={B}'; }}")
    page.evaluate(f"() => {{ location.hash = 'example={C}'; }}")
    c = example_traces[C]
    title = next(e["title"] for e in examples if e["id"] == C)
    page.wait_for_selector(f'body[data-nodes="{len(c["graph"]["nodes"])}"]', state="attached", timeout=60000)
    if hold_b:
        assert len(held) == 1
        held[0].continue_()
        page.unroute(f"**/api/v1/examples/{B}")
    assert_shows(page, C, c, title)
    page.reload()
    page.wait_for_selector("body.is-ready", timeout=60000)
    assert_shows(page, C, c, title)


def test_run_edited_spec_makes_a_permalink_that_reload_restores(page: Any, live_server: str) -> None:
    open_example(page, live_server, A)
    editor = page.get_by_role("textbox", name="Spec")
    spec = json.loads(editor.input_value())
    spec["title"] = "Two layers, edited for the navigation test"
    editor.fill(json.dumps(spec, indent=2))
    page.get_by_role("button", name="Run").click()
    page.wait_for_function("() => location.hash.includes('spec=')", timeout=10000)
    page.get_by_role("button", name="Step back").click()
    page.wait_for_timeout(400)  # the hash is written on a short throttle
    hash_ = page.evaluate("() => location.hash")
    step = page.locator("body").get_attribute("data-step")
    assert f"step={step}" in hash_ and "example=" not in hash_
    page.reload()
    page.wait_for_selector("body.is-ready", timeout=60000)
    wait_step(page, int(step))
    assert json.loads(editor.input_value())["title"] == spec["title"]
    assert page.locator("#example option:checked").inner_text().startswith("Edited spec")


def _drawn_once(page: Any) -> dict[str, int]:
    """How often the page laid its graph out and painted a step since it loaded."""
    return page.evaluate(
        """() => ({ layouts: performance.getEntriesByName("gt-layout", "measure").length,
                    paints: performance.getEntriesByName("gt-paint").length })"""
    )


def test_a_first_load_paints_once_and_a_collapsed_view_reopens_from_its_link(
    page: Any, live_server: str
) -> None:
    layers = 30  # a chain long enough to open collapsed (the default folding of a big graph)
    lines = [f"h{i + 1} = tanh(l{i}({'x' if i == 0 else f'h{i}'}))" for i in range(layers)]
    spec = {
        "spec_version": 1,
        "title": "a deep chain",
        "modules": {f"l{i}": {"type": "Linear", "in_features": 3, "out_features": 3} for i in range(layers)},
        "inputs": {"x": {"shape": [2, 3], "init": "randn"}},
        "forward": [*lines, f"loss = h{layers}.sum()"],
    }
    sid = post_json(f"{live_server}/api/v1/specs", spec)["id"]
    page.goto(f"{live_server}/?spec={sid}")
    page.wait_for_selector("body.is-ready", timeout=60000)
    assert _drawn_once(page) == {"layouts": 1, "paints": 1}
    boxes = page.locator("#graph .gt-node--module").count()
    assert boxes > 0  # collapsed by default
    page.wait_for_function("() => location.hash.includes('collapsed=')")  # the view, as a link
    link = page.evaluate("() => location.href")
    # Reopened from its link: the same boxes, laid out and painted once.
    page.goto("about:blank")
    page.goto(link)
    page.wait_for_selector("body.is-ready", timeout=60000)
    assert _drawn_once(page) == {"layouts": 1, "paints": 1}
    assert page.locator("#graph .gt-node--module").count() == boxes
    # Everything expanded ("-", as links have written it since before the set was a Set).
    page.goto("about:blank")
    page.goto(f"{live_server}/?spec={sid}#collapsed=-&step=3")
    page.wait_for_selector("body.is-ready", timeout=60000)
    wait_step(page, 3)
    assert _drawn_once(page) == {"layouts": 1, "paints": 1}
    assert page.locator("#graph .gt-node--module").count() == 0
    # Double-click a module's box: it collapses, the link says so, and it expands again.
    page.locator('#graph .gt-group[data-module="l2"]').dispatch_event(
        "dblclick"
    )  # (its box lies under its nodes)
    page.wait_for_selector('#graph .gt-node--module[data-module="l2"]', timeout=60000)
    page.wait_for_function("() => location.hash.includes('collapsed=l2')")
    page.locator('#graph .gt-node--module[data-module="l2"]').dispatch_event("dblclick")
    page.wait_for_selector('#graph .gt-group[data-module="l2"]', timeout=60000)
    page.wait_for_function("() => location.hash.includes('collapsed=-')")
