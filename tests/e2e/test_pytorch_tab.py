"""The editor's PyTorch tab in real Chromium: an example shown as PyTorch, edited, run, and a
line the translator cannot read underlined at that line of the code."""

from __future__ import annotations

from typing import Any

import pytest
from e2e_helpers import get_json, open_example

from gradtrace.spec.translate import spec_to_python

pytestmark = pytest.mark.browser


def test_pytorch_tab_shows_edits_runs_and_underlines(page: Any, live_server: str) -> None:
    open_example(page, live_server, "two-layer-linear")
    page.get_by_role("tab", name="PyTorch").click()
    code = page.get_by_role("textbox", name="PyTorch")
    code.wait_for()
    expected = spec_to_python(get_json(live_server + "/api/v1/examples/two-layer-linear"))
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

    # Something outside the subset: underlined at its line of the PyTorch.
    page.get_by_role("tab", name="PyTorch").click()
    code.wait_for()
    source = code.input_value()
    bad = source.replace("a1 = W1(a0)", "a1 = W1(a0).softplus()")
    line = bad.splitlines().index("a1 = W1(a0).softplus()") + 1
    code.fill(bad)
    page.get_by_role("button", name="Run").click()
    entry = page.locator("#spec-error .spec-errors li").first
    entry.wait_for()
    assert entry.inner_text().startswith(f"Line {line}: ") and "softplus" in entry.inner_text()
    assert [int(g) for g in page.locator(".gutter-line.has-error").all_inner_texts()] == [line]
    mark = page.locator(".editor-marks .editor-mark")
    assert mark.count() == 1 and mark.inner_text().startswith("softplus()")
