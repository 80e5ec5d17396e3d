"""One error envelope for every failure: ``{"error": {"code", "message", "path", …}}``.

Every failure is a ``Problem`` (``gradtrace.problem``) by the time it reaches a handler
here — raised by the spec validator, the engine, a worker (pickled back unchanged) or a
route — and is written as it is: its status, its headers, its fields (``line``/``column``
when known, ``errors`` when several were found). Framework exceptions (404s, 405s, FastAPI's
request validation) become Problems here too, so the envelope has one writer. Messages
never contain the raw request body: they name fields and positions, and JSON encoding
escapes whatever user text (a name, a line) they quote.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from gradtrace.api.cpu import refusals
from gradtrace.problem import Problem

log = logging.getLogger(__name__)

# Status codes the contract allows; anything else a handler is asked for becomes 400.
_STATUS_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_spec",
    429: "rate_limited",
    503: "unavailable",
}


class ApiError(Problem):
    """A Problem raised by a route, status first: ``ApiError(404, "not_found", "…", "/id")``.

    Only the argument order is its own; the handler sees a Problem like any other.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        path: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(code, message, path, status=status, headers=headers)


class SafeJSONResponse(JSONResponse):
    """JSON with <, > and & escaped: quoted user text can never become markup anywhere."""

    def render(self, content: Any) -> bytes:
        return (
            super()
            .render(content)
            .replace(b"<", b"\\u003c")
            .replace(b">", b"\\u003e")
            .replace(b"&", b"\\u0026")
        )


def problem_response(problem: Problem) -> JSONResponse:
    """The envelope ``{"error": problem.to_dict()}`` with the problem's status and headers."""
    return SafeJSONResponse({"error": problem.to_dict()}, status_code=problem.status, headers=problem.headers)


def error_response(
    status: int, code: str, message: str, path: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An envelope answered directly (health probes, middleware), without raising."""
    return problem_response(Problem(code, message, path, status=status, headers=headers))


def _pointer(loc: tuple[Any, ...] | list[Any]) -> str:
    """FastAPI's ("body", "spec", 0) location -> JSON Pointer "/spec/0" (body prefix dropped)."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts) if parts else ""


async def _problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Problem)
    key = getattr(request.state, "body_key", None)  # set by read_json (api/body.py)
    if key is not None:
        refusals().remember(key, exc)  # refusals of this body only (api/cpu.py: RefusalMemory)
    return problem_response(exc)


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code if exc.status_code in _STATUS_CODES else 400
    code = _STATUS_CODES[status]
    message = {
        404: "no such resource",
        405: "method not allowed on this resource",
        413: "request body too large",
        406: "not acceptable",
    }.get(status, "bad request")
    return problem_response(Problem(code, message, status=status, headers=getattr(exc, "headers", None)))


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    # Only the location and a fixed message per error type: FastAPI's default body echoes
    # the offending input, which may be non-encodable (NaN) or hostile.
    assert isinstance(exc, RequestValidationError)
    problems = [
        Problem(
            "invalid_request",
            f"{e.get('msg', 'invalid value')} at {p or 'the request'}",
            p or None,
            status=422,
        )
        for e in exc.errors()
        for p in [_pointer(e.get("loc", ()))]
    ] or [Problem("invalid_request", "invalid request", status=422)]
    return problem_response(problems[0].with_errors(problems))


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    # Never a 500 to the client: log the bug, answer 503 so clients retry instead of giving up.
    log.exception("unhandled error", exc_info=exc)
    return problem_response(
        Problem(
            "internal_error",
            "the server hit an unexpected error; retry later",
            status=503,
            headers={"Retry-After": "5"},
        )
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(Problem, _problem)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected)
