"""``GET /api/v1/opened-run``: the run ``gradtrace view RUN_DIR`` opened, read at each request.

Only an app made for ``gradtrace view RUN_DIR`` has these routes. The run is read again at
every request (SQLite in WAL mode: what training has committed so far), so the run view, which
asks again while it is open, follows a run that is still being written.
``/opened-run/traces/{step}`` is the full trace the watch saved at that step (the run view's
"Open in the player").
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from fastapi import APIRouter, Response
from starlette.concurrency import run_in_threadpool

from gradtrace.api.errors import ApiError
from gradtrace.runs.store import Run
from gradtrace.runs.view_data import run_view


def opened_run_router(prefix: str, run_dir: Path) -> APIRouter:
    router = APIRouter(prefix=prefix, include_in_schema=False)

    def read() -> bytes:
        with Run(run_dir) as run:
            return msgspec.json.encode(run_view(run))

    def read_trace(step: int) -> bytes | None:
        with Run(run_dir) as run:
            return run.trace_bytes(step) if step in run.trace_steps else None

    @router.get("/opened-run")
    async def opened_run() -> Response:
        body = await run_in_threadpool(read)
        return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})

    @router.get("/opened-run/traces/{step}")
    async def opened_run_trace(step: int) -> Response:
        body = await run_in_threadpool(read_trace, step)
        if body is None:
            raise ApiError(404, "trace_not_found", f"the run saved no full trace at step {step}", "/step")
        return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})

    return router
