"""Spec -> trace response, shared by ``POST /trace`` and ``GET /specs/{id}/trace``.

Routes get the ``TraceService`` (cache, single flight, workers: ``service/trace_service.py``)
as ``TraceServiceDep`` (``api/deps.py``); this module adds what HTTP needs on top of it (ETag,
304, ``X-Cache``). The service's failures are Problems, written by the error handler as they are.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from fastapi import Request
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from gradtrace.service.disk_cache import DiskEntry
from gradtrace.service.server import WRITE_CHUNK_BYTES
from gradtrace.service.trace_service import CheckedSpec, TraceService

IMMUTABLE = "public, max-age=31536000, immutable"


def etag_of(key: str) -> str:
    return f'"{key[:32]}"'


def not_modified(request: Request, etag: str, cache_control: str | None) -> Response | None:
    """304 when ``If-None-Match`` names ``etag``, compared weakly as RFC 9110 says (``W/"…"``
    matches ``"…"``), or is ``*``."""
    tags = request.headers.get("if-none-match")
    if tags and (tags.strip() == "*" or etag in [t.strip().removeprefix("W/") for t in tags.split(",")]):
        headers = {"ETag": etag}
        if cache_control:
            headers["Cache-Control"] = cache_control
        return Response(status_code=304, headers=headers)
    return None


async def trace_response(
    request: Request,
    service: TraceService,
    checked: CheckedSpec,
    cache_control: str | None = None,
) -> Response:
    etag = etag_of(checked.key)
    early = not_modified(request, etag, cache_control)
    if early is not None:
        return early
    data, how = await service.open_trace(checked)
    headers = {"ETag": etag, "X-Cache": how}
    if cache_control:
        headers["Cache-Control"] = cache_control
    if isinstance(data, DiskEntry):
        return DiskEntryResponse(data, headers)
    return Response(content=data, media_type="application/json", headers=headers)


class DiskEntryResponse(StreamingResponse):
    """A trace sent from its disk-tier file a piece at a time: a connection holds one piece (and
    the server's write buffer), however slowly its client reads; the file is closed when the
    response ends, sent whole or not (issue 38: each slow reader of a big trace held a copy)."""

    def __init__(self, entry: DiskEntry, headers: dict[str, str]) -> None:
        self.entry = entry
        super().__init__(
            self._pieces(),
            media_type="application/json",
            headers={**headers, "Content-Length": str(entry.size)},
        )

    async def _pieces(self) -> AsyncIterator[bytes]:
        for start in range(0, self.entry.size, WRITE_CHUNK_BYTES):
            yield await asyncio.to_thread(self.entry.read, start, WRITE_CHUNK_BYTES)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.entry.close()
