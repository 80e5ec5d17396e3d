"""``POST /api/v1/compare``: two specs (or permalink ids) traced, then compared.

Each side is traced exactly as ``POST /trace`` traces it (same checks, cache, single flight
and workers, through one call of ``TraceService.trace``); an error of
either side is the usual envelope with its ``path`` under ``/a`` or ``/b``. The answer is
:func:`gradtrace.comparison.compare` of the two traces (``a`` the baseline, ``b`` the
variant: ``ratio`` is b / a), computed in a worker and cached by the pair of trace keys
(``TraceService.compare``): this process only moves bytes, and a cached comparison needs
neither trace. ``GET /schema/compare`` (in gradtrace.api.schemas) publishes the CompareDoc
JSON Schema.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from gradtrace.api.body import check_spec, read_json
from gradtrace.api.deps import StoreDep, TraceServiceDep, load_spec
from gradtrace.api.docs import COMPARE_REF, ERROR_RESPONSES, SPEC_REF, json_body
from gradtrace.api.errors import ApiError
from gradtrace.problem import Problem
from gradtrace.service.store import SpecStore
from gradtrace.service.trace_service import CheckedSpec, TraceService

router = APIRouter(tags=["compare"])

SIDES = ("a", "b")

_SIDE_SCHEMA: dict[str, Any] = {
    "oneOf": [SPEC_REF, {"type": "string", "description": "a permalink id (POST /specs)"}]
}
COMPARE_BODY = json_body(
    {
        "type": "object",
        "required": list(SIDES),
        "additionalProperties": False,
        "properties": dict.fromkeys(SIDES, _SIDE_SCHEMA),
    }
)


def _under(side: str, exc: Problem) -> Problem:
    """A copy of the problem (and of every one it lists), its JSON Pointer moved under its side.
    A copy: one answer may reach several requests (single flight), or both sides of this one."""
    moved = [copy.copy(problem) for problem in (exc, *exc.errors)]
    for problem in moved:
        problem.path = f"/{side}{problem.path or ''}"
    moved[0].errors = tuple(moved[1:])
    return moved[0]


async def _side_spec(store: SpecStore, side: str, given: Any) -> CheckedSpec:
    """The checked spec of one side: a spec object or a permalink id."""
    try:
        if isinstance(given, str):
            try:
                doc = await load_spec(store, given)
            except ApiError as exc:
                exc.path = ""  # load_spec names "/id"; here the id is the side itself
                raise
        elif isinstance(given, dict):
            doc = given
        else:
            raise ApiError(422, "invalid_request", f"{side} is a spec object or a permalink id (a string)")
        return await check_spec(doc)
    except Problem as exc:
        raise _under(side, exc) from None


async def _traced(service: TraceService, side: str, checked: CheckedSpec) -> bytes:
    try:
        data, _ = await service.trace(checked)
    except Problem as exc:
        raise _under(side, exc) from None
    return data


async def _both_traced(service: TraceService, specs: dict[str, CheckedSpec]) -> tuple[bytes, bytes]:
    traced = await asyncio.gather(*(_traced(service, s, specs[s]) for s in SIDES), return_exceptions=True)
    for outcome in traced:  # both runs finish (and fill the cache) before an error is answered
        if isinstance(outcome, BaseException):
            raise outcome
    trace_a, trace_b = (t for t in traced if isinstance(t, bytes))
    return trace_a, trace_b


@router.post(
    "/compare",
    summary="Compare two traces of one model: which nodes, edges, hooks and gradients changed",
    description='Body `{"a": …, "b": …}`, each a spec or a permalink id. Both are traced like '
    "`POST /trace` (cached), then matched node by node in a worker; every gradient and value is "
    "reported as changed or unchanged, with its largest difference and, when b is a scaled copy of a, "
    "the factor (`ratio` = b / a). The comparison is cached by the two traces' hashes, in order "
    "(`X-Cache: hit|miss`). Errors name the side: `path` starts with `/a` or `/b`.",
    openapi_extra=COMPARE_BODY,
    responses={
        200: {
            "description": "The comparison (see /api/v1/schema/compare)",
            "content": {"application/json": {"schema": COMPARE_REF}},
        },
        404: {**ERROR_RESPONSES[422], "description": "A permalink id that is not stored"},
        **ERROR_RESPONSES,
    },
    response_class=Response,
)
async def post_compare(request: Request, store: StoreDep, service: TraceServiceDep) -> Response:
    body = await read_json(request)
    if not isinstance(body, dict):
        raise ApiError(422, "invalid_request", 'the body is {"a": spec or id, "b": spec or id}', "")
    for side in SIDES:
        if side not in body:
            raise ApiError(
                422, "invalid_request", f"{side} is required: a spec or a permalink id", f"/{side}"
            )
    extra = sorted(set(body) - set(SIDES))
    if extra:
        raise ApiError(422, "invalid_request", f"unknown field {extra[0]!r}: only a and b", f"/{extra[0]}")
    specs = {side: await _side_spec(store, side, body[side]) for side in SIDES}
    keys = (specs["a"].key, specs["b"].key)
    permalinks = {side: body[side] for side in SIDES if isinstance(body[side], str)}
    data, how = await service.compare(keys, lambda: _both_traced(service, specs), permalinks)
    return Response(content=data, media_type="application/json", headers={"X-Cache": how})
