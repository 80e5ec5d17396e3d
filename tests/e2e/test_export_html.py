"""Export → HTML in real Chromium: the viewer stores the spec, downloads the server's one-file
player, and that file plays from disk with every network request blocked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import drawn_states, expected_states, open_example, wait_step

pytestmark = pytest.mark.browser


def test_export_html_downloads_a_player_that_steps_offline(
    page: Any, context: Any, live_server: str, example_traces: dict[str, Any], tmp_path: Path
) -> None:
    trace = example_traces["two-layer-linear"]
    open_example(page, live_server, "two-layer-linear", "&step=3")
    page.locator("#export-menu summary").click()
    with page.expect_download(timeout=180000) as dl:
        page.get_by_role("button", name="HTML", exact=True).click()
    assert dl.value.suggested_filename == "two-layer-linear.html"
    path = tmp_path / dl.value.suggested_filename
    dl.value.save_as(path)
    # Export stored the spec as a permalink, as Share does; an example run as it came keeps its
    # name in the page's URL (it does not turn into an "Edited spec").
    page.wait_for_timeout(300)  # past the view's own hash write
    hash_ = page.evaluate("() => location.hash")
    assert "example=two-layer-linear" in hash_ and "spec=" not in hash_
    page.close()

    # Open the file with the network cut: anything but file:// is aborted (and noted).
    offline = context.new_page()
    blocked: list[str] = []

    def block(route: Any) -> None:
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    offline.route("**/*", block)
    offline.goto(path.as_uri())
    offline.wait_for_selector("body.is-ready", timeout=60000)
    # The player opens on the finished forward graph, then steps into the backward pass.
    forward = next(p for p in trace["passes"] if p["phase"] == "forward")
    start = forward["last_seq"]
    wait_step(offline, start)
    assert drawn_states(offline) == expected_states(trace, start)
    before = drawn_states(offline)
    for step in (start + 1, start + 2):
        offline.get_by_role("button", name="Step forward").click()
        wait_step(offline, step)
        assert drawn_states(offline) == expected_states(trace, step)
    after = drawn_states(offline)
    assert "active" in after.values() and after != before  # a node lit up: the player steps
    offline.get_by_role("button", name="Restart").click()
    wait_step(offline, 0)
    assert drawn_states(offline) == expected_states(trace, 0)
    assert blocked == []
    offline.close()


def test_embedded_theme_is_read_from_the_data_block_and_the_hash_still_wins(
    page: Any, live_server: str, example_traces: dict[str, Any]
) -> None:
    trace = example_traces["two-layer-linear"]
    html = (Path(__file__).resolve().parents[2] / "frontend" / "embed.html").read_text()
    data = json.dumps({"trace": trace, "layout": None, "mode": "embed", "theme": "dark"}).replace(
        "</", "<\\/"
    )
    page_html = html.replace(
        "</head>", f'<script type="application/json" id="gradtrace-data">{data}</script></head>'
    )
    page.route("**/themed.html", lambda r: r.fulfill(body=page_html, content_type="text/html"))
    page.emulate_media(color_scheme="light")  # the reader's preference would be light
    page.goto(live_server + "/themed.html")
    page.wait_for_selector("body.is-ready", timeout=60000)
    assert page.evaluate("location.hash") == ""  # no hash involved
    assert "gt-theme-dark" in page.locator("html").get_attribute("class")
    page.goto("about:blank")
    page.goto(live_server + "/themed.html#theme=light")
    page.wait_for_selector("body.is-ready", timeout=60000)
    assert "gt-theme-light" in page.locator("html").get_attribute("class")
    assert "gt-theme-dark" not in page.locator("html").get_attribute("class")
