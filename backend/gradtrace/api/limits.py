"""The per-client rate limit, as a dependency of every /api/v1 route (429 + Retry-After)."""

from __future__ import annotations

from gradtrace.api.deps import ClientIdDep, RateLimiterDep
from gradtrace.api.errors import ApiError
from gradtrace.service.ratelimit import CURRENT_CLIENT


async def rate_limit(client: ClientIdDep, limiter: RateLimiterDep) -> None:
    # The trace service charges this request's worker time to it; the CPU lane takes turns by it.
    CURRENT_CLIENT.set(client)
    if limiter is None:
        return
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
