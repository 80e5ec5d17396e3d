"""Every example, loaded in real Chromium: the drawn node states equal the documented rule at
chosen steps, reached by URL, keys, buttons and the slider; play runs to the end; screenshots
of a forward and a backward step are saved for a human to look at."""

from __future__ import annotations

from typing import Any

import pytest
from e2e_helpers import (
    chosen_steps,
    drawn_edge_chips,
    drawn_states,
    expected_scalar_edge_chips,
    expected_states,
    open_example,
    wait_step,
)

from gradtrace.examples import example_ids

pytestmark = pytest.mark.browser

# Every example the gallery has: a new example is played in the browser without editing this file.
EXAMPLE_IDS = list(example_ids())


def test_example_select_lists_every_example(
    page: Any, live_server: str, examples: list[dict[str, Any]]
) -> None:
    page.goto(live_server + "/")
    page.wait_for_selector("body.is-ready", timeout=60000)
    options = page.get_by_label("Example").locator("option").evaluate_all("os => os.map(o => o.value)")
    assert options == [e["id"] for e in examples]
    assert options == EXAMPLE_IDS


def check_states(page: Any, trace: dict[str, Any], step: int, where: str) -> None:
    wait_step(page, step)
    drawn = drawn_states(page)
    expected = expected_states(trace, step)
    assert drawn, f"{where}: no nodes drawn"
    assert drawn == {k: expected[k] for k in drawn}, f"{where}: step {step}"


@pytest.mark.parametrize("example_id", EXAMPLE_IDS)
def test_example_states_play_and_screenshots(
    page: Any, live_server: str, example_traces: dict[str, Any], screenshots: Any, example_id: str
) -> None:
    trace = example_traces[example_id]
    n = len(trace["events"])
    open_example(page, live_server, example_id)
    # The editor holds the example's spec, and every node is drawn (collapsed only past 400 nodes).
    assert '"forward"' in page.get_by_role("textbox", name="Spec").input_value()
    drawn = drawn_states(page)
    if len(trace["graph"]["nodes"]) <= 400:
        assert set(drawn) == {node["id"] for node in trace["graph"]["nodes"]}

    steps = chosen_steps(trace)
    # Reach each chosen step through the URL (every step is a link).
    for s in steps:
        page.evaluate(f"location.hash = 'example={example_id}&step={s}'")
        check_states(page, trace, s, "url")
    # Step forward and back with buttons and keys: the states come back exactly.
    mid = steps[len(steps) // 2]
    page.evaluate(f"location.hash = 'example={example_id}&step={mid}'")
    wait_step(page, mid)
    if mid + 1 < n:
        page.get_by_role("button", name="Step forward").click()
        check_states(page, trace, mid + 1, "step forward")
        page.get_by_role("button", name="Step back").click()
        check_states(page, trace, mid, "step back")
    page.locator("#graph").click(position={"x": 5, "y": 5})
    page.keyboard.press("ArrowLeft")
    check_states(page, trace, max(0, mid - 1), "key left")
    page.keyboard.press("ArrowRight")
    check_states(page, trace, mid, "key right")
    # Scrub with the slider.
    for s in (steps[-1], steps[0], mid):
        page.get_by_label("Timeline").fill(str(s))
        check_states(page, trace, s, "slider")
    # Screenshots at a forward and a backward step.
    fwd = next(p for p in trace["passes"] if p["phase"] == "forward")
    fwd_step = max(fwd["first_seq"], fwd["last_seq"] - 1)
    page.get_by_label("Timeline").fill(str(fwd_step))
    wait_step(page, fwd_step)
    # the nodes' 0.25 s fade (graph.css) finished for the picture, not waited for
    page.screenshot(path=str(screenshots / f"{example_id}-forward.png"), animations="disabled")
    bwd = [p for p in trace["passes"] if p["phase"] == "backward"]
    if bwd:
        b = bwd[-1]
        bstep = b["first_seq"] + 2 * (b["last_seq"] - b["first_seq"]) // 3
        page.get_by_label("Timeline").fill(str(bstep))
        check_states(page, trace, bstep, "backward screenshot")
        # The coral chips print the trace's gradients (one-number ones compared exactly).
        chips = drawn_edge_chips(page)
        for edge_id, text in expected_scalar_edge_chips(trace, bstep).items():
            assert chips.get(edge_id) == text, f"edge {edge_id} at step {bstep}"
        page.screenshot(path=str(screenshots / f"{example_id}-backward.png"), animations="disabled")
    # Home restarts; play runs through to the last event, then the button offers Play again.
    page.keyboard.press("Home")
    wait_step(page, 0)
    page.get_by_label("Speed").select_option("240")
    page.get_by_role("button", name="Play").click()
    # (At 240 events/s a short trace may finish before "Pause" could be seen: no wait for it.)
    wait_step(page, n - 1)
    page.get_by_role("button", name="Play").wait_for(timeout=5000)
    check_states(page, trace, n - 1, "after play")
