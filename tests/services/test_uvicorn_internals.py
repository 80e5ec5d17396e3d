"""The server's bet on uvicorn's internals (``ReadDeadlineH11Protocol`` subclasses its H11Protocol
and reads its attributes): the installed uvicorn has them, and one that moved them stops
``gradtrace serve`` at start-up naming what moved, instead of serving without deadlines."""

from __future__ import annotations

import pytest
import uvicorn
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.h11_impl import H11Protocol

from gradtrace.service import server


def test_the_installed_uvicorn_has_what_the_server_relies_on() -> None:
    server.check_uvicorn_internals()


def test_a_method_that_moved_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(H11Protocol, "pause_writing")
    with pytest.raises(RuntimeError, match=r"H11Protocol\.pause_writing") as caught:
        server.check_uvicorn_internals()
    assert uvicorn.__version__ in str(caught.value)


def test_an_attribute_that_moved_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "_UVICORN_ATTRIBUTES", ((FlowControl.__init__, frozenset({"paused"})),))
    with pytest.raises(RuntimeError, match=r"FlowControl\.__init__ sets no paused"):
        server.check_uvicorn_internals()


def test_serve_checks_before_it_listens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(H11Protocol, "on_response_complete")
    with pytest.raises(RuntimeError, match="on_response_complete"):
        server.serve(None, "127.0.0.1", 0)  # type: ignore[arg-type]
