"""Reading a JSON request body safely, and turning a spec into a checked ModelSpec.

We parse the body ourselves instead of letting FastAPI do it: non-finite numbers (NaN,
Infinity, and literals such as 1e999 that overflow to infinity) and integers longer than
Python will convert are refused while parsing with the JSON Pointer of where they stand
(FastAPI's default answered 500 for a NaN in an int field, and an integer of more than
4,300 digits escaped as a ValueError); deep nesting is an error instead of a RecursionError;
a client that hangs up mid-body is one log line; no error message contains the raw body.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from fastapi import Request
from starlette.requests import ClientDisconnect

from gradtrace.api.cpu import BODY_BYTES, accepted, lane, refusals
from gradtrace.api.errors import ApiError
from gradtrace.problem import Problem
from gradtrace.service.trace_service import CheckedSpec

log = logging.getLogger(__name__)

# Python refuses int(str) past 4,300 digits (sys.get_int_max_str_digits); no spec field needs more.
MAX_INTEGER_DIGITS = 4300


class _Unreadable:
    """Stands in for a number JSON may spell but a spec may not hold; found again by a walk."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


def _check_content_type(request: Request) -> None:
    ctype = request.headers.get("content-type", "")
    media = ctype.split(";", 1)[0].strip().lower()
    if media != "application/json" and not (media.startswith("application/") and media.endswith("+json")):
        raise ApiError(
            415, "unsupported_media_type", "send the spec as JSON with Content-Type: application/json"
        )


def _parse_int(text: str) -> int | _Unreadable:
    digits = len(text) - text.startswith("-")
    if digits > MAX_INTEGER_DIGITS:
        return _Unreadable(f"an integer of {digits:,} digits is too long (at most {MAX_INTEGER_DIGITS:,})")
    return int(text)


def _parse_float(text: str) -> float | _Unreadable:
    value = float(text)
    if not math.isfinite(value):
        return _Unreadable(f"{text[:40]} overflows to infinity; write explicit finite values")
    return value


def _parse_constant(token: str) -> _Unreadable:
    return _Unreadable(f"{token} is not a JSON number; write explicit finite values")


def _find_unreadable(doc: Any) -> tuple[str, _Unreadable] | None:
    """The JSON Pointer and marker of the first unreadable number, in document order."""
    stack: list[tuple[Any, str]] = [(doc, "")]
    while stack:
        node, where = stack.pop()
        if isinstance(node, _Unreadable):
            return where, node
        if isinstance(node, dict):
            items = list(node.items())
        elif isinstance(node, list):
            items = list(enumerate(node))
        else:
            continue
        for key, child in reversed(items):
            stack.append((child, f"{where}/{str(key).replace('~', '~0').replace('/', '~1')}"))
    return None


def parse_json_bytes(raw: bytes) -> Any:
    if not raw.strip():
        raise ApiError(400, "invalid_json", "the request body is empty; send a JSON document")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(
            400, "invalid_json", f"the body is not UTF-8 (bad byte at offset {exc.start})"
        ) from exc
    unreadable: list[bool] = []

    def mark(parse: Any) -> Any:
        def parse_and_note(text: str) -> Any:
            value = parse(text)
            if isinstance(value, _Unreadable):
                unreadable.append(True)
            return value

        return parse_and_note

    try:
        doc = json.loads(
            text,
            parse_int=mark(_parse_int),
            parse_float=mark(_parse_float),
            parse_constant=mark(_parse_constant),
        )
    except json.JSONDecodeError as exc:
        raise ApiError(
            400, "invalid_json", f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    except RecursionError as exc:
        raise ApiError(413, "too_deep", "the JSON document is nested too deeply") from exc
    if unreadable:
        found = _find_unreadable(doc)
        path, marker = found if found is not None else ("", _Unreadable("a number cannot be read"))
        code = "number_too_long" if marker.why.startswith("an integer") else "non_finite_number"
        raise ApiError(400, code, f"{path or '/'}: {marker.why}", path)
    return doc


async def read_json(request: Request) -> Any:
    raw, _ = await _read_body(request)
    return parse_json_bytes(raw)


async def read_spec(request: Request) -> CheckedSpec:
    """The body's spec, parsed and checked (``check_spec``); the same bytes accepted before on
    this route are answered from memory, neither parsed nor checked again (the CPU lane's
    ``AcceptedMemory``)."""
    raw, key = await _read_body(request)
    memory = accepted()
    checked: CheckedSpec | None = memory.recall(key)
    if checked is None:
        checked = await check_spec(parse_json_bytes(raw))
        memory.remember(key, checked, len(raw))
    return checked


async def _read_body(request: Request) -> tuple[bytes, bytes]:
    """The raw body and its key (method, path, bytes); a body refused before is refused again."""
    _check_content_type(request)
    try:
        raw = await request.body()  # max_body_size on the app answers 413 past the cap
    except ClientDisconnect as exc:
        log.info("client disconnected before sending the whole body")
        raise ApiError(400, "client_disconnected", "the request body ended early") from exc
    BODY_BYTES.set(len(raw))  # the CPU lane's prior on what checking it will cost
    # The same body refused before is refused again from memory, before it is parsed (issue 38).
    memory = refusals()
    key = memory.key(request.method, request.url.path, raw)
    remembered = memory.recall(key)
    if remembered is not None:
        raise remembered
    request.state.body_key = key  # the error handler remembers a refusal under it
    return raw, key


def _check_spec_sync(doc: Any) -> CheckedSpec:
    from gradtrace.spec import SpecLimits, check_declared, check_price, parse_spec

    try:
        spec = parse_spec(doc)  # a bad spec raises SpecError, a Problem: the handler answers it
        limits = SpecLimits()
        check_declared(spec, limits)
        check_price(spec, limits)  # refused before a worker is taken (spec/price.py)
        return CheckedSpec(spec, spec.normalized())
    except RecursionError as exc:
        raise Problem("too_deep", "the spec is nested too deeply", "") from exc


async def check_spec(doc: Any) -> CheckedSpec:
    """Parse and check a spec (torch-free) off the event loop, the one time it is parsed on its
    way to a worker: the worker is handed the parsed ModelSpec (``CheckedSpec.spec``). It runs
    in the API's CPU lane (api/cpu.py), in this client's turn."""
    if not isinstance(doc, dict):
        raise Problem("invalid_spec", "a spec is a JSON object", "")
    return await lane().run(_check_spec_sync, doc)
