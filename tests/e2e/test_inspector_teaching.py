"""The inspector as a teacher, in real Chromium: the chain-rule step typeset by KaTeX with the
program's names and the trace's numbers (seed 002), Σ δ ⊗ a on a Linear weight, a retained
intermediate's .grad; the URL naming what is on screen (hash changes, edited specs); editor
errors at the exact JSON line; the event list by keyboard; Escape."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from e2e_helpers import fmt4, open_example, wait_step

pytestmark = pytest.mark.browser
SEED002 = "full-backward-hook"


def post_event(trace: dict[str, Any], node_id: str) -> dict[str, Any]:
    return next(e for e in trace["events"] if e["kind"] == "node_post" and e.get("node") == node_id)


def math_texts(page: Any, selector: str) -> list[str]:
    """The typeset formulas' visible text (KaTeX's HTML, spaces and zero-width joins removed)."""
    page.wait_for_selector(f"{selector} .katex")
    texts = page.locator(f"{selector} .katex-html").all_text_contents()
    return [re.sub(r"[\s\u200b]", "", t) for t in texts]


def test_chain_rule_is_katex_with_program_names_and_the_trace_numbers(
    page: Any, live_server: str, example_traces: dict[str, Any], screenshots: Any
) -> None:
    trace = example_traces[SEED002]
    node = next(n for n in trace["graph"]["nodes"] if n.get("op") == "AddmmBackward0" and n["module"] == "f0")
    post = post_event(trace, node["id"])
    responses: list[Any] = []
    page.on("response", lambda r: responses.append(r))
    open_example(page, live_server, SEED002, f"&step={post['seq']}&node={node['id']}")
    wait_step(page, post["seq"])
    rows = page.locator("#inspector .math-row .math")
    texts = math_texts(page, "#inspector .math-row")
    assert len(texts) == 3
    # δ_out is the node's grad_outputs, δ_in of each slot the gradient on that edge: PyTorch's numbers.
    delta_out = fmt4(post["payload"]["grad_outputs"][0]["values"][0])
    for slot, text in enumerate(texts):
        edge = next(e for e in trace["graph"]["edges"] if e["target"] == node["id"] and e["slot"] == slot)
        delta_in = fmt4(edge["grads"][0]["value"]["values"][0])
        assert f"({delta_out})" in text and text.endswith(f"={delta_in}"), text
    assert fmt4(-0.4079606533050537) == delta_out  # seed 002: ∂L/∂x1 = −0.4080
    # Operands by their program names, never node ids.
    plain = rows.evaluate_all("els => els.map(e => e.dataset.text)")
    assert [t.split(" = ")[0] for t in plain] == ["∂loss/∂f0.bias", "∂loss/∂view(x)", "∂loss/∂f0.weightᵀ"]
    section = page.locator("#inspector").inner_text()
    chain = section[section.index("CHAIN RULE") :]
    assert not re.search(r"\bn\d+\b|input \d", chain), chain
    assert "f0.bias is a leaf: AccumulateGrad adds this into f0.bias.grad" in chain
    assert "output of AccumulateGrad" not in section
    # Lines are never clipped: each formula fits its panel (it wraps) or scrolls inside it.
    widths = rows.evaluate_all(
        "els => els.map(e => [e.scrollWidth, e.clientWidth, getComputedStyle(e).overflowX])"
    )
    assert all(sw <= cw + 1 or ox == "auto" for sw, cw, ox in widths), widths
    page.screenshot(path=str(screenshots / "inspector-chain-rule-seed002.png"))
    # KaTeX (script, stylesheet, fonts) came from this server's /vendor/katex/, nothing from outside.
    page.wait_for_load_state("networkidle")
    katex = [r for r in responses if "/vendor/katex/" in r.url]
    assert {r.status for r in katex} == {200}
    assert any(r.url.endswith(".woff2") for r in katex)
    assert all(r.url.startswith(live_server) for r in responses)


def test_linear_weight_shows_the_outer_product_reconstruction(
    page: Any, live_server: str, example_traces: dict[str, Any]
) -> None:
    trace = example_traces["two-layer-linear"]
    rec = trace["analyses"]["linear"][0]
    weight = next(n for n in trace["graph"]["nodes"] if n["kind"] == "tensor" and n["label"] == rec["weight"])
    last = len(trace["events"]) - 1
    open_example(page, live_server, "two-layer-linear", f"&step={last}&node={weight['id']}")
    wait_step(page, last)
    texts = math_texts(page, "#inspector .recon")
    assert "⊗" in texts[0]
    for x in rec["grad"]["values"]:  # the 3×2 W.grad written out in full, as autograd stored it
        assert fmt4(x) in texts[1], texts[1]
    assert texts[2].endswith("=0")
    assert "✓ matches" in page.locator("#inspector .recon").inner_text()


def test_retained_intermediate_grad_in_the_inspector(
    page: Any, live_server: str, example_traces: dict[str, Any]
) -> None:
    trace = example_traces["retain-grad-intermediate"]
    a0 = next(n for n in trace["graph"]["nodes"] if n.get("tensor") == "a0")
    write = next(e for e in trace["events"] if e["kind"] == "grad_write" and e["node"] == a0["id"])
    open_example(page, live_server, "retain-grad-intermediate", f"&step={write['seq'] - 1}&node={a0['id']}")
    wait_step(page, write["seq"] - 1)
    inspector = page.locator("#inspector")
    assert f"a0.grad is None until event #{write['seq']}" in inspector.inner_text()
    page.keyboard.press("ArrowRight")
    wait_step(page, write["seq"])
    text = inspector.inner_text()
    assert "a0.grad (kept by retain_grad)" in text
    for x in trace["grads"]["a0"]["values"]:
        assert fmt4(x) in text


def test_hash_change_to_another_example_resets_step_and_selection(page: Any, live_server: str) -> None:
    open_example(page, live_server, SEED002)
    fresh_step = page.locator("body").get_attribute("data-step")
    open_example(page, live_server, "two-layer-linear", "&step=20&node=n3")
    wait_step(page, 20)
    assert page.locator("body.has-selection").count() == 1
    page.evaluate("() => { location.hash = '#example=full-backward-hook'; }")
    page.wait_for_selector('body[data-nodes="23"]', state="attached")
    wait_step(page, int(fresh_step))
    assert page.locator("#example").input_value() == SEED002
    assert page.locator("body.has-selection").count() == 0
    assert "Click a node" in page.locator("#inspector").inner_text()
    page.wait_for_timeout(300)  # the hash is rewritten from the state after a short debounce
    assert "node=" not in page.evaluate("() => location.hash")


def test_edited_spec_is_stored_and_survives_reload(page: Any, live_server: str) -> None:
    open_example(page, live_server, "two-layer-linear")
    editor = page.get_by_role("textbox", name="Spec")
    spec = json.loads(editor.input_value())
    spec["title"] = "Two layers, my own weights"
    spec["modules"]["W0"]["init"]["weight"][0][0] = 0.7
    editor.fill(json.dumps(spec, indent=2))
    page.get_by_role("button", name="Run").click()
    page.wait_for_function("() => location.hash.includes('spec=')", timeout=10000)
    link = page.evaluate("() => location.hash")
    assert "example=" not in link
    assert page.locator("#example option:checked").inner_text().startswith("Edited spec")
    page.reload()
    page.wait_for_selector("body.is-ready", timeout=60000)
    reopened = json.loads(editor.input_value())
    assert reopened["title"] == spec["title"]
    assert reopened["modules"]["W0"]["init"]["weight"][0][0] == 0.7
    assert page.locator("#example option:checked").inner_text().startswith("Edited spec")
    # Back to a gallery example through the select: the URL names it again.
    page.locator("#example").select_option("two-layer-linear")
    page.wait_for_function("() => location.hash.includes('example=two-layer-linear')", timeout=10000)
    assert "spec=" not in page.evaluate("() => location.hash")


def test_editor_errors_at_the_exact_json_line(page: Any, live_server: str) -> None:
    open_example(page, live_server, SEED002)
    editor = page.get_by_role("textbox", name="Spec")
    spec = json.loads(editor.input_value())
    error = page.locator("#spec-error")
    # A trailing comma: the line of the comma, found before any request.
    lines = json.dumps(spec, indent=2).splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.strip().startswith('"forward"'))
    k = next(i for i in range(k, len(lines)) if lines[i].strip() == "]") - 1  # the program's last line
    lines[k] += ","
    editor.fill("\n".join(lines))
    page.get_by_role("button", name="Run").click()
    error.wait_for(state="visible")
    assert error.get_attribute("data-line") == str(k + 1)
    assert "trailing comma" in error.inner_text()
    # An unknown module type: the API names /modules/f0; the error sits on its "type" line.
    spec["modules"]["f0"]["type"] = "Lineaar"
    text = json.dumps(spec, indent=2)
    editor.fill(text)
    page.get_by_role("button", name="Run").click()
    page.wait_for_selector("#spec-error[data-path]", state="attached")
    assert error.get_attribute("data-line") == str(text.splitlines().index('      "type": "Lineaar",') + 1)
    assert error.get_attribute("data-path") == "/modules/f0/type"


def test_events_picked_by_keyboard_and_escape_clears_the_selection(
    page: Any, live_server: str, example_traces: dict[str, Any]
) -> None:
    trace = example_traces["two-layer-linear"]
    target = next(e for e in trace["events"] if e["kind"] == "node_pre")
    open_example(page, live_server, "two-layer-linear", "&step=0")
    wait_step(page, 0)
    page.locator("#events").focus()
    for _ in range(target["seq"]):
        page.keyboard.press("ArrowDown")
    assert page.locator("#events").get_attribute("aria-activedescendant") == f"ev-{target['seq']}"
    page.keyboard.press("Enter")
    wait_step(page, target["seq"])
    assert page.locator("#graph .gt-selected").get_attribute("data-node-id") == target["node"]
    assert page.locator(f"#ev-{target['seq']}").get_attribute("aria-selected") == "true"
    page.keyboard.press("Escape")
    page.wait_for_selector("body:not(.has-selection)", state="attached")
    assert page.locator("#graph .gt-selected").count() == 0
    assert "Click a node" in page.locator("#inspector").inner_text()
