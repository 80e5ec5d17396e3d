"""Liveness and readiness: /healthz (the process answers) and /readyz (a worker answers)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from gradtrace.api.errors import error_response

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness: the API process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: a torch worker answers and the permalink store is reachable")
async def readyz(request: Request) -> JSONResponse:
    state = request.app.state
    pool = state.pool
    if pool is None or not pool.ready:
        return error_response(503, "not_ready", "workers are starting", headers={"Retry-After": "2"})
    if pool.in_flight >= pool.workers:
        # Every worker is tracing: a ping would queue behind them. Busy is alive.
        if not pool.alive():
            return error_response(
                503, "workers_down", "the worker pool is broken", headers={"Retry-After": "2"}
            )
        return JSONResponse(
            {"status": "ready", "worker_pid": None, "in_flight": pool.in_flight, "busy": True}
        )
    try:
        pid = await asyncio.to_thread(pool.ping, 5.0)
    except Exception:
        return error_response(503, "workers_down", "no worker answered", headers={"Retry-After": "2"})
    store_ok = await asyncio.to_thread(state.store.ping) if state.store is not None else True
    if not store_ok:
        return error_response(
            503, "store_down", "the permalink store is unreachable", headers={"Retry-After": "2"}
        )
    return JSONResponse({"status": "ready", "worker_pid": pid, "in_flight": pool.in_flight, "busy": False})
