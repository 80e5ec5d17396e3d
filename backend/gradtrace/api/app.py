"""``create_app(settings)``: the FastAPI application, its routers, and its lifespan.

The lifespan builds the worker pool (torch lives only there), the permalink store and the
trace cache. Worker warm-up (the forkserver importing torch, ~2 s) runs in the background
so the server accepts connections at once; /readyz turns 200 when a worker answers.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from gradtrace.api import health
from gradtrace.api.errors import install_error_handlers
from gradtrace.api.middleware import install_middleware
from gradtrace.api.static import embed_router, mount_frontend
from gradtrace.service.settings import Settings
from gradtrace.service.workers import WorkerPool

log = logging.getLogger(__name__)

API_PREFIX = "/api/v1"


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        debug_delay = float(os.environ.get("GRADTRACE_DEBUG_TRACE_DELAY", "0") or 0)
        pool = WorkerPool(settings, debug_delay_s=debug_delay)
        app.state.pool = pool
        warm = asyncio.create_task(asyncio.to_thread(pool.warm_up)) if settings.start_workers else None
        try:
            yield
        finally:
            if warm is not None:
                await warm
            await asyncio.to_thread(pool.close)

    app = FastAPI(
        title="gradtrace",
        version="1",
        summary="See what PyTorch autograd really does: the graph, the engine's order, every hook.",
        lifespan=lifespan,
        max_body_size=settings.max_body_bytes,
        docs_url="/docs",
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    app.state.settings = settings
    app.state.pool = None
    app.state.store = None
    install_error_handlers(app)
    install_middleware(app, settings.cors_origins)
    app.include_router(health.router)
    app.include_router(embed_router(settings.frontend_dir))
    mount_frontend(app, settings.frontend_dir)  # last: API routes win over static files
    return app
