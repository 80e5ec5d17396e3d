"""Permalinks: ``POST /api/v1/specs`` stores a spec, ``GET /specs/{id}`` and ``/specs/{id}/trace``.

The id is derived from the normalised spec's hash (same spec, same id; storing is
idempotent), so stored specs and their traces are immutable: long Cache-Control + ETag.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from gradtrace.api.body import check_spec, read_json
from gradtrace.api.diagram import register_diagram_route
from gradtrace.api.docs import (
    ERROR_RESPONSES,
    NOT_MODIFIED,
    SPEC_BODY,
    SPEC_BODY_ERRORS,
    SPEC_REF,
    TRACE_RESPONSE,
    error_responses,
)
from gradtrace.api.errors import ApiError
from gradtrace.api.limits import client_id
from gradtrace.api.player import register_player_route
from gradtrace.api.tracing import IMMUTABLE, TraceServiceDep, not_modified, trace_response
from gradtrace.service.hashing import is_permalink_id, permalink_id, spec_hash
from gradtrace.service.store import QuotaExceeded, Quotas, StoreUnavailable

router = APIRouter(tags=["permalinks"])


class Permalink(BaseModel):
    """What POST /specs answers: absolute links to the stored spec's views."""

    id: str
    url: str  # the viewer with this spec loaded
    embed_url: str  # the chromeless player, for an <iframe>
    diagram_url: str  # a static SVG, for <img> (GitHub READMEs included)


def public_base(request: Request) -> str:
    configured = request.app.state.settings.public_url
    return (configured or str(request.base_url)).rstrip("/")


def permalink_urls(base: str, spec_id: str) -> dict[str, str]:
    return {
        "id": spec_id,
        "url": f"{base}/?spec={spec_id}",
        "embed_url": f"{base}/embed/{spec_id}",
        "diagram_url": f"{base}/api/v1/specs/{spec_id}/diagram.svg",
    }


async def _store_call(fn: Any, *args: Any) -> Any:
    try:
        return await asyncio.to_thread(fn, *args)
    except QuotaExceeded as exc:
        if exc.quota == "client":  # a day's window: it frees up as the window moves on
            raise ApiError(
                429,
                "client_storage_quota_exceeded",
                f"this client stored {exc.limit} bytes of specs in the last day, its quota; "
                "retry later (specs already stored stay available)",
                headers={"Retry-After": "3600"},
            ) from exc
        raise ApiError(
            413,
            "total_storage_quota_exceeded",
            f"the permalink store holds its quota of {exc.limit} bytes; no new specs are stored "
            "(specs already stored stay available)",
        ) from exc
    except StoreUnavailable as exc:
        raise ApiError(
            503,
            "store_unavailable",
            "the permalink store is unavailable; retry shortly",
            headers={"Retry-After": "5"},
        ) from exc


async def load_spec(request: Request, spec_id: str) -> dict[str, Any]:
    """The stored (normalised) spec of a permalink, or the 404 envelope."""
    if not is_permalink_id(spec_id):  # before any use: the store, a header, a log line
        raise ApiError(404, "permalink_not_found", "no permalink with this id", "/id")
    spec = await _store_call(request.app.state.store.get, spec_id)
    if spec is None:
        raise ApiError(404, "permalink_not_found", "no permalink with this id", "/id")
    return spec


@router.post(
    "/specs",
    status_code=201,
    summary="Store a spec: a permalink to the viewer, the embed player and the diagram",
    description="Returns `{id, url, embed_url, diagram_url}`. The id is derived from the normalised "
    "spec, so posting the same spec again returns the same id (200 instead of 201).",
    openapi_extra=SPEC_BODY,
    responses={
        201: {"model": Permalink, "description": "Stored"},
        200: {"model": Permalink, "description": "Already stored (same id)"},
        **SPEC_BODY_ERRORS,
    },
)
async def create_permalink(request: Request) -> JSONResponse:
    doc = await read_json(request)
    _, normalized = await check_spec(doc)
    spec_id = permalink_id(normalized)
    settings = request.app.state.settings
    quotas = Quotas(settings.store_client_bytes_per_day, settings.store_total_bytes)
    created = await _store_call(
        request.app.state.store.put, spec_id, spec_hash(normalized), normalized, client_id(request), quotas
    )
    base = public_base(request)
    return JSONResponse(
        permalink_urls(base, spec_id),
        status_code=201 if created else 200,
        headers={"Location": f"{base}/api/v1/specs/{spec_id}"},
    )


@router.get(
    "/specs/{spec_id}",
    summary="The stored (normalised) spec of a permalink",
    responses={
        200: {"description": "The spec", "content": {"application/json": {"schema": SPEC_REF}}},
        **NOT_MODIFIED,
        **error_responses(404, 503),
    },
    response_class=Response,
)
async def get_permalink(request: Request, spec_id: str) -> Response:
    # The spec is loaded first: `If-None-Match: *` (or any tag) is honoured only for a stored
    # id (RFC 9110 13.1.2), and the ETag is the stored content's hash, never the id as sent.
    spec = await load_spec(request, spec_id)
    etag = f'"{spec_hash(spec)[:32]}"'
    early = not_modified(request, etag, IMMUTABLE)
    if early is not None:
        return early
    return JSONResponse(spec, headers={"ETag": etag, "Cache-Control": IMMUTABLE})


@router.get(
    "/specs/{spec_id}/trace",
    summary="The trace of a stored spec (for the embed player); cached like POST /trace",
    responses={200: TRACE_RESPONSE, **ERROR_RESPONSES},
    response_class=Response,
)
async def get_permalink_trace(request: Request, spec_id: str, service: TraceServiceDep) -> Response:
    spec = await load_spec(request, spec_id)
    _, normalized = await check_spec(spec)
    return await trace_response(request, service, spec, normalized, cache_control=IMMUTABLE)


# GET /specs/{spec_id}/diagram.svg: the permalink's diagram (gradtrace.api.diagram).
register_diagram_route(router, load_spec)
# GET /specs/{spec_id}/player.html: the permalink as one offline HTML file (gradtrace.api.player).
register_player_route(router, load_spec)
