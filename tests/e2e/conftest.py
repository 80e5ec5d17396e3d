"""Browser end-to-end fixtures: real Debian Chromium (Playwright) against the real server.

``live_server`` (tests/conftest.py) gives the base URL. Helpers here compute the expected node
states from the trace JSON with the documented rule (trace_schema.py), independently of the JS.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import get_json, post_json

SCREENSHOTS = Path(__file__).parent / "screenshots"


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_context_args, "viewport": {"width": 1440, "height": 900}, "accept_downloads": True}


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(exist_ok=True)
    return SCREENSHOTS


@pytest.fixture(scope="session")
def examples(live_server: str) -> list[dict[str, Any]]:
    return get_json(live_server + "/api/v1/examples")


@pytest.fixture(scope="session")
def example_traces(live_server: str, examples: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every example's trace, as the API serves it (identical specs give identical traces)."""
    out = {}
    for ex in examples:
        spec = get_json(f"{live_server}/api/v1/examples/{ex['id']}")
        out[ex["id"]] = post_json(live_server + "/api/v1/trace", spec)
    return out
