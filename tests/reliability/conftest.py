"""Fixtures shared by the reliability tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from server_process import ServerProcess


@pytest.fixture(scope="module")
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """A real server of the module's own (no rate limit: the tests are one client address)."""
    name = request.module.__name__.rsplit(".", 1)[-1]
    proc = ServerProcess(tmp_path_factory.mktemp(name), env={"GRADTRACE_RATE_PER_MINUTE": "0"})
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.stop()
