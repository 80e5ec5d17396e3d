"""The editor's PyTorch tab in real Chromium: a tutorial program pasted as written and run on the
server (graph, narration, printed lines; an exception marked at its line), "Edit as spec" where
the translator reads the program, and every line it cannot read listed at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import get_json, open_example
from tutorial_programs import QUICKSTART

from gradtrace.spec.translate import spec_to_python

pytestmark = pytest.mark.browser


def test_pytorch_tab_shows_edits_runs_and_underlines(page: Any, run_server: str, screenshots: Path) -> None:
    open_example(page, run_server, "two-layer-linear")
    page.get_by_role("tab", name="PyTorch").click()
    code = page.get_by_role("textbox", name="PyTorch")
    code.wait_for()
    expected = spec_to_python(get_json(run_server + "/api/v1/examples/two-layer-linear"))
    assert code.input_value() == expected

    # An edit in PyTorch runs: the trace drawn comes from the translated spec.
    code.fill(expected.replace("L = 0.5 * ((a1 - y) ** 2).sum()", "L = ((a1 - y) ** 2).sum()"))
    page.get_by_role("button", name="Run").click()
    page.wait_for_function(
        "() => !document.body.classList.contains('is-running') && document.querySelector('#graph g')"
    )
    assert page.locator("#spec-error").is_hidden()

    # Back to JSON: the edit is in the spec.
    page.get_by_role("tab", name="JSON").click()
    spec = page.get_by_role("textbox", name="Spec")
    spec.wait_for()
    assert '"L = ((a1 - y) ** 2).sum()"' in spec.input_value()

    # A program that raises: run as written, PyTorch's exception marked at its line.
    page.get_by_role("tab", name="PyTorch").click()
    code.wait_for()
    source = code.input_value()
    bad = source.replace("a1 = W1(a0)", "a1 = W1(a0).softplus()")
    line = bad.splitlines().index("a1 = W1(a0).softplus()") + 1
    code.fill(bad)
    page.get_by_role("button", name="Run").click()
    entry = page.locator("#spec-error .spec-errors li").first
    entry.wait_for()
    assert (
        entry.inner_text().startswith(f"Line {line}: AttributeError: ") and "softplus" in entry.inner_text()
    )
    assert [int(g) for g in page.locator(".gutter-line.has-error").all_inner_texts()] == [line]
    assert page.locator(".program-output-exception").inner_text().startswith(f"Line {line}: AttributeError")
    page.screenshot(path=str(screenshots / "pytorch-tab-exception-1440.png"))

    # The translator's view of the same line (the JSON tab): underlined at the method's column.
    page.get_by_role("tab", name="JSON").click()
    entry.wait_for()
    assert entry.inner_text().startswith(f"Line {line}: ") and "softplus" in entry.inner_text()
    mark = page.locator(".editor-marks .editor-mark")
    # the run's mark (the whole line) stands until the translator's answer marks the column
    page.wait_for_function(
        "() => [...document.querySelectorAll('.editor-marks .editor-mark')]"
        ".some(m => m.innerText.startsWith('softplus()'))",
        timeout=10_000,
    )
    assert mark.count() == 1 and mark.inner_text().startswith("softplus()")


def test_a_tutorial_program_pasted_as_written_runs(page: Any, run_server: str, screenshots: Path) -> None:
    open_example(page, run_server, "two-layer-linear")
    page.get_by_role("tab", name="PyTorch").click()
    code = page.get_by_role("textbox", name="PyTorch")
    code.wait_for()
    code.fill(QUICKSTART)
    page.get_by_role("button", name="Run").click()
    output = page.get_by_role("region", name="Program output")
    output.wait_for(timeout=60_000)
    page.wait_for_function(
        "() => !document.body.classList.contains('is-running') && document.body.dataset.nodes"
    )
    # the graph of the program's own pass, its modules named as the program names them
    assert int(page.evaluate("() => document.body.dataset.nodes")) > 10
    modules = page.locator("#graph .gt-group, #graph .gt-node--module")
    assert modules.count() >= 1
    drawn = page.locator("#graph").text_content() or ""
    assert "linear_relu_stack" in drawn, drawn[:300]
    # the narration tells the step shown
    narration = page.locator("#narration")
    assert narration.inner_text().strip()
    # what the program printed, under the editor
    printed = page.locator(".program-output-stdout").inner_text()
    assert printed.startswith(
        "Using cpu device\nNeuralNetwork(\n  (flatten): Flatten(start_dim=1, end_dim=-1)"
    )
    assert "loss: " in printed and page.locator(".program-output-exception").count() == 0
    assert page.locator("#spec-error").is_hidden()
    # the program's permalink, written to the hash on the view's short throttle
    page.wait_for_function("() => location.hash.includes('run=')", timeout=10_000)
    assert "run=" in page.evaluate("() => location.hash")
    # outside the translator's subset: no "Edit as spec"; the JSON tab lists every reason at once
    assert page.get_by_role("button", name="Edit as spec").is_hidden()
    page.screenshot(path=str(screenshots / "pytorch-tab-run-1440.png"))
    page.set_viewport_size({"width": 1280, "height": 720})
    page.screenshot(path=str(screenshots / "pytorch-tab-run-1280.png"))
    page.get_by_role("tab", name="JSON").click()
    page.locator("#spec-error .spec-error-count").wait_for()
    count = page.locator("#spec-error .spec-error-count").inner_text()
    entries = page.locator("#spec-error .spec-errors li").all_inner_texts()
    assert count == f"{len(entries)} problems the spec editor cannot read (Run runs the program as it is):"
    lines = [int(e.split(":", 1)[0].removeprefix("Line ")) for e in entries]
    assert lines == [4, 26, 29, 32, 33, 43]  # the device line, .to(device), the loss module, device=, .item()
    assert page.get_by_role("textbox", name="PyTorch").is_visible()  # still the program, to fix or run
    page.screenshot(path=str(screenshots / "pytorch-tab-refusals-1280.png"))
    # the link reopens the program: its source in the PyTorch tab, run again (from the server's cache)
    page.reload()
    page.get_by_role("region", name="Program output").wait_for(timeout=60_000)
    assert page.get_by_role("textbox", name="PyTorch").input_value() == QUICKSTART
    assert page.locator(".program-output-stdout").inner_text() == printed
    page.wait_for_function(
        "() => !document.body.classList.contains('is-running') && document.body.dataset.nodes"
    )


def test_edit_as_spec_is_offered_for_a_program_the_translator_reads(page: Any, run_server: str) -> None:
    open_example(page, run_server, "two-layer-linear")
    page.get_by_role("tab", name="PyTorch").click()
    code = page.get_by_role("textbox", name="PyTorch")
    code.wait_for()
    program = code.input_value()
    page.get_by_role("button", name="Run").click()
    button = page.get_by_role("button", name="Edit as spec")
    button.wait_for(timeout=60_000)
    assert code.input_value() == program  # run as written: nothing rewritten
    button.click()
    spec = page.get_by_role("textbox", name="Spec")
    spec.wait_for()
    assert '"W1"' in spec.input_value() and button.is_hidden()
