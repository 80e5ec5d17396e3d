"""``POST /api/v1/trace``: a model spec in, its trace out."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from gradtrace.api.body import read_spec
from gradtrace.api.deps import TraceServiceDep
from gradtrace.api.docs import NOT_MODIFIED, SPEC_BODY, SPEC_BODY_ERRORS, TRACE_RESPONSE
from gradtrace.api.tracing import trace_response

router = APIRouter(tags=["trace"])


@router.post(
    "/trace",
    summary="Trace a model spec",
    description="Builds the model the spec describes with real PyTorch, runs its forward program and "
    "steps with every hook recorded, and returns the trace. Identical specs are answered from a cache "
    "keyed by the content hash of the normalised spec (`ETag`, `X-Cache: hit|miss`).",
    openapi_extra=SPEC_BODY,
    responses={200: TRACE_RESPONSE, **NOT_MODIFIED, **SPEC_BODY_ERRORS},
    response_class=Response,
)
async def post_trace(request: Request, service: TraceServiceDep) -> Response:
    checked = await read_spec(request)
    return await trace_response(request, service, checked)
