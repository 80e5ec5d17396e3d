"""Liveness and readiness: /healthz (the process answers) and /readyz (a worker answers)."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from gradtrace.api.cpu import lane
from gradtrace.api.deps import StoreDep, TraceServiceDep
from gradtrace.api.errors import error_response

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="Liveness: the API process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


def _unavailable(code: str, message: str) -> JSONResponse:
    return error_response(503, code, message, headers={"Retry-After": "2"})


@router.get("/readyz", summary="Readiness: a torch worker answers and the permalink store is reachable")
async def readyz(service: TraceServiceDep, store: StoreDep) -> JSONResponse:
    pool = service.pool
    if not pool.ready:
        return _unavailable("not_ready", "workers are starting")
    if not lane().ready:
        return _unavailable("not_ready", "the API's helper processes are starting")
    if pool.workers_alive == 0:
        return _unavailable("workers_down", "every worker is being replaced")
    pid = await pool.ping()  # None: every worker is tracing, and busy is alive
    if not await asyncio.to_thread(store.ping):
        return _unavailable("store_down", "the permalink store is unreachable")
    return JSONResponse(
        {
            "status": "ready",
            "worker_pid": pid,
            "busy": pid is None,
            "in_flight": pool.in_flight,
            "workers": pool.workers,
            "workers_alive": pool.workers_alive,
            "tasks_run": dict(pool.tasks_run),  # tasks handed to workers, by name, since start
            # POST /run: "ready", or why programs are refused (503 runner_unavailable)
            "runner": "ready" if service.runner.available else service.runner.reason,
            # translating and checking in the API process (api/cpu.py): jobs since start, waiting now
            "api_cpu": {"jobs_run": lane().jobs_run, "waiting": lane().queued},
        }
    )
