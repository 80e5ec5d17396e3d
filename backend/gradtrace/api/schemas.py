"""``GET /api/v1/schema/spec``, ``/schema/trace`` and ``/schema/compare``: the JSON Schemas of the
public formats."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from gradtrace.api.docs import NOT_MODIFIED
from gradtrace.api.tracing import not_modified

router = APIRouter(tags=["schemas"])

_CACHE_CONTROL = "public, max-age=3600"


def _spec_schema() -> dict[str, Any]:
    from gradtrace.spec import spec_json_schema

    return spec_json_schema()


def _trace_schema() -> dict[str, Any]:
    from gradtrace.trace_schema import trace_json_schema

    return trace_json_schema()


def _compare_schema() -> dict[str, Any]:
    from gradtrace.comparison_schema import CompareDoc

    return CompareDoc.model_json_schema()


# GET /schema/<name>: (the route's summary, the schema's builder)
SCHEMAS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "spec": ("JSON Schema of the model spec (version 1)", _spec_schema),
    "trace": ("JSON Schema of the trace (schema_version 3)", _trace_schema),
    "compare": ("JSON Schema of the comparison of two traces (POST /compare)", _compare_schema),
}


@lru_cache(maxsize=len(SCHEMAS))
def _schema_bytes(which: str) -> tuple[bytes, str]:
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **SCHEMAS[which][1]()}
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


def _schema_route(which: str) -> Callable[[Request], Awaitable[Response]]:
    async def get_schema(request: Request) -> Response:
        return _respond(request, which)

    return get_schema


for _which, (_summary, _build) in SCHEMAS.items():
    router.add_api_route(
        f"/schema/{_which}",
        _schema_route(_which),
        methods=["GET"],
        summary=_summary,
        name=f"{_which}_schema",
        responses=_SCHEMA_RESPONSES,
        response_class=Response,
    )
