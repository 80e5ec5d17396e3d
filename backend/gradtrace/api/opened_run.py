"""``GET /api/v1/opened-run``: the run ``gradtrace view RUN_DIR`` opened, read at each request.

Only an app made for ``gradtrace view RUN_DIR`` has this route. The run is read again at every
request (SQLite in WAL mode: what training has committed so far), so the run view, which asks
again while it is open, follows a run that is still being written.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
from fastapi import APIRouter, Response
from starlette.concurrency import run_in_threadpool

from gradtrace.runs.store import Run
from gradtrace.runs.view_data import run_view


def opened_run_router(prefix: str, run_dir: Path) -> APIRouter:
    router = APIRouter(prefix=prefix, include_in_schema=False)

    def read() -> bytes:
        with Run(run_dir) as run:
            return msgspec.json.encode(run_view(run))

    @router.get("/opened-run")
    async def opened_run() -> Response:
        body = await run_in_threadpool(read)
        return Response(body, media_type="application/json", headers={"Cache-Control": "no-store"})

    return router
