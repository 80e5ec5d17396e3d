"""``GET /api/v1/opened-trace``: the trace file ``gradtrace view FILE`` opened, byte for byte.

Only an app made for ``gradtrace view`` has this route (a plain ``gradtrace serve`` answers
404). The CLI has read and checked the file before the server starts; the viewer opened at
``/?opened=<file name>`` fetches it once and shows it like a trace the API made.
"""

from __future__ import annotations

from fastapi import APIRouter, Response


def opened_router(prefix: str, trace_json: bytes) -> APIRouter:
    router = APIRouter(prefix=prefix, include_in_schema=False)

    @router.get("/opened-trace")
    async def opened_trace() -> Response:
        # no-store: the file may change between two `gradtrace view` runs on the same port
        return Response(trace_json, media_type="application/json", headers={"Cache-Control": "no-store"})

    return router
