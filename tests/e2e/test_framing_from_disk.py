"""A page opened from disk (file:) frames a permalink's player, and not the app page, in real
Chromium: the header checks are in tests/api/test_framing.py. (Browser tests live here: a sync
Playwright session keeps an event loop in the test thread, which asyncio tests must not share.)"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page

pytestmark = pytest.mark.browser


def _frame_loaded(page: Page, name: str, marker: str, wait_s: float = 10.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        frame = page.frame(name=name)
        if frame is not None and frame.url.startswith("http"):
            try:
                if marker in frame.evaluate("document.title"):
                    return True
            except Exception:  # navigating, or a cross-origin error page: look again
                pass
        page.wait_for_timeout(200)
    return False


def test_a_page_opened_from_disk_frames_the_player_not_the_app(
    live_server: str, page: Page, tmp_path: Path
) -> None:
    spec = httpx.get(live_server + "/api/v1/examples/two-layer-linear", timeout=60).json()
    sid = httpx.post(live_server + "/api/v1/specs", json=spec, timeout=60).json()["id"]
    local = tmp_path / "embedding.html"
    local.write_text(
        "<!doctype html><title>host</title>"
        f'<iframe name="player" src="{live_server}/embed/{sid}" width="600" height="400"></iframe>'
        f'<iframe name="app" src="{live_server}/" width="600" height="400"></iframe>'
        f'<iframe name="trick" src="{live_server}/embed/..%2findex.html" width="600" height="400"></iframe>'
    )
    page.goto(local.as_uri())
    assert _frame_loaded(page, "player", "gradtrace player")
    assert not _frame_loaded(page, "app", "gradtrace", wait_s=2.0)
    assert not _frame_loaded(page, "trick", "gradtrace", wait_s=1.0)
