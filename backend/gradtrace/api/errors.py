"""One error envelope for every failure: ``{"error": {"code", "message", "path"}}``.

Handlers here turn every exception the app can meet into that envelope with a 4xx/503
status. Messages never contain the raw request body: they name fields and positions, and
JSON encoding escapes whatever user text (a name, a line) they quote.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

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


class ApiError(Exception):
    """Raise anywhere in a route: becomes the envelope with this status."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        path: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.path = path
        self.headers = headers or {}
        self.extra = extra or {}


def envelope(code: str, message: str, path: str | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message, "path": path}
    body.update({k: v for k, v in extra.items() if v is not None})
    return {"error": body}


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


def error_response(
    status: int,
    code: str,
    message: str,
    path: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    return SafeJSONResponse(envelope(code, message, path, **extra), status_code=status, headers=headers)


def _pointer(loc: tuple[Any, ...] | list[Any]) -> str:
    """FastAPI's ("body", "spec", 0) location -> JSON Pointer "/spec/0" (body prefix dropped)."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts) if parts else ""


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, exc.path, exc.headers, **exc.extra)


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
    return error_response(status, code, message, None, getattr(exc, "headers", None))


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    # Only the location and a fixed message per error type: FastAPI's default body echoes
    # the offending input, which may be non-encodable (NaN) or hostile.
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    path = _pointer(tuple(first.get("loc", ())))
    message = f"{first.get('msg', 'invalid value')} at {path or 'the request'}"
    return error_response(422, "invalid_request", message, path or None)


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    # Never a 500 to the client: log the bug, answer 503 so clients retry instead of giving up.
    log.exception("unhandled error", exc_info=exc)
    return error_response(
        503, "internal_error", "the server hit an unexpected error; retry later", headers={"Retry-After": "5"}
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected)
