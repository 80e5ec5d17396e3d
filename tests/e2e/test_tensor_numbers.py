"""Tensors past 16 elements keep their numbers in the trace's ``tensor_data`` (schema 3: each
base64 block written once, a TensorValue's ``data`` its index). In real Chromium the inspector
shows those numbers, exactly the trace's, whichever way the trace entered the viewer (the API,
the one-file player), and Export → JSON writes the trace back as the server wrote it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import open_example

from gradtrace.render.page import standalone_html
from gradtrace.trace import tensor_array

pytestmark = pytest.mark.browser
EXAMPLE = "mlp-hooks-reconstruction"  # x is (5, 6, 4): 120 numbers, past the 16 written inline


def leaf_x(trace: dict[str, Any]) -> dict[str, Any]:
    return next(n for n in trace["graph"]["nodes"] if n["kind"] == "tensor" and n.get("tensor") == "x")


def expected_numbers(trace: dict[str, Any], value: dict[str, Any]) -> list[float]:
    return tensor_array(value, trace["tensor_data"]).astype("float64").ravel().tolist()


def heatmap_numbers(page: Any, section_title: str) -> list[float]:
    """The numbers of the heatmap in the inspector's section `section_title`, at full precision
    (each cell's title: "[r, c] = −1.1258398294448853")."""
    section = page.locator("#inspector section").filter(
        has=page.get_by_role("heading", name=section_title, exact=True)
    )
    titles = section.locator(".heatmap .cell").evaluate_all("els => els.map(e => e.title)")
    return [float(t.split(" = ")[1].replace("\u2212", "-")) for t in titles]


def assert_inspector_shows_x(page: Any, trace: dict[str, Any]) -> None:
    page.get_by_role("region", name="Inspector").get_by_role("heading", name="x", exact=True).wait_for()
    x = leaf_x(trace)
    assert heatmap_numbers(page, "Value") == expected_numbers(trace, x["value"])
    assert heatmap_numbers(page, ".grad") == expected_numbers(trace, trace["grads"]["x"])


def test_inspector_shows_numbers_kept_in_tensor_data(
    page: Any, live_server: str, example_traces: dict[str, Any], tmp_path: Path, screenshots: Path
) -> None:
    trace = example_traces[EXAMPLE]
    x = leaf_x(trace)
    assert trace["schema_version"] == 3 and isinstance(x["value"]["data"], int)
    last = len(trace["events"]) - 1
    open_example(page, live_server, EXAMPLE, f"&step={last}&node={x['id']}")
    assert_inspector_shows_x(page, trace)
    page.screenshot(path=str(screenshots / "inspector-tensor-data.png"))
    page.locator("#export-menu summary").click()
    with page.expect_download() as dl:
        page.get_by_role("button", name="JSON", exact=True).click()
    exported = tmp_path / dl.value.suggested_filename
    dl.value.save_as(exported)
    assert json.loads(exported.read_text()) == trace  # indices and blocks as the server wrote them


def test_one_file_player_shows_numbers_kept_in_tensor_data(
    page: Any, example_traces: dict[str, Any], tmp_path: Path
) -> None:
    trace = example_traces[EXAMPLE]
    player = tmp_path / "player.html"
    player.write_text(standalone_html(trace), encoding="utf-8")
    page.goto(f"{player.as_uri()}#step={len(trace['events']) - 1}&node={leaf_x(trace)['id']}")
    page.wait_for_selector("body.is-ready", timeout=60000)
    assert_inspector_shows_x(page, trace)
