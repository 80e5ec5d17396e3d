"""Spec -> trace response, shared by ``POST /trace`` and ``GET /specs/{id}/trace``.

Routes get the ``TraceService`` (cache, single flight, workers: ``service/trace_service.py``)
as ``TraceServiceDep`` (``api/deps.py``); this module adds what HTTP needs on top of it (ETag,
304, ``X-Cache``) and turns the service's two failures into envelopes in one place
(``api_error_of``).
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from gradtrace.api.errors import ApiError
from gradtrace.problem import Problem
from gradtrace.service.trace_service import (
    CacheStatus,
    CheckedSpec,
    TraceRejected,
    TraceService,
    WorkerUnavailable,
)

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


def api_error_of(exc: WorkerUnavailable | TraceRejected) -> Problem:
    """The one place a worker's failure becomes an HTTP error."""
    if isinstance(exc, WorkerUnavailable):
        return ApiError(503, exc.code, exc.message, headers={"Retry-After": str(exc.retry_after)})
    return exc.outcome.payload  # the worker's Problem, unchanged


async def trace_bytes(service: TraceService, checked: CheckedSpec) -> tuple[bytes, CacheStatus]:
    """(trace JSON bytes, "hit"|"miss"|"shared") for a checked spec, or the ApiError."""
    try:
        return await service.trace(checked)
    except (WorkerUnavailable, TraceRejected) as exc:
        raise api_error_of(exc) from exc


async def trace_response(
    request: Request,
    service: TraceService,
    checked: CheckedSpec,
    cache_control: str | None = None,
) -> Response:
    etag = etag_of(checked.key)
    early = not_modified(request, etag, cache_control)
    if early is not None:
        return early
    data, how = await trace_bytes(service, checked)
    headers = {"ETag": etag, "X-Cache": how}
    if cache_control:
        headers["Cache-Control"] = cache_control
    return Response(content=data, media_type="application/json", headers=headers)
