"""``POST /api/v1/run``: a pasted PyTorch program in, its trace, output and exception out.

The program runs as written in the jail (``service/jail_pool.py``) under ``gradtrace.record()``;
one that calls ``gradtrace.watch`` runs without it and answers its run (``service/jail_watch.py``).
Here, before any jail is used: the body is ``{"python": "<source>"}`` and nothing else, the
source is bounded and must parse (a syntax error is a 422 naming its line). The run is priced
like a trace (the client's worker time, the costly-source memory, the cache, all keyed by
the source's hash: ``TraceService.run``) and stored as a permalink that keeps the source:
``GET /api/v1/runs/{id}`` gives it back. The contract: /work/notes/run-api.md, README's API.
"""

from __future__ import annotations

import ast
import asyncio
import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from gradtrace.api.body import read_json
from gradtrace.api.deps import ClientIdDep, SettingsDep, StoreDep, TraceServiceDep, load_spec
from gradtrace.api.docs import error_responses, json_body
from gradtrace.api.errors import ApiError
from gradtrace.api.tracing import IMMUTABLE, etag_of
from gradtrace.problem import Problem
from gradtrace.service.hashing import permalink_id, run_key, spec_hash
from gradtrace.service.store import QuotaExceeded, Quotas, StoreUnavailable

log = logging.getLogger(__name__)
router = APIRouter(tags=["run"])

RUN_BODY = json_body(
    {
        "type": "object",
        "required": ["python"],
        "additionalProperties": False,
        "properties": {"python": {"type": "string", "description": "the program, as pasted"}},
    },
    example={
        "python": "import torch\nw = torch.ones(2, requires_grad=True)\n(w * 3).sum().backward()\nprint(w.grad)\n"
    },
)
RUN_RESPONSE = {
    "description": "The program ran (whether or not it raised): `trace` (the trace format, or null when "
    "nothing was recorded), `watch` (a program that calls `gradtrace.watch`: its run as the run view's "
    'document, `"format": "gradtrace-run-view/1"`, sampled past the service\'s budget with `cut` saying so; '
    "else null), `stdout`/`stderr` (bounded; `*_truncated` when cut), `exception` "
    "(`{type, message, line}` or null), `seconds`, `id` (the permalink of the source)",
    "content": {"application/json": {"schema": {"type": "object"}}},
}


def check_source(doc: Any, max_bytes: int) -> str:
    """The program's source from the body, bounded and parsed (422 naming the line otherwise)."""
    if not isinstance(doc, dict):
        raise ApiError(422, "invalid_request", 'send {"python": "<the program>"}', "")
    extra = sorted(k for k in doc if k != "python")
    if extra:
        raise ApiError(
            422,
            "invalid_request",
            f'unknown field {extra[0]!r}: the body is {{"python": ...}}',
            f"/{extra[0]}",
        )
    source = doc.get("python")
    if not isinstance(source, str):
        raise ApiError(422, "invalid_request", "python must be the program's source, a string", "/python")
    if len(source.encode()) > max_bytes:
        raise ApiError(413, "too_large", f"the program is longer than {max_bytes} bytes", "/python")
    try:
        ast.parse(source)
    except SyntaxError as exc:
        raise Problem(
            "python_syntax", f"line {exc.lineno}: {exc.msg}", "/python", exc.lineno, exc.offset
        ) from exc
    except ValueError as exc:  # null bytes
        raise Problem("python_syntax", str(exc), "/python") from exc
    return source


async def _store(store: Any, source: str, client: str, quotas: Quotas) -> str | None:
    """The permalink id of the source, stored; None (logged) when the store refuses or is down:
    the run's answer does not depend on it."""
    doc = {"python": source}
    run_id = permalink_id(doc)
    try:
        await asyncio.to_thread(store.put, run_id, spec_hash(doc), doc, client, quotas)
    except (StoreUnavailable, QuotaExceeded) as exc:
        log.warning("run not stored as a permalink: %s", exc)
        return None
    return run_id


@router.post(
    "/run",
    summary="Run a PyTorch program in the jail and trace it",
    description="Runs the program as written (top to bottom, as `__main__`) in a confined process under "
    "`gradtrace.record()`: no network, no files but a private `/tmp`, an empty environment, bounded CPU, "
    "memory, processes and wall-clock time. Answers its trace, what it printed and its exception. "
    "Identical sources are answered from the cache (`X-Cache`). 503 `runner_unavailable` where the "
    "server cannot confine programs (it never runs them unconfined).",
    openapi_extra=RUN_BODY,
    responses={200: RUN_RESPONSE, **error_responses(413, 422, 429, 503)},
    response_class=Response,
)
async def post_run(
    request: Request, service: TraceServiceDep, store: StoreDep, settings: SettingsDep, client: ClientIdDep
) -> Response:
    source = check_source(await read_json(request), settings.run_max_source_bytes)
    data, how = await service.run(source)
    quotas = Quotas(settings.store_client_bytes_per_day, settings.store_total_bytes)
    run_id = await _store(store, source, client, quotas)
    named = b'{"id":' + (f'"{run_id}"' if run_id else "null").encode() + b","
    headers = {"ETag": etag_of(run_key(source)), "X-Cache": how}
    return Response(content=named + data[1:], media_type="application/json", headers=headers)


@router.get(
    "/runs/{run_id}",
    summary='The source of a stored run: `{"python": source}` (post it to /run for its trace)',
    responses={200: {"description": "The stored source"}, **error_responses(404, 503)},
)
async def get_run(run_id: str, store: StoreDep) -> JSONResponse:
    doc = await load_spec(store, run_id)
    if set(doc) != {"python"}:  # a spec's permalink, not a run's
        raise ApiError(404, "permalink_not_found", "no stored program with this id", "/id")
    return JSONResponse(doc, headers={"Cache-Control": IMMUTABLE})
