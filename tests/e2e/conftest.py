"""Browser end-to-end fixtures: real Debian Chromium (Playwright) against the real server.

``live_server`` (tests/conftest.py) gives the base URL. Helpers here compute the expected node
states from the trace JSON with the documented rule (trace_schema.py), independently of the JS.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import get_json, post_json
from server_process import runner_server

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


class _TracesOnDemand(dict[str, dict[str, Any]]):
    """Example id -> its trace as the API serves it, traced the first time a test asks for it.
    A test session (each xdist worker has its own) traces the examples its tests read, not all."""

    def __init__(self, live_server: str) -> None:
        super().__init__()
        self.live_server = live_server

    def __missing__(self, example_id: str) -> dict[str, Any]:
        spec = get_json(f"{self.live_server}/api/v1/examples/{example_id}")
        self[example_id] = trace = post_json(self.live_server + "/api/v1/trace", spec)
        return trace


@pytest.fixture(scope="session")
def example_traces(live_server: str) -> dict[str, dict[str, Any]]:
    """Every example's trace, as the API serves it (identical specs give identical traces); the
    server keeps each in its cache, so the viewer's load of the same example is a hit."""
    return _TracesOnDemand(live_server)


@pytest.fixture(scope="session")
def run_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server whose POST /run jail is on (the PyTorch tab's Run, the run view's gallery),
    one for the session's browser tests that run programs."""
    with runner_server(tmp_path_factory.mktemp("run_server")) as server:
        yield server.url
