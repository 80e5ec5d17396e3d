"""Issue 13's views in real Chromium, each on a gallery example, checked against the trace's own
numbers: the saved-tensor memory strip (retain_graph keeps the graph, the last backward frees
it), the per-sample, per-token section of a Linear weight, and compare mode (seed 002 ×2 vs
seed 002: exactly the gradients the hook doubled are marked, by ×2). Screenshots at 1440×900."""

from __future__ import annotations

import re
from typing import Any

import pytest
from e2e_helpers import fmt4, get_json, open_example, post_json, wait_step

from gradtrace.trace import tensor_array

pytestmark = pytest.mark.browser


def live_bytes(memory: dict[str, Any], seq: int) -> int:
    """Saved bytes alive after event ``seq``: the last change point at or before it."""
    points = [p["live_bytes"] for p in memory["timeline"] if p["seq"] <= seq]
    return points[-1] if points else 0


def test_memory_strip_and_saved_bytes_on_retain_graph(
    page: Any, live_server: str, example_traces: dict[str, Any], screenshots: Any
) -> None:
    trace = example_traces["retain-graph-accumulation"]
    memory = trace["analyses"]["memory"]
    (saved,) = memory["nodes"]  # PowBackward0 saves x (a float32 scalar): 4 bytes
    assert saved["saved_bytes"] == 4 and memory["peak_bytes"] == 4
    forward, first, last = (trace["passes"][i] for i in (0, 1, -1))
    open_example(
        page, live_server, "retain-graph-accumulation", f"&step={first['last_seq']}&node={saved['node']}"
    )
    wait_step(page, first["last_seq"])
    strip = page.locator(".memory-strip")
    assert strip.is_visible()
    # held after the first backward (retain_graph=True), as the trace's timeline says
    assert int(strip.get_attribute("data-live-bytes")) == live_bytes(memory, first["last_seq"]) == 4
    assert strip.locator(".memory-label").inner_text() == "4 B held · peak 4 B"
    section = page.locator(".node-memory")
    assert section.get_attribute("data-saved-bytes") == "4"
    assert section.get_attribute("data-now") == "held"
    text = section.inner_text()
    assert f"saved for backward at #{saved['created_seq']} ({forward['label']})" in text
    assert f"freed at #{saved['released_seq']} ({last['label']})" in text
    page.wait_for_timeout(300)
    page.screenshot(path=str(screenshots / "memory-retain-graph-held.png"))
    # the last backward freed it: 0 bytes from there to the end
    page.keyboard.press("End")
    end = len(trace["events"]) - 1
    wait_step(page, end)
    assert (
        int(strip.get_attribute("data-live-bytes")) == live_bytes(memory, end) == memory["final_bytes"] == 0
    )
    assert page.locator(".node-memory").get_attribute("data-now") == "freed"
    # and before the forward saved anything, nothing is held
    page.keyboard.press("Home")
    wait_step(page, 0)
    assert int(strip.get_attribute("data-live-bytes")) == 0
    page.screenshot(path=str(screenshots / "memory-retain-graph-start.png"))


