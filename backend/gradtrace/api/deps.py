"""What a route is given, as typed dependencies: ``settings: SettingsDep``, ``store: StoreDep``…

The app's settings (``create_app``) and its service objects (the lifespan in ``api/app.py``:
the trace service, the permalink store, the rate limiter, the render queue) live on
``app.state``; this module is the one place that reads them from there. A route takes what
it needs as parameters and reads top to bottom, and a test can hand it another object with
``app.dependency_overrides[get_store] = …``. They are ``async def``: FastAPI runs a plain
``def`` dependency in a thread, a hop per request for an attribute read.

``StoredSpecDep`` is a permalink's stored spec, for the routes under ``/specs/{spec_id}``: the
id is checked against the permalink alphabet and length before any use (the store, a header,
a log line), then loaded; an unknown id is the 404 envelope. ``load_spec`` does the same for
an id given elsewhere (a side of ``POST /compare``).
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request

from gradtrace.api.errors import ApiError
from gradtrace.api.renders import RenderQueue
from gradtrace.service.hashing import is_permalink_id
from gradtrace.service.ratelimit import MemoryRateLimiter, RedisRateLimiter
from gradtrace.service.settings import Settings
from gradtrace.service.store import QuotaExceeded, SpecStore, StoreUnavailable
from gradtrace.service.trace_service import TraceService

T = TypeVar("T")
RateLimiter = MemoryRateLimiter | RedisRateLimiter


async def get_settings(request: Request) -> Settings:
    """The app's Settings (given to ``create_app``)."""
    settings: Settings = request.app.state.settings
    return settings


async def get_store(request: Request) -> SpecStore:
    """The permalink store (opened by the lifespan)."""
    store: SpecStore = request.app.state.store
    return store


async def get_trace_service(request: Request) -> TraceService:
    """The app's one TraceService: cache, single flight, workers (created by the lifespan)."""
    service: TraceService = request.app.state.trace_service
    return service


async def get_rate_limiter(request: Request) -> RateLimiter | None:
    """The per-client rate limiter; None when the limit is off (``rate_per_minute`` 0)."""
    limiter: RateLimiter | None = request.app.state.ratelimiter
    return limiter


async def get_render_queue(request: Request) -> RenderQueue:
    """The Node renders' slots and queue (``api/renders.py``), one per app."""
    renders: RenderQueue = request.app.state.renders
    return renders


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[SpecStore, Depends(get_store)]
TraceServiceDep = Annotated[TraceService, Depends(get_trace_service)]
RateLimiterDep = Annotated[RateLimiter | None, Depends(get_rate_limiter)]
RenderQueueDep = Annotated[RenderQueue, Depends(get_render_queue)]


async def get_client_id(request: Request, settings: SettingsDep) -> str:
    """Who is asking, for the rate limit and the storage quota.

    Behind our nginx (``trust_proxy``), X-Real-IP is set from $remote_addr and cannot be
    forged by the client; exposed directly, only the socket's address counts.
    """
    if settings.trust_proxy:
        real = request.headers.get("x-real-ip")
        if real:
            return client_key(real.strip()[:64])
    return client_key(request.client.host) if request.client else "unknown"


def client_key(address: str) -> str:
    """An IPv6 address counts by its /64 (one subscriber's network: any number of addresses);
    IPv4 (and anything else) as it is."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:  # an IPv4 client on a dual-stack socket
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


ClientIdDep = Annotated[str, Depends(get_client_id)]


async def store_call(fn: Callable[..., T], *args: Any) -> T:
    """A store method off the event loop; its refusals and outages as envelopes (429/413/503)."""
    try:
        return await asyncio.to_thread(fn, *args)
    except QuotaExceeded as exc:
        if exc.quota == "client":  # a day's window: it frees up as the window moves on
            raise ApiError(
                429,
                "client_storage_quota_exceeded",
                f"this client stored {exc.limit} bytes of specs in the last day, its quota; "
                "retry later (specs already stored stay available)",
                headers={"Retry-After": "3600"},
            ) from exc
        raise ApiError(
            413,
            "total_storage_quota_exceeded",
            f"the permalink store holds its quota of {exc.limit} bytes; no new specs are stored "
            "(specs already stored stay available)",
        ) from exc
    except StoreUnavailable as exc:
        raise ApiError(
            503,
            "store_unavailable",
            "the permalink store is unavailable; retry shortly",
            headers={"Retry-After": "5"},
        ) from exc


async def load_spec(store: SpecStore, spec_id: str) -> dict[str, Any]:
    """The stored (normalised) spec of a permalink, or the 404 envelope."""
    if not is_permalink_id(spec_id):  # before any use: the store, a header, a log line
        raise ApiError(404, "permalink_not_found", "no permalink with this id", "/id")
    spec = await store_call(store.get, spec_id)
    if spec is None:
        raise ApiError(404, "permalink_not_found", "no permalink with this id", "/id")
    return spec


@dataclass(frozen=True)
class StoredSpec:
    """A permalink: its id (checked) and its stored, normalised spec document."""

    id: str
    doc: dict[str, Any]


async def get_stored_spec(spec_id: str, store: StoreDep) -> StoredSpec:
    """The permalink named by the path's ``{spec_id}``, or the 404 envelope."""
    return StoredSpec(spec_id, await load_spec(store, spec_id))


StoredSpecDep = Annotated[StoredSpec, Depends(get_stored_spec)]
