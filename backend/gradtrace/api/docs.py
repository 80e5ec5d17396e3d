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
COMPARE_REF = {"$ref": "#/components/schemas/CompareDoc"}

SPEC_BODY: dict[str, Any] = {
    "requestBody": {"required": True, "content": {"application/json": {"schema": SPEC_REF}}}
}
TRACE_RESPONSE: dict[str, Any] = {
    "description": "The trace (see /api/v1/schema/trace)",
    "content": {"application/json": {"schema": TRACE_REF}},
}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ERROR_REF}}}


# What each error status means on this API; routes list the ones they can answer.
_ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "Not JSON, a non-finite number (NaN, Infinity, 1e999), an integer over 4,300 digits, "
    "a body that ended early, or a malformed HTTP request",
    404: "No such resource (`path` names the id)",
    413: "Body too large, or the spec exceeds a limit (elements, parameters, FLOPs, nodes, memory)",
    415: "Content-Type is not application/json",
    422: "The spec is invalid, or PyTorch refused to build or run it; `path`/`line`/`column` point at "
    "it and `errors` lists every validation error found",
    429: "Too many requests from this client, or too many of its requests in flight at once; see Retry-After",
    431: "Request headers over 16 KiB in total",
    503: "Overloaded, a worker died or ran out of time, a store is unreachable, or an unexpected "
    "error; see Retry-After",
}


def json_body(schema: dict[str, Any], example: Any = None) -> dict[str, Any]:
    """A route's required JSON request body, for ``openapi_extra`` (we read bodies ourselves)."""
    media: dict[str, Any] = {"schema": schema}
    if example is not None:
        media["example"] = example
    return {"requestBody": {"required": True, "content": {"application/json": media}}}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for these error statuses, each with the envelope's schema."""
    return {status: _error(_ERROR_DESCRIPTIONS[status]) for status in statuses}


NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {"description": "Not modified: `If-None-Match` named the current ETag"}
}
# A spec in the body: bad JSON (400), too big (413), not JSON (415), invalid (422), workers (503).
SPEC_BODY_ERRORS = error_responses(400, 413, 415, 422, 503)
# What a GET computed from a stored spec (its trace, diagram, player) answers besides 200: its ETag
# matched, an unknown id, the engine's verdict (limits, a forward error), workers or renderer down.
ERROR_RESPONSES = {**NOT_MODIFIED, **error_responses(404, 413, 422, 503)}

# Statuses any request can get, whatever the route: added to every operation by install_openapi.
_EVERY_ROUTE = (400, 413, 431, 503)  # malformed HTTP, declared Content-Length over the cap, headers, bugs
_API_ROUTE = (429,)  # the per-client rate limit on /api/v1

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
                "line": {"type": "integer", "description": "1-based line of the program when known"},
                "column": {"type": "integer", "description": "1-based column in that line when known"},
                "errors": {
                    "type": "array",
                    "description": "Every validation error found, the first one repeated from above",
                    "items": {
                        "type": "object",
                        "required": ["code", "message", "path"],
                        "properties": {
                            "code": {"type": "string"},
                            "message": {"type": "string"},
                            "path": {"type": ["string", "null"]},
                            "line": {"type": "integer"},
                            "column": {"type": "integer"},
                        },
                    },
                },
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
    from gradtrace.comparison_schema import CompareDoc
    from gradtrace.spec import spec_json_schema
    from gradtrace.trace_schema import trace_json_schema

    out: dict[str, Any] = {"ErrorEnvelope": _ERROR_ENVELOPE_SCHEMA}
    _hoist("ModelSpec", spec_json_schema(), "Spec", out)
    _hoist("TraceDoc", trace_json_schema(), "", out)
    _hoist("CompareDoc", CompareDoc.model_json_schema(), "Compare", out)
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
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.update(_component_schemas())
            _document_every_status(schema)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _is_fastapi_validation_error(response: dict[str, Any]) -> bool:
    content = response.get("content", {}).get("application/json", {})
    return content.get("schema", {}).get("$ref", "").endswith("/HTTPValidationError")


def _document_every_status(schema: dict[str, Any]) -> None:
    """Make the document say what the server does, beyond what each route declares.

    FastAPI documents a 422 "Validation Error" for every route with a parameter; our routes
    read their bodies themselves and take only string ids, so that answer never happens and
    is removed. What the middleware, the rate limiter and the error handlers can answer on any
    route (400, 413, 431, 503; 429 on the API; 404 for an unknown id) is added.
    """
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            if _is_fastapi_validation_error(responses.get("422", {})):
                del responses["422"]
            extra = list(_EVERY_ROUTE)
            if path.startswith("/api/"):
                extra += _API_ROUTE
            if "{" in path:
                extra.append(404)
            for status in extra:
                responses.setdefault(str(status), _error(_ERROR_DESCRIPTIONS[status]))
            operation["responses"] = dict(sorted(responses.items()))
    components = schema.get("components", {}).get("schemas", {})
    text = json.dumps(schema.get("paths", {}))
    for name in ("HTTPValidationError", "ValidationError"):
        if f"/{name}" not in text:
            components.pop(name, None)


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
