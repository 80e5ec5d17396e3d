"""OpenAPI pieces: the spec request body, the trace response, the error envelope.

The spec and trace JSON Schemas are big and come from their own modules; routes refer to
them by ``$ref`` and ``install_openapi`` puts them into ``components.schemas`` once.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse

SPEC_REF = {"$ref": "#/components/schemas/ModelSpec"}
TRACE_REF = {"$ref": "#/components/schemas/TraceDoc"}
ERROR_REF = {"$ref": "#/components/schemas/ErrorEnvelope"}

SPEC_BODY: dict[str, Any] = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": SPEC_REF}}}
}
TRACE_RESPONSE: dict[str, Any] = {
    "description": "The trace (see /api/v1/schema/trace)",
    "content": {"application/json": {"schema": TRACE_REF}},
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ERROR_REF}}}


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _error("Not JSON, or a non-finite number (NaN, Infinity)"),
    413: _error("Body too large, or the spec exceeds a limit (elements, parameters, FLOPs, nodes)"),
    415: _error("Content-Type is not application/json"),
    431: _error("Request headers over 16 KiB in total"),
    422: _error("The spec is invalid, or PyTorch refused to build or run it; `path`/`line` point at it"),
    429: _error("Too many requests from this client; see Retry-After"),
    503: _error("Overloaded, or the worker running the trace died or ran out of time; see Retry-After"),
}

_ERROR_ENVELOPE_SCHEMA: dict[str, Any] = {
    "title": "ErrorEnvelope",
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "path"],
            "properties": {
                "code": {"type": "string", "description": "machine-readable, e.g. invalid_spec"},
                "message": {"type": "string"},
                "path": {"type": ["string", "null"], "description": "JSON Pointer into the request"},
                "line": {"type": "integer"},
                "column": {"type": "integer"},
            },
        }
    },
}


def _hoist(name: str, schema: dict[str, Any], prefix: str, out: dict[str, Any]) -> None:
    """Move a JSON Schema's ``$defs`` into components (prefixed so two schemas never collide)."""
    text = json.dumps(schema).replace('"#/$defs/', f'"#/components/schemas/{prefix}')
    text = text.replace('"#"', f'"#/components/schemas/{name}"')  # a self-reference to the root
    moved = json.loads(text)
    for def_name, definition in moved.pop("$defs", {}).items():
        out[prefix + def_name] = definition
    out[name] = moved


def _component_schemas() -> dict[str, Any]:
    from gradtrace.spec import spec_json_schema
    from gradtrace.trace_schema import trace_json_schema

    out: dict[str, Any] = {"ErrorEnvelope": _ERROR_ENVELOPE_SCHEMA}
    _hoist("ModelSpec", spec_json_schema(), "Spec", out)
    _hoist("TraceDoc", trace_json_schema(), "", out)
    return out


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            schema.setdefault("components", {}).setdefault("schemas", {}).update(_component_schemas())
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


SWAGGER_UI_PREFIX = "/vendor/swagger-ui"


def install_docs_page(app: FastAPI) -> None:
    """``/docs``: Swagger UI from the frontend's own npm package, so it works offline too."""

    @app.get("/docs", include_in_schema=False)
    def docs_page() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="gradtrace API",
            swagger_js_url=f"{SWAGGER_UI_PREFIX}/swagger-ui-bundle.js",
            swagger_css_url=f"{SWAGGER_UI_PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{SWAGGER_UI_PREFIX}/favicon-32x32.png",
        )
