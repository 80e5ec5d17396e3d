"""Themes, phones and reduced motion: screenshots for a human to look at, plus the checks a
machine can make (dark theme really switches, nothing animates under reduced motion)."""

from __future__ import annotations

from typing import Any

import pytest
from e2e_helpers import open_example, wait_step

pytestmark = pytest.mark.browser
EXAMPLE = "full-backward-hook"


def backward_step(trace: dict[str, Any]) -> int:
    b = next(p for p in trace["passes"] if p["phase"] == "backward")
    return b["first_seq"] + (b["last_seq"] - b["first_seq"]) // 2


def test_dark_theme(page: Any, live_server: str, example_traces: dict[str, Any], screenshots: Any) -> None:
    step = backward_step(example_traces[EXAMPLE])
    open_example(page, live_server, EXAMPLE, f"&step={step}&theme=dark")
    wait_step(page, step)
    assert "gt-theme-dark" in page.locator("html").get_attribute("class")
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert bg == "rgb(21, 26, 34)"
    page.wait_for_timeout(300)
    page.screenshot(path=str(screenshots / f"{EXAMPLE}-dark.png"))
    page.get_by_role("button", name="Toggle dark theme").click()
    assert "gt-theme-light" in page.locator("html").get_attribute("class")


def test_phone_layout(
    browser: Any, live_server: str, example_traces: dict[str, Any], screenshots: Any
) -> None:
    step = backward_step(example_traces[EXAMPLE])
    ctx = browser.new_context(
        viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True, has_touch=True
    )
    page = ctx.new_page()
    open_example(page, live_server, EXAMPLE, f"&step={step}")
    wait_step(page, step)
    # The graph comes first and fills the width; nothing spills sideways.
    box = page.locator("#graph").bounding_box()
    assert box["width"] >= 380 and box["height"] > 300
    page.wait_for_timeout(300)
    page.screenshot(path=str(screenshots / f"{EXAMPLE}-phone.png"), full_page=True)
    wide = page.evaluate(
        "[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > 392)"
        ".map(e => e.tagName + '#' + e.id + '.' + e.className).slice(0, 8)"
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, wide
    ctx.close()


@pytest.mark.parametrize("motion", ["no-preference", "reduce"])
def test_gradient_pulse_respects_reduced_motion(
    browser: Any, live_server: str, example_traces: dict[str, Any], motion: str
) -> None:
    trace = example_traces[EXAMPLE]
    edge = next(e for e in trace["graph"]["edges"] if e["grads"])
    step = edge["grads"][0]["seq"]
    ctx = browser.new_context(reduced_motion=motion, viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    open_example(page, live_server, EXAMPLE, f"&step={step}")
    wait_step(page, step)
    group = page.locator(f'#graph .gt-edge[data-edge-id="{edge["id"]}"]')
    assert group.get_attribute("data-state") == "active"
    pulse = group.locator("path.gt-pulse")
    style = pulse.evaluate("p => [getComputedStyle(p).display, getComputedStyle(p).animationName]")
    # The edge itself is drawn solid (dashes mean "no gradient"); only the pulse moves.
    assert group.locator("path:not(.gt-pulse)").evaluate("p => getComputedStyle(p).strokeDasharray") == "none"
    if motion == "reduce":
        assert style == ["none", "none"]  # a plain state change: the edge turns coral
    else:
        assert style == ["inline", "gt-travel"]
    ctx.close()


def test_done_mark_is_coral_not_the_text_colour(
    page: Any, live_server: str, example_traces: dict[str, Any], screenshots: Any
) -> None:
    trace = example_traces["two-layer-linear"]
    last = len(trace["events"]) - 1  # the backward is over: every node it ran is done
    open_example(page, live_server, "two-layer-linear", f"&step={last}&theme=light")
    wait_step(page, last)
    mark = page.locator('#graph .gt-node[data-state="done"] .gt-done-mark').first
    colours = mark.evaluate(
        """m => ({mark: getComputedStyle(m).fill, opacity: getComputedStyle(m).opacity,
                  rect: getComputedStyle(m.closest('.gt-node').querySelector('rect')).stroke,
                  label: getComputedStyle(m.closest('.gt-node').querySelector('text:not(.gt-done-mark)')).fill})"""
    )
    # The done rect's stroke is the gradient coral (--gt-grad); the ✓ must match it, not the label.
    assert colours["mark"] == colours["rect"] != colours["label"], colours
    assert colours["opacity"] == "1"
    page.wait_for_timeout(300)
    page.locator("#graph").screenshot(path=str(screenshots / "two-layer-linear-done-marks.png"))
