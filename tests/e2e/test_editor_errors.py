"""The spec editor shows every validation error the API lists, in real Chromium.

A spec in the README's format (seed 002's) with three mistakes: each is underlined at its JSON
line, marked in the gutter and listed under the editor with the API's own message; each list
entry is a button (reached with Tab) that puts the caret on its line.
"""

from __future__ import annotations

import json
import urllib.error
from typing import Any

import pytest
from design_specs import seed_002
from e2e_helpers import open_example, post_json

pytestmark = pytest.mark.browser


def spec_with_three_errors() -> dict[str, Any]:
    """The README's spec (seed 002, the ×2 full backward hook), with three mistakes in it."""
    spec = seed_002()
    spec["modules"]["f0"]["type"] = "Lineaar"
    spec["inputs"]["x"]["value"] = "0.3"
    spec["hooks"][0]["type"] = "full_backwards"
    return spec


SPEC_WITH_THREE_ERRORS = spec_with_three_errors()


def api_errors(base: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    with pytest.raises(urllib.error.HTTPError) as info:
        post_json(base + "/api/v1/trace", spec)
    assert info.value.code == 422
    return json.loads(info.value.read())["error"]["errors"]


def run_in_editor(page: Any, base: str, text: str, count: int) -> tuple[Any, Any]:
    """Run `text` from the editor; (the editor, the listed errors) once `count` are listed."""
    open_example(page, base, "two-layer-linear")
    editor = page.get_by_role("textbox", name="Spec")
    editor.fill(text)
    page.get_by_role("button", name="Run").click()
    listed = page.locator("#spec-error .spec-errors li")
    listed.nth(count - 1).wait_for()
    assert listed.count() == count
    return editor, listed


def test_every_api_error_is_underlined_listed_and_reachable(
    page: Any, live_server: str, screenshots: Any
) -> None:
    text = json.dumps(SPEC_WITH_THREE_ERRORS, indent=2)
    lines = text.splitlines()
    errors = api_errors(live_server, SPEC_WITH_THREE_ERRORS)
    assert [e["path"] for e in errors] == ["/modules/f0", "/inputs/x/value", "/hooks/0"]
    # Where each mistake is in the text: the line of the offending member.
    expected_lines = [
        lines.index('      "type": "Lineaar",') + 1,
        lines.index('      "value": "0.3",') + 1,
        lines.index('      "type": "full_backwards",') + 1,
    ]

    editor, listed = run_in_editor(page, live_server, text, 3)
    for k, err in enumerate(errors):
        entry = listed.nth(k).inner_text()
        assert err["message"] in entry and entry.startswith(f"Line {expected_lines[k]} ")
    gutter = page.locator(".gutter-line.has-error").all_inner_texts()
    assert sorted(int(g) for g in gutter) == sorted(expected_lines)
    # Each underline sits on its line of the textarea (18 px lines, 6 px padding).
    marks = page.locator(".editor-marks .editor-mark")
    assert marks.count() == 3
    top = editor.evaluate("t => t.getBoundingClientRect().top + 6 - t.scrollTop")
    mark_lines = marks.evaluate_all("ms => ms.map(m => m.getBoundingClientRect().top)")
    assert [round((y - top) / 18) + 1 for y in mark_lines] == expected_lines
    assert marks.all_inner_texts() == ['"type": "Lineaar"', '"value": "0.3"', '"type": "full_backwards"']
    page.screenshot(path=str(screenshots / "editor-three-errors.png"))

    # Keyboard: Tab to each entry's button, Enter puts the caret on that line.
    buttons = page.locator("#spec-error .spec-error-place")
    for k, line in enumerate(expected_lines):
        buttons.nth(k).focus()
        page.keyboard.press("Enter")
        assert page.evaluate("() => document.activeElement.id") == "spec"
        caret_line = editor.evaluate("t => t.value.slice(0, t.selectionStart).split('\\n').length")
        assert caret_line == line
    # Reached from the editor with Tab alone.
    editor.focus()
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.className") == "spec-error-place"

    # Fixing the text clears every mark.
    editor.fill(json.dumps({**SPEC_WITH_THREE_ERRORS, "modules": {}}, indent=2))
    assert page.locator("#spec-error").is_hidden()
    assert page.locator(".gutter-line.has-error").count() == 0
    assert page.locator(".editor-marks .editor-mark").count() == 0


def test_a_mistake_of_each_stage_is_underlined_after_one_run(
    page: Any, live_server: str, screenshots: Any
) -> None:
    """Schema, call, name and step mistakes come back from one Run, each marked on its line."""
    from design_specs import FOUR_MISTAKES, spec_with_four_mistakes

    spec = spec_with_four_mistakes()
    text = json.dumps(spec, indent=2)
    lines = text.splitlines()
    expected_lines = [
        lines.index('      "type": "Lineaar",') + 1,
        lines.index('    "y = f1(x1, x)",') + 1,
        lines.index('    "loss = (yy - 1) ** 2"') + 1,
        lines.index('      "of": "los"') + 1,
    ]
    editor, listed = run_in_editor(page, live_server, text, 4)
    for k, (_, _, message) in enumerate(FOUR_MISTAKES):
        entry = listed.nth(k).inner_text()
        assert message in entry and entry.startswith(f"Line {expected_lines[k]} "), entry
    gutter = page.locator(".gutter-line.has-error").all_inner_texts()
    assert sorted(int(g) for g in gutter) == expected_lines
    marks = page.locator(".editor-marks .editor-mark")
    assert marks.count() == 4
    top = editor.evaluate("t => t.getBoundingClientRect().top + 6 - t.scrollTop")
    mark_tops = marks.evaluate_all("ms => ms.map(m => m.getBoundingClientRect().top)")
    assert sorted(round((y - top) / 18) + 1 for y in mark_tops) == expected_lines
    marked = marks.all_inner_texts()
    for fragment in ('"Lineaar"', "f1(x1, x)", "yy", '"los"'):
        assert any(fragment in m for m in marked), (fragment, marked)
    page.screenshot(path=str(screenshots / "editor-four-mistakes.png"))
