"""``GET /api/v1/examples`` (the gallery) and ``/examples/{id}`` (one example's spec); the
gallery's whole programs (``gradtrace.watch`` training runs, posted to /run as written):
``GET /api/v1/program-examples`` and ``/program-examples/{id}``."""

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


@router.get(
    "/program-examples",
    summary="The gallery's programs (training runs under gradtrace.watch): [{id, title, description, python}]; "
    "POST one's python to /run",
)
async def programs_list() -> list[dict[str, Any]]:
    from gradtrace.examples import list_programs

    return list(list_programs())


@router.get(
    "/program-examples/{program_id}",
    summary="One gallery program: {id, title, description, python}",
    responses=error_responses(404),
)
async def program_get(program_id: str) -> dict[str, Any]:
    from gradtrace.examples import get_program

    try:
        return dict(get_program(program_id))
    except KeyError:
        raise ApiError(
            404, "example_not_found", "no program with this id; see GET /api/v1/program-examples", "/id"
        ) from None
