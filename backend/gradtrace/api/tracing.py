"""Spec -> trace bytes, shared by ``POST /trace`` and ``GET /specs/{id}/trace``.

Order of defences: the spec was parsed and its declared sizes checked in the API process
(torch-free); the cache (by content hash) answers identical specs; identical specs in
flight at the same moment share one worker run (single flight); the worker dry-runs on the
``meta`` device, then traces under CPU, memory and wall-clock bounds. The worker's JSON
bytes go back to the client as they are (no re-validation, no re-encoding).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from gradtrace.api.errors import ApiError
from gradtrace.service.hashing import trace_key
from gradtrace.service.workers import WorkerUnavailable

log = logging.getLogger(__name__)

IMMUTABLE = "public, max-age=31536000, immutable"


def etag_of(key: str) -> str:
    return f'"{key[:32]}"'


def not_modified(request: Request, etag: str, cache_control: str | None) -> Response | None:
    tags = request.headers.get("if-none-match")
    if tags and (tags.strip() == "*" or etag in [t.strip() for t in tags.split(",")]):
        headers = {"ETag": etag}
        if cache_control:
            headers["Cache-Control"] = cache_control
        return Response(status_code=304, headers=headers)
    return None


async def _compute(request: Request, key: str, spec_doc: dict[str, Any]) -> bytes:
    state = request.app.state
    try:
        outcome = await state.pool.run_trace(spec_doc)
    except WorkerUnavailable as exc:
        raise ApiError(503, exc.code, exc.message, headers={"Retry-After": str(exc.retry_after)}) from exc
    if outcome.kind == "ok":
        await state.cache.set(key, outcome.payload)
        return outcome.payload
    raise outcome.payload  # the worker's Problem, unchanged


async def trace_bytes(
    request: Request, spec_doc: dict[str, Any], normalized: dict[str, Any]
) -> tuple[bytes, str]:
    """(trace JSON bytes, "hit"|"miss"|"shared") for a checked spec."""
    state = request.app.state
    key = trace_key(normalized)
    cached = await state.cache.get(key)
    if cached is not None:
        return cached, "hit"
    inflight: dict[str, asyncio.Future[bytes]] = state.inflight
    if key in inflight:
        return await asyncio.shield(inflight[key]), "shared"
    future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    inflight[key] = future
    try:
        data = await _compute(request, key, spec_doc)
        future.set_result(data)
        return data, "miss"
    except asyncio.CancelledError:
        future.cancel()
        raise
    except BaseException as exc:
        future.set_exception(exc)
        future.exception()  # mark retrieved: no "never retrieved" warning when nobody shared it
        raise
    finally:
        inflight.pop(key, None)


async def trace_response(
    request: Request, spec_doc: dict[str, Any], normalized: dict[str, Any], cache_control: str | None = None
) -> Response:
    key = trace_key(normalized)
    etag = etag_of(key)
    early = not_modified(request, etag, cache_control)
    if early is not None:
        return early
    data, how = await trace_bytes(request, spec_doc, normalized)
    headers = {"ETag": etag, "X-Cache": how}
    if cache_control:
        headers["Cache-Control"] = cache_control
    return Response(content=data, media_type="application/json", headers=headers)
