"""``GET /api/v1/specs/{id}/diagram.svg``: a permalink's diagram as a self-contained SVG.

Fit for ``<img src>`` anywhere (GitHub READMEs included): no scripts, no external references.
Spec -> trace goes through the same cache and workers as ``/specs/{id}/trace``; trace -> SVG
runs the Node renderer off the event loop, at most two at a time (``api/renders.py``), cached
by (trace, options). A render failure is a 503 envelope, never a 500. ``CachedRender`` is that
whole path (ETag, cache, trace, render queue), shared with ``/specs/{id}/player.html``
(api/player.py) as ``CachedRenderDep``.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from gradtrace.api.body import check_spec
from gradtrace.api.deps import RenderQueueDep, StoredSpecDep, TraceServiceDep
from gradtrace.api.docs import ERROR_RESPONSES
from gradtrace.api.errors import ApiError
from gradtrace.api.renders import RenderQueue
from gradtrace.api.tracing import not_modified
from gradtrace.render import diagram_svg
from gradtrace.render.options import MAX_DEPTH, Direction, DrawOptions, Phase, Theme
from gradtrace.service.trace_service import CheckedSpec, TraceService

log = logging.getLogger(__name__)

router = APIRouter(tags=["permalinks"])

# Bump when the drawing changes, so cached SVGs and ETags from an older renderer are not reused.
RENDERER_VERSION = "3"  # bump when the drawings change: cached SVG/HTML of older renderers are not served
CACHE_CONTROL = "public, max-age=86400"
SVG_RESPONSE: dict[str, Any] = {
    "description": "The diagram (image/svg+xml)",
    "content": {"image/svg+xml": {}},
}


class CachedRender:
    """A permalink's drawing (the SVG, the standalone player) by one path: 304 on a matching
    ETag, else the cache, else a render of the spec's trace (through the trace cache and the
    workers) in the render queue. Never a 500. Routes get one as ``CachedRenderDep``."""

    def __init__(self, request: Request, service: TraceService, renders: RenderQueue) -> None:
        self.request, self.service, self.renders = request, service, renders

    async def __call__(
        self,
        checked: CheckedSpec,
        *,
        key: str,
        media_type: str,
        render: Callable[[bytes], str],
        headers: dict[str, str] | None = None,
    ) -> Response:
        """The rendered bytes for ``key``, cached under it."""
        etag = f'"{hashlib.sha256(key.encode()).hexdigest()[:32]}"'
        early = not_modified(self.request, etag, CACHE_CONTROL)
        if early is not None:
            return early
        headers = {**(headers or {}), "ETag": etag, "Cache-Control": CACHE_CONTROL}
        cached = await self.service.cache.get(key)
        if cached is not None:
            return Response(cached, media_type=media_type, headers={**headers, "X-Cache": "hit"})
        data, _ = await self.service.trace(checked)
        try:
            body = (await self.renders.run(render, data)).encode("utf-8")
        except ApiError:
            raise
        except Exception as exc:  # never a 500: whatever broke, the client gets a 503 envelope
            log.exception("render crashed")
            raise ApiError(503, "render_failed", "the diagram could not be drawn") from exc
        await self.service.cache.set(key, body)
        return Response(body, media_type=media_type, headers={**headers, "X-Cache": "miss"})


async def get_cached_render(
    request: Request, service: TraceServiceDep, renders: RenderQueueDep
) -> CachedRender:
    return CachedRender(request, service, renders)


CachedRenderDep = Annotated[CachedRender, Depends(get_cached_render)]


@router.get(
    "/specs/{spec_id}/diagram.svg",
    summary="The diagram of a permalink as SVG (static or animated), for <img> tags",
    description="A self-contained SVG: no scripts, no external references. `animated=true` replays "
    "the forward build and the backward flow with CSS animation, looping; `phase` picks the passes; "
    "`values` adds value and gradient chips. Drawn with the viewer's layout and styles.",
    responses={200: SVG_RESPONSE, **ERROR_RESPONSES},
    response_class=Response,
)
async def get_diagram(
    stored: StoredSpecDep,
    cached: CachedRenderDep,
    animated: bool = Query(False, description="CSS-animated, looping"),
    phase: Phase = Query("both", description="which passes to draw"),
    theme: Theme = Query("light"),
    values: bool = Query(True, description="value and gradient chips"),
    depth: int | None = Query(
        None,
        ge=1,
        le=MAX_DEPTH,
        description="draw every module this deep as one box (1: the model's children) with its "
        "type and output shape, gradient norms on the edges between boxes; default: repeated blocks "
        "fold and a big graph collapses as deep as fits, as in the viewer",
    ),
    direction: Direction = Query("down", description="data flows down or to the right"),
) -> Response:
    checked = await check_spec(stored.doc)
    options = DrawOptions(
        animated=animated, phase=phase, theme=theme, values=values, depth=depth, direction=direction
    )
    how = f"{int(animated)}{phase}{theme}{int(values)}"
    if depth is not None or direction != "down":  # (the keys of the drawings cached before these options)
        how += f":{depth}{direction}"
    return await cached(
        checked,
        key=f"svg:{RENDERER_VERSION}:{checked.key}:{how}",
        media_type="image/svg+xml",
        render=functools.partial(diagram_svg, options=options),
    )