def test_per_sample_section_of_a_linear_weight(
    page: Any, live_server: str, example_traces: dict[str, Any], screenshots: Any
) -> None:
    trace = example_traces["mlp-hooks-reconstruction"]
    record = next(r for r in trace["analyses"]["per_sample"] if r["weight"] == "fc1.weight")
    assert record["matches"] is True
    (call,) = record["calls"]
    leaf = next(
        n for n in trace["graph"]["nodes"] if n["kind"] == "tensor" and n.get("tensor") == "fc1.weight"
    )
    open_example(page, live_server, "mlp-hooks-reconstruction", f"&node={leaf['id']}")
    section = page.locator('[data-section="per-sample"]')
    section.wait_for(timeout=15000)
    batch, tokens = call["sample_dims"]
    cells = section.locator(".persample-grid .cell")
    assert cells.count() == batch * tokens  # B × T = 5 × 6 positions of seed 000's MLP
    # the sample norms printed are the trace's (4 significant digits)
    printed = section.locator(".persample-samples .num").inner_text()
    assert printed == ", ".join(
        fmt4(x) for x in tensor_array(call["sample_norms"], trace["tensor_data"]).tolist()
    )
    check = section.locator(".persample-check").inner_text()
    assert check.endswith("✓") and "max error" in check
    storage = section.inner_text()
    assert f"factors (a, δ): {record['factor_numbers']:,} numbers" in storage
    assert f"W.grad: {record['gradient_numbers']:,} numbers" in storage
    # one position's outer product δ ⊗ a: d_out rows × d_in columns (plus the factor headers)
    cells.nth(7).click()
    table = section.locator(".persample-detail table.outer")
    d_out, d_in = call["delta_shape"][-1], call["a_shape"][-1]
    assert table.locator("tr").count() == d_out + 1
    assert table.locator("tr").first.locator("th").count() == d_in + 1
    assert "sample 1, token 1" in section.locator(".persample-detail").inner_text()
    page.wait_for_timeout(300)
    page.screenshot(path=str(screenshots / "per-sample-fc1-weight.png"))
    # its AccumulateGrad shows the same section; an input leaf does not
    acc = next(
        n
        for n in trace["graph"]["nodes"]
        if n.get("op") == "AccumulateGrad" and n.get("tensor") == "fc1.weight"
    )
    page.locator(f'.gt-node[data-node-id="{acc["id"]}"]').dispatch_event("click")
    page.wait_for_selector("#inspector h2 >> text=AccumulateGrad", timeout=5000)
    assert "∂L/∂fc1.weight" in page.locator('[data-section="per-sample"]').inner_text()
    x = next(n for n in trace["graph"]["nodes"] if n["kind"] == "tensor" and n.get("role") == "input")
    page.locator(f'.gt-node[data-node-id="{x["id"]}"]').dispatch_event("click")
    page.wait_for_timeout(200)
    assert page.locator('[data-section="per-sample"]').count() == 0


def check_compare_page(
    page: Any, trace_a: dict[str, Any], trace_b: dict[str, Any], diff: dict[str, Any]
) -> None:
    page.wait_for_selector("body[data-compare=ready]", timeout=60000)
    rows = page.locator("#compare-panel .compare-grads tbody tr[data-name]")
    assert rows.count() == len(trace_b["grads"])
    for name in ("x", "f0.weight", "f0.bias"):
        row = page.locator(f'#compare-panel .compare-row[data-name="{name}"]')
        assert row.get_attribute("data-status") == "changed"
        a_cell, b_cell, status = (row.locator("td").nth(k).inner_text() for k in range(3))
        assert a_cell == "[" + fmt4(trace_a["grads"][name]["values"][0]) + "]"
        assert b_cell == "[" + fmt4(trace_b["grads"][name]["values"][0]) + "]"
        assert status == "×2"
    for name in ("f1.f.weight", "f1.f.bias"):
        row = page.locator(f'#compare-panel .compare-row[data-name="{name}"]')
        assert row.get_attribute("data-status") == "unchanged"
        assert row.locator("td").nth(2).inner_text() == "same"
    # every edge's gradient, a vs b: the changed ones are exactly the API's, with the traces' numbers
    page.locator(".compare-edges summary").click()
    edge_rows = page.locator("#compare-panel .compare-grads tbody tr[data-edge]")
    assert edge_rows.count() == sum(1 for m in diff["edges"]["matched"] if m["grads"])
    changed_rows = page.eval_on_selector_all(
        '#compare-panel .compare-grads tr[data-edge][data-status="changed"]',
        "els => els.map(e => e.dataset.edge)",
    )
    assert sorted(changed_rows) == sorted(diff["summary"]["changed_edges"])
    edges_a = {e["id"]: e for e in trace_a["graph"]["edges"]}
    edges_b = {e["id"]: e for e in trace_b["graph"]["edges"]}
    for m in diff["edges"]["matched"]:
        if m["b"] not in changed_rows:
            continue
        cells = page.locator(f'#compare-panel tr[data-edge="{m["b"]}"] td')
        for k, edge in ((0, edges_a[m["a"]]), (1, edges_b[m["b"]])):
            (value,) = edge["grads"][-1]["value"]["values"]
            assert cells.nth(k).inner_text() == "[" + fmt4(value) + "]"
        assert cells.nth(2).inner_text() == "×2"
    # on the graph: exactly the edges the API reports, each with its factor
    marked = page.eval_on_selector_all(
        ".gt-edge.gt-compare-changed", "els => els.map(e => e.dataset.edgeId.split('~')[0])"
    )
    assert sorted(set(marked)) == sorted(diff["summary"]["changed_edges"])
    badges = page.eval_on_selector_all(".gt-edge .gt-compare-badge", "els => els.map(e => e.textContent)")
    assert badges and set(badges) == {"×2"}
    leaves = {n["tensor"]: n["id"] for n in trace_b["graph"]["nodes"] if n["kind"] == "tensor"}
    for name, changed in (("x", True), ("f0.weight", True), ("f0.bias", True), ("f1.f.weight", False)):
        node = page.locator(f'.gt-node[data-node-id="{leaves[name]}"]')
        assert ("gt-compare-changed" in node.get_attribute("class")) is changed, name


