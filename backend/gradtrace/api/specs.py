"""Permalinks: ``POST /api/v1/specs`` stores a spec, ``GET /specs/{id}`` and ``/specs/{id}/trace``.

The id is derived from the normalised spec's hash (same spec, same id; storing is
idempotent), so stored specs and their traces are immutable: long Cache-Control + ETag.
A permalink reaches its routes as ``StoredSpecDep`` (``api/deps.py``: id checked, spec loaded,
404 otherwise), as it does ``/specs/{id}/diagram.svg`` (api/diagram.py) and
``/specs/{id}/player.html`` (api/player.py).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from gradtrace.api.body import check_spec, read_json
from gradtrace.api.deps import (
    ClientIdDep,
    SettingsDep,
    StoreDep,
    StoredSpecDep,
    TraceServiceDep,
    store_call,
)
from gradtrace.api.docs import (
    ERROR_RESPONSES,
    NOT_MODIFIED,
    SPEC_BODY,
    SPEC_BODY_ERRORS,
    SPEC_REF,
    TRACE_RESPONSE,
    error_responses,
)
from gradtrace.api.tracing import IMMUTABLE, not_modified, trace_response
from gradtrace.service.hashing import permalink_id, spec_hash
from gradtrace.service.settings import Settings
from gradtrace.service.store import Quotas

router = APIRouter(tags=["permalinks"])


class Permalink(BaseModel):
    """What POST /specs answers: absolute links to the stored spec's views."""

    id: str
    url: str  # the viewer with this spec loaded
    embed_url: str  # the chromeless player, for an <iframe>
    diagram_url: str  # a static SVG, for <img> (GitHub READMEs included)


def public_base(request: Request, settings: Settings) -> str:
    return (settings.public_url or str(request.base_url)).rstrip("/")


def permalink_urls(base: str, spec_id: str) -> dict[str, str]:
    return {
        "id": spec_id,
        "url": f"{base}/?spec={spec_id}",
        "embed_url": f"{base}/embed/{spec_id}",
        "diagram_url": f"{base}/api/v1/specs/{spec_id}/diagram.svg",
    }


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
async def create_permalink(
    request: Request, settings: SettingsDep, store: StoreDep, client: ClientIdDep
) -> JSONResponse:
    doc = await read_json(request)
    normalized = (await check_spec(doc)).normalized
    spec_id = permalink_id(normalized)
    quotas = Quotas(settings.store_client_bytes_per_day, settings.store_total_bytes)
    created = await store_call(store.put, spec_id, spec_hash(normalized), normalized, client, quotas)
    base = public_base(request, settings)
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
async def get_permalink(request: Request, stored: StoredSpecDep) -> Response:
    # The spec is loaded first (StoredSpecDep): `If-None-Match: *` (or any tag) is honoured only
    # for a stored id (RFC 9110 13.1.2), and the ETag is the stored content's hash, never the id.
    etag = f'"{spec_hash(stored.doc)[:32]}"'
    early = not_modified(request, etag, IMMUTABLE)
    if early is not None:
        return early
    return JSONResponse(stored.doc, headers={"ETag": etag, "Cache-Control": IMMUTABLE})


@router.get(
    "/specs/{spec_id}/trace",
    summary="The trace of a stored spec (for the embed player); cached like POST /trace",
    responses={200: TRACE_RESPONSE, **ERROR_RESPONSES},
    response_class=Response,
)
async def get_permalink_trace(request: Request, stored: StoredSpecDep, service: TraceServiceDep) -> Response:
    checked = await check_spec(stored.doc)
    return await trace_response(request, service, checked, cache_control=IMMUTABLE)
