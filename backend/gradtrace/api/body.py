"""Reading a JSON request body safely, and turning a spec into a checked ModelSpec.

We parse the body ourselves instead of letting FastAPI do it: non-finite numbers (NaN,
Infinity) are rejected while parsing (FastAPI's default answered 500 for a NaN in an int
field, its 422 echoed the input), deep nesting is an error instead of a RecursionError,
and no error message ever contains the raw body.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import Request

from gradtrace.api.errors import ApiError

# SpecError / TraceError codes that mean "too big", answered with 413 instead of 422.
_TOO_LARGE_CODES = {"limit_exceeded", "too_many_nodes", "too_large", "memory_limit", "too_deep"}


class _NonFinite(ValueError):
    pass


def _reject_constant(token: str) -> Any:
    raise _NonFinite(token)


def _check_content_type(request: Request) -> None:
    ctype = request.headers.get("content-type", "")
    media = ctype.split(";", 1)[0].strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        raise ApiError(
            415, "unsupported_media_type", "send the spec as JSON with Content-Type: application/json"
        )


def parse_json_bytes(raw: bytes) -> Any:
    if not raw.strip():
        raise ApiError(400, "invalid_json", "the request body is empty; send a JSON document")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(
            400, "invalid_json", f"the body is not UTF-8 (bad byte at offset {exc.start})"
        ) from exc
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except _NonFinite as exc:
        raise ApiError(
            400, "non_finite_number", f"{exc.args[0]} is not a JSON number; write explicit finite values"
        ) from exc
    except json.JSONDecodeError as exc:
        raise ApiError(
            400, "invalid_json", f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    except RecursionError as exc:
        raise ApiError(413, "too_deep", "the JSON document is nested too deeply") from exc


async def read_json(request: Request) -> Any:
    _check_content_type(request)
    raw = await request.body()  # max_body_size on the app answers 413 past the cap
    return parse_json_bytes(raw)


def spec_error_to_api(exc: Any) -> ApiError:
    """SpecError/TraceError (or the worker's dict of one) -> the 4xx envelope."""
    get = exc.get if isinstance(exc, dict) else lambda k, d=None: getattr(exc, k, d)
    code = get("code") or "invalid_spec"
    status = 413 if code in _TOO_LARGE_CODES else 422
    return ApiError(
        status,
        code,
        get("message") or "invalid spec",
        get("path") or None,
        extra={"line": get("line"), "column": get("column")},
    )


def _check_spec_sync(doc: Any) -> tuple[Any, dict[str, Any]]:
    from gradtrace.spec import SpecError, SpecLimits, check_declared, parse_spec

    try:
        spec = parse_spec(doc)
        check_declared(spec, SpecLimits())
        return spec, spec.normalized()
    except SpecError as exc:
        raise spec_error_to_api(exc) from exc
    except RecursionError as exc:
        raise ApiError(413, "too_deep", "the spec is nested too deeply") from exc


async def check_spec(doc: Any) -> tuple[Any, dict[str, Any]]:
    """Parse and check a spec (torch-free) off the event loop: (ModelSpec, normalised dict)."""
    if not isinstance(doc, dict):
        raise ApiError(422, "invalid_spec", "a spec is a JSON object", "")
    return await asyncio.to_thread(_check_spec_sync, doc)
