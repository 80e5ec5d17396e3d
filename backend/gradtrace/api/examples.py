"""``GET /api/v1/examples`` (the gallery) and ``/examples/{id}`` (one example's spec)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from gradtrace.api.docs import error_responses
from gradtrace.api.errors import ApiError

router = APIRouter(tags=["examples"])


@router.get("/examples", summary="The example gallery: [{id, title, description}]")
async def examples_list() -> list[dict[str, Any]]:
    from gradtrace.examples import list_examples

    return list_examples()


@router.get(
    "/examples/{example_id}",
    summary="One example's spec, ready to POST to /trace",
    responses=error_responses(404),
)
async def example_get(example_id: str) -> dict[str, Any]:
    from gradtrace.examples import get_example, list_examples

    if example_id not in {e["id"] for e in list_examples()}:
        raise ApiError(404, "example_not_found", "no example with this id; see GET /api/v1/examples", "/id")
    return get_example(example_id)
