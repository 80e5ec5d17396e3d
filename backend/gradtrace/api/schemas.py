"""``GET /api/v1/schema/spec``, ``/schema/trace`` and ``/schema/compare``: the JSON Schemas of the
public formats."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from gradtrace.api.docs import NOT_MODIFIED
from gradtrace.api.tracing import not_modified

router = APIRouter(tags=["schemas"])

_CACHE_CONTROL = "public, max-age=3600"


@lru_cache(maxsize=3)
def _schema_bytes(which: str) -> tuple[bytes, str]:
    schema: dict[str, Any]
    if which == "spec":
        from gradtrace.spec import spec_json_schema

        schema = spec_json_schema()
    elif which == "compare":
        from gradtrace.comparison_schema import CompareDoc

        schema = CompareDoc.model_json_schema()
    else:
        from gradtrace.trace_schema import trace_json_schema

        schema = trace_json_schema()
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
    data = json.dumps(schema, indent=1, sort_keys=True).encode()
    return data, '"' + hashlib.sha256(data).hexdigest()[:32] + '"'


def _respond(request: Request, which: str) -> Response:
    data, etag = _schema_bytes(which)
    early = not_modified(request, etag, _CACHE_CONTROL)
    if early is not None:
        return early
    return Response(
        data, media_type="application/schema+json", headers={"ETag": etag, "Cache-Control": _CACHE_CONTROL}
    )


_SCHEMA_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A JSON Schema (draft 2020-12)",
        "content": {"application/schema+json": {"schema": {"type": "object"}}},
    },
    **NOT_MODIFIED,
}


@router.get(
    "/schema/spec",
    summary="JSON Schema of the model spec (version 1)",
    responses=_SCHEMA_RESPONSES,
    response_class=Response,
)
async def spec_schema(request: Request) -> Response:
    return _respond(request, "spec")


@router.get(
    "/schema/trace",
    summary="JSON Schema of the trace (schema_version 2)",
    responses=_SCHEMA_RESPONSES,
    response_class=Response,
)
async def trace_schema(request: Request) -> Response:
    return _respond(request, "trace")


@router.get(
    "/schema/compare",
    summary="JSON Schema of the comparison of two traces (POST /compare)",
    responses=_SCHEMA_RESPONSES,
    response_class=Response,
)
async def compare_schema(request: Request) -> Response:
    return _respond(request, "compare")
