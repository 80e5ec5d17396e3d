"""Opening a trace.json from disk in real Chromium: dropped on the page, chosen with Open, and
served by ``gradtrace view``; a file that is not a trace is refused and the graph stays.

The trace files are what ``POST /api/v1/trace`` answers for the documented seed-002 spec (the
same document ``gradtrace trace`` writes): after opening, the page shows that trace's graph —
its node count, its hook node, its spec in the editor — not the example it started on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from design_specs import seed_002
from e2e_helpers import open_example, post_json
from server_process import gradtrace_view

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def seed_trace(live_server: str) -> dict[str, Any]:
    return post_json(live_server + "/api/v1/trace", seed_002())


def assert_shows(page: Any, trace: dict[str, Any], name: str) -> None:
    """The page shows `trace`, opened from the file `name`."""
    page.wait_for_function(
        "([n, name]) => document.body.dataset.nodes === String(n)"
        " && document.querySelector('#example').selectedOptions[0]?.textContent === `Opened file ${name}`",
        arg=[len(trace["graph"]["nodes"]), name],
        timeout=60000,
    )
    hook_ops = [n for n in trace["graph"]["nodes"] if n.get("op") == "BackwardHookFunctionBackward"]
    assert hook_ops, "seed 002 has the full backward hook's nodes"
    assert page.locator("#graph .gt-node", has_text="BackwardHookFunctionBackward").count() >= 1
    assert json.loads(page.locator("#spec").input_value()) == trace["spec"]
    assert page.locator("#status").inner_text() == ""
    assert "A trace opened from a file" in page.locator("#example-description").inner_text()


def file_transfer(page: Any, text: str, name: str) -> Any:
    """A DataTransfer carrying one file, as the browser makes for a file dragged from the desktop."""
    return page.evaluate_handle(
        "([text, name]) => { const dt = new DataTransfer();"
        " dt.items.add(new File([text], name, { type: 'application/json' })); return dt; }",
        [text, name],
    )


def test_a_dropped_trace_opens(
    page: Any, live_server: str, seed_trace: dict[str, Any], screenshots: Path
) -> None:
    open_example(page, live_server, "two-layer-linear")
    before = page.locator("#counter").inner_text().split("/")[1]
    transfer = file_transfer(page, json.dumps(seed_trace), "seed-002.json")
    # Dragged over the page: the hint says where it lands; dragged away: gone again.
    page.dispatch_event("#graph", "dragenter", {"dataTransfer": transfer})
    assert "is-dropping" in page.evaluate("() => document.body.className")
    assert page.locator(".drop-hint").is_visible()
    page.screenshot(path=str(screenshots / "open-trace-dragging.png"))
    page.dispatch_event("#graph", "dragleave", {"dataTransfer": transfer})
    assert page.locator(".drop-hint").is_hidden()
    # Dropped: what the browser sends is dragenter, dragover, drop.
    for kind in ("dragenter", "dragover", "drop"):
        page.dispatch_event("#graph", kind, {"dataTransfer": transfer})
    assert_shows(page, seed_trace, "seed-002.json")
    assert page.locator(".drop-hint").is_hidden()
    # The timeline is the opened trace's, and it opens at the end of its forward pass.
    forward = next(p for p in seed_trace["passes"] if p["phase"] == "forward")
    assert page.locator("#counter").inner_text().split("/")[1] != before
    assert page.locator("#counter").inner_text().split("/")[0].strip() == str(forward["last_seq"])
    page.screenshot(path=str(screenshots / "open-trace-dropped.png"))


def test_open_button_reads_the_chosen_file_and_refuses_a_bad_one(
    page: Any, live_server: str, seed_trace: dict[str, Any], screenshots: Path
) -> None:
    open_example(page, live_server, "two-layer-linear")
    shown = page.evaluate("() => document.body.dataset.nodes")
    # A spec is not a trace: refused, said why, the graph stays as it was.
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Open").click()
    chooser.value.set_files(
        {"name": "spec.json", "mimeType": "application/json", "buffer": json.dumps(seed_002()).encode()}
    )
    status = page.locator("#status.is-error")
    status.wait_for()
    assert status.inner_text() == (
        "spec.json cannot be opened: it is a model spec, not a trace: paste it into the editor and press Run"
    )
    assert page.evaluate("() => document.body.dataset.nodes") == shown
    page.screenshot(path=str(screenshots / "open-trace-refused.png"))
    # Another schema_version, and a file that is not JSON: each says so.
    page.set_input_files(
        "#open-trace-file",
        files=[
            {
                "name": "old.json",
                "mimeType": "application/json",
                "buffer": json.dumps({**seed_trace, "schema_version": 1}).encode(),
            }
        ],
    )
    page.wait_for_function("() => document.querySelector('#status').textContent.startsWith('old.json')")
    assert "schema_version 1; this viewer reads 2 or 3" in page.locator("#status").inner_text()
    page.set_input_files(
        "#open-trace-file",
        files=[{"name": "cut.json", "mimeType": "application/json", "buffer": b'{"schema_version": 3,'}],
    )
    page.wait_for_function("() => document.querySelector('#status').textContent.startsWith('cut.json')")
    assert "cut.json cannot be opened: it is not JSON" in page.locator("#status").inner_text()
    # The real trace opens through the same button, and clears the error.
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Open").click()
    chooser.value.set_files(
        {"name": "seed-002.json", "mimeType": "application/json", "buffer": json.dumps(seed_trace).encode()}
    )
    assert_shows(page, seed_trace, "seed-002.json")
    assert page.locator("#status.is-error").count() == 0


def test_gradtrace_view_opens_the_file_in_the_viewer(
    page: Any, tmp_path: Path, seed_trace: dict[str, Any], screenshots: Path
) -> None:
    trace_file = tmp_path / "seed-002.json"
    trace_file.write_text(json.dumps(seed_trace))
    with gradtrace_view(trace_file, tmp_path) as url:
        page.goto(url)
        page.wait_for_selector("body.is-ready", timeout=60000)
        assert_shows(page, seed_trace, "seed-002.json")
        page.screenshot(path=str(screenshots / "open-trace-gradtrace-view.png"))
