"""``create_app(settings)``: the FastAPI application, its routers, and its lifespan.

The lifespan builds the TraceService (trace cache, single flight and the torch worker pool:
torch lives only in the workers; tests may hand it another runner, ``service/runner.py``), the permalink store, the rate limiter and the render queue,
and keeps them on ``app.state``, where routes reach them only through the typed dependencies
of ``api/deps.py`` (``TraceServiceDep``, ``StoreDep``, ``SettingsDep``…). Worker start-up
(the forkserver importing torch, which takes seconds) runs in the background so the server accepts
connections at once; /readyz turns 200 when a worker answers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import APIRouter, Depends, FastAPI, Request
from starlette.routing import Match, Mount

from gradtrace.api import compare, diagram, examples, health, player, run, schemas, specs, trace, translate
from gradtrace.api.cpu import configure_lane
from gradtrace.api.docs import install_docs_page, install_openapi
from gradtrace.api.errors import ApiError, install_error_handlers
from gradtrace.api.limits import rate_limit
from gradtrace.api.middleware import install_middleware
from gradtrace.api.opened import opened_router
from gradtrace.api.opened_run import opened_run_router
from gradtrace.api.renders import RenderQueue
from gradtrace.api.static import embed_router, mount_frontend
from gradtrace.service.ratelimit import make_rate_limiter
from gradtrace.service.runner import TaskRunner
from gradtrace.service.settings import Settings
from gradtrace.service.store import SpecStore
from gradtrace.service.trace_service import TraceService
from gradtrace.service.workers import WorkerPool

log = logging.getLogger(__name__)

API_PREFIX = "/api/v1"


def api_router() -> APIRouter:
    router = APIRouter(prefix=API_PREFIX, dependencies=[Depends(rate_limit)])
    for module in (trace, run, compare, examples, schemas, specs, diagram, player, translate):
        router.include_router(module.router)
    return router


_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


def install_api_fallback(app: FastAPI) -> None:
    """Unknown /api/ paths and wrong methods: 404/405 envelopes, never the viewer's files.

    Without it, ``GET /api/v1/trace`` would fall through to the static mount at ``/``
    (a full match beats the POST route's partial one) and answer 404 instead of 405.
    """

    async def api_fallback(request: Request) -> None:
        # Ask every other route (Starlette's public Route.matches) which methods it takes here.
        routes = [r for r in request.app.router.routes if not isinstance(r, Mount) and r is not fallback]
        allowed = [
            m
            for m in _METHODS
            if any(r.matches({**request.scope, "method": m})[0] == Match.FULL for r in routes)
        ]
        if allowed and request.method not in allowed:
            raise ApiError(
                405,
                "method_not_allowed",
                f"use {', '.join(m for m in allowed if m != 'HEAD')} on this resource",
                headers={"Allow": ", ".join(allowed)},
            )
        raise ApiError(404, "not_found", "no such resource")

    app.add_api_route("/api/{rest:path}", api_fallback, methods=_METHODS, include_in_schema=False)
    fallback = app.router.routes[-1]


def create_app(
    settings: Settings | None = None,
    opened_trace: bytes | None = None,
    opened_run: Path | None = None,
    runner: Callable[[Settings], TaskRunner] = WorkerPool,
) -> FastAPI:
    """The app; ``opened_trace`` (a trace document's JSON, for ``gradtrace view``) is served
    at ``/api/v1/opened-trace`` for the viewer to open; ``opened_run`` (a directory
    ``gradtrace.watch`` writes, for ``gradtrace view RUN_DIR``) at ``/api/v1/opened-run``.
    ``runner`` makes, at each start, where traces run: the worker pool, or (tests of the HTTP
    contract) ``InThreadRunner``."""
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service = TraceService(settings, runner(settings))
        store = SpecStore(settings.database_url, settings.sqlite_path)
        ratelimiter = (
            make_rate_limiter(
                settings.redis_url, settings.rate_per_minute, settings.worker_seconds_per_minute
            )
            if settings.rate_per_minute > 0
            else None
        )
        # The service charges worker time to the limiter and remembers traces past the deadline.
        service.attach(store, ratelimiter)
        app.state.trace_service = service
        app.state.store = store
        app.state.ratelimiter = ratelimiter
        app.state.renders = RenderQueue()
        # Translating and checking specs: helper processes of their own, in turns by client, charged to
        # the client's compute share; refusals of a body remembered by its hash (api/cpu.py).
        cpu = configure_lane(
            settings.api_cpu_processes, ratelimiter.charge if ratelimiter is not None else None
        )
        warming = asyncio.create_task(cpu.warm())
        # Workers start in the background: the server accepts connections at once, and
        # /readyz turns 200 when a worker answers.
        starting = asyncio.create_task(service.start()) if settings.start_workers else None
        log.info(
            "permalinks on %s; cache %s, entries over %d bytes on %s; %d workers",
            store.backend,
            "redis" if settings.redis_url else f"memory ({settings.cache_bytes} bytes)",
            settings.cache_entry_max_bytes,
            f"disk ({settings.disk_cache_dir}, {settings.disk_cache_bytes} bytes)"
            if settings.disk_cache_dir is not None and settings.disk_cache_bytes > 0
            else "no disk tier (not cached)",
            settings.workers,
        )
        try:
            yield
        finally:
            if starting is not None:  # still starting (e.g. the engine cannot load): stop trying
                starting.cancel()
                await asyncio.gather(starting, return_exceptions=True)
            warming.cancel()
            await asyncio.gather(warming, return_exceptions=True)
            await cpu.aclose()  # before the workers' close stops the resource tracker
            await service.close()
            if ratelimiter is not None:
                await ratelimiter.close()
            store.close()

    app = FastAPI(
        title="gradtrace",
        version="1",
        summary="See what PyTorch autograd really does: the graph, the engine's order, every hook.",
        description="Post a model spec, get the trace: the autograd graph as it was built, the backward "
        "pass in the engine's real order, every hook, the real numbers. Errors are always "
        '`{"error": {"code", "message", "path"}}`.',
        lifespan=lifespan,
        max_body_size=settings.max_body_bytes,
        docs_url=None,  # served by install_docs_page, without a CDN
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.settings = settings  # read by routes as SettingsDep (api/deps.py)
    install_error_handlers(app)
    install_middleware(app, settings.cors_origins, settings.max_body_bytes)
    app.include_router(health.router)
    app.include_router(api_router())
    if opened_trace is not None:
        app.include_router(opened_router(API_PREFIX, opened_trace))
    if opened_run is not None:
        app.include_router(opened_run_router(API_PREFIX, opened_run))
    install_api_fallback(app)
    app.include_router(embed_router(settings.frontend_dir))
    install_openapi(app)
    install_docs_page(app)
    mount_frontend(app, settings.frontend_dir)  # last: API routes win over static files
    return app
