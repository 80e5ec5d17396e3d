"""The per-client rate limit, as a dependency of every /api/v1 route (429 + Retry-After)."""

from __future__ import annotations

from fastapi import Request

from gradtrace.api.errors import ApiError
from gradtrace.service.ratelimit import CURRENT_CLIENT


def client_id(request: Request) -> str:
    # Behind our nginx (trust_proxy), X-Real-IP is set from $remote_addr and cannot be forged
    # by the client; exposed directly, only the socket's address counts.
    if request.app.state.settings.trust_proxy:
        real = request.headers.get("x-real-ip")
        if real:
            return real.strip()[:64]
    return request.client.host if request.client else "unknown"


async def rate_limit(request: Request) -> None:
    limiter = request.app.state.ratelimiter
    if limiter is None:
        return
    client = client_id(request)
    CURRENT_CLIENT.set(client)  # the trace service charges this request's worker time to it
    verdict = await limiter.hit(client)
    if not verdict.allowed and verdict.reason == "worker_time":
        raise ApiError(
            429,
            "worker_time_exceeded",
            f"this client used its share of worker time for this minute; retry after {verdict.retry_after} s",
            headers={"Retry-After": str(verdict.retry_after), "RateLimit-Remaining": "0"},
        )
    if not verdict.allowed:
        raise ApiError(
            429,
            "rate_limited",
            f"too many requests; retry after {verdict.retry_after} s",
            headers={"Retry-After": str(verdict.retry_after), "RateLimit-Remaining": "0"},
        )