def test_compare_mode_x2_hook_against_seed_002(
    page: Any, live_server: str, example_traces: dict[str, Any], screenshots: Any
) -> None:
    trace_a, trace_b = example_traces["full-backward-hook"], example_traces["full-backward-hook-x2"]
    diff = post_json(
        live_server + "/api/v1/compare",
        {"a": get_json(f"{live_server}/api/v1/examples/full-backward-hook"), "b": trace_b["spec"]},
    )
    # the gallery's link opens compare mode …
    open_example(page, live_server, "full-backward-hook-x2")
    link = page.locator("#compare-link")
    link.wait_for(state="visible", timeout=15000)
    assert re.search(r"compare=full-backward-hook$", link.get_attribute("href"))
    link.click()
    check_compare_page(page, trace_a, trace_b, diff)
    assert "compare=full-backward-hook" in page.url
    wait_step(page, len(trace_b["events"]) - 1)  # compare mode opens on the finished backward
    # a node's own numbers, a vs b, in the inspector
    weight = next(
        n for n in trace_b["graph"]["nodes"] if n.get("tensor") == "f0.weight" and n["kind"] == "tensor"
    )
    page.locator(f'.gt-node[data-node-id="{weight["id"]}"]').dispatch_event("click")
    section = page.locator('#inspector [data-section="compare"]')
    section.wait_for(timeout=5000)
    assert "matched with" in section.inner_text() and "tensor f0.weight" in section.inner_text()
    cells = section.locator('tr[data-name="f0.weight"] td')
    assert [cells.nth(k).inner_text() for k in range(3)] == [
        "[" + fmt4(trace_a["grads"]["f0.weight"]["values"][0]) + "]",
        "[" + fmt4(trace_b["grads"]["f0.weight"]["values"][0]) + "]",
        "×2",
    ]
    page.locator("#fit").click()
    page.wait_for_timeout(400)
    page.screenshot(path=str(screenshots / "compare-x2-vs-seed002.png"))
    # … closing it clears every mark
    page.get_by_role("button", name="Stop comparing").click()
    page.wait_for_timeout(200)
    assert page.locator(".gt-compare-changed, .gt-compare-badge").count() == 0
    assert page.locator("#compare-panel").is_hidden()


def test_compare_mode_link_with_a_permalink(
    page: Any, live_server: str, example_traces: dict[str, Any]
) -> None:
    spec_a = get_json(f"{live_server}/api/v1/examples/full-backward-hook")
    sid = post_json(live_server + "/api/v1/specs", spec_a)["id"]
    trace_a, trace_b = example_traces["full-backward-hook"], example_traces["full-backward-hook-x2"]
    diff = post_json(live_server + "/api/v1/compare", {"a": sid, "b": trace_b["spec"]})
    open_example(page, live_server, "full-backward-hook-x2", f"&compare={sid}")
    check_compare_page(page, trace_a, trace_b, diff)


def test_compare_with_an_unknown_permalink_says_so(page: Any, live_server: str) -> None:
    open_example(page, live_server, "full-backward-hook-x2", "&compare=zzzzzzzzzzzz")
    page.wait_for_selector("body[data-compare=error]", timeout=60000)
    assert "no permalink with this id" in page.locator("#compare-panel").inner_text()


def test_compare_mode_marks_the_nodes_only_one_trace_has(
    page: Any, live_server: str, example_traces: dict[str, Any], screenshots: Any
) -> None:
    # the full hook inserts BackwardHookFunctionBackward nodes; the deprecated hook does not
    trace_b = example_traces["full-backward-hook"]
    diff = post_json(
        live_server + "/api/v1/compare",
        {"a": get_json(f"{live_server}/api/v1/examples/deprecated-backward-hook"), "b": trace_b["spec"]},
    )
    inserted = {n["id"] for n in trace_b["graph"]["nodes"] if n.get("inserted")}
    assert inserted and set(diff["nodes"]["only_b"]) >= inserted
    open_example(page, live_server, "full-backward-hook", "&compare=deprecated-backward-hook")
    page.wait_for_selector("body[data-compare=ready]", timeout=60000)
    outlined = page.eval_on_selector_all(".gt-node.gt-compare-only", "els => els.map(e => e.dataset.nodeId)")
    assert sorted(outlined) == sorted(diff["nodes"]["only_b"])
    assert page.locator(".gt-compare-only .gt-compare-badge").first.text_content() == "only here"
    assert page.locator(".gt-compare-changed").count() == 0  # the same gradients: nothing else marked
    assert "only in b (outlined): BackwardHookFunctionBackward" in page.locator("#compare-panel").inner_text()
    page.wait_for_timeout(300)
    page.screenshot(path=str(screenshots / "compare-full-vs-deprecated-hook.png"))


def deep_spec(layers: int, hook_at: int | None = None) -> dict[str, Any]:
    """A deep tanh MLP (over 250 drawn nodes, so the viewer culls what is off screen)."""
    spec: dict[str, Any] = {
        "spec_version": 1,
        "title": f"{layers} tanh layers" + (f", ×2 hook on l{hook_at}" if hook_at is not None else ""),
        "modules": {f"l{i}": {"type": "Linear", "in_features": 3, "out_features": 3} for i in range(layers)},
        "inputs": {"x": {"shape": [2, 3], "init": "randn", "requires_grad": True}},
        "forward": [f"h{i + 1} = tanh(l{i}(h{i}))" if i else "h1 = tanh(l0(x))" for i in range(layers)]
        + [f"loss = h{layers}.sum()"],
    }
    if hook_at is not None:
        action = {"op": "scale", "target": "grad_input", "by": 2}
        spec["hooks"] = [{"module": f"l{hook_at}", "type": "full_backward", "action": action}]
    return spec


def test_compare_marks_a_big_graph_everywhere_and_exports_them(
    page: Any, live_server: str, tmp_path: Any, screenshots: Any
) -> None:
    base, hooked = deep_spec(40), deep_spec(40, hook_at=20)
    ids = [post_json(live_server + "/api/v1/specs", s)["id"] for s in (base, hooked)]
    diff = post_json(live_server + "/api/v1/compare", {"a": ids[0], "b": ids[1]})
    assert {f"l{i}.weight" for i in range(20)} <= set(diff["summary"]["changed_grads"])
    assert {f"l{i}.weight" for i in range(20, 40)} <= set(diff["summary"]["unchanged_grads"])
    page.goto(f"{live_server}/?spec={ids[1]}#compare={ids[0]}")
    page.wait_for_selector("body[data-compare=ready]", timeout=90000)
    assert int(page.locator("body").get_attribute("data-nodes")) > 250
    # the whole drawing (culled parts included), as Export → SVG writes it
    page.locator("#export-menu summary").click()
    with page.expect_download() as dl:
        page.get_by_role("button", name="SVG", exact=True).click()
    path = tmp_path / dl.value.suggested_filename
    dl.value.save_as(path)
    text = path.read_text()
    marked = set(re.findall(r'class="gt-edge[^"]*gt-compare-changed[^"]*"[^>]*data-edge-id="([^"~]+)"', text))
    # edges inside folded blocks (the viewer folds the repeated layers) are not drawn: every edge
    # the picture does draw is marked exactly when its gradient changed
    drawn = set(re.findall(r'class="gt-edge[^"]*"[^>]*data-edge-id="([^"~]+)"', text))
    assert marked and marked == set(diff["summary"]["changed_edges"]) & drawn
    # (as for edges: a node inside a folded or collapsed block is not drawn, so not badged)
    drawn_nodes = set(re.findall(r'data-node-id="([^"]+)"', text))
    assert text.count(">only here<") == len(set(diff["nodes"]["only_b"]) & drawn_nodes)
    assert ".gt-compare-changed" in text  # the marks' style travels with the picture
    page.screenshot(path=str(screenshots / "compare-deep-graph.png"))
