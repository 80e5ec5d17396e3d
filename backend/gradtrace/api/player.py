"""``GET /api/v1/specs/{id}/player.html``: a permalink as one offline HTML file (the player).

The viewer's Export → HTML downloads it: ``gradtrace.render.standalone_html`` of the stored
spec's trace (player, trace and layout inlined; opens from file:// with no network). It goes
through diagram.py's path (trace cache and workers, two renders at a time, rendered bytes
cached by trace and theme); a render failure is a 503 envelope, never a 500.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from gradtrace.api.body import check_spec
from gradtrace.api.deps import StoredSpecDep
from gradtrace.api.diagram import RENDERER_VERSION, CachedRenderDep
from gradtrace.api.docs import ERROR_RESPONSES
from gradtrace.examples import example_ids, get_example
from gradtrace.render import standalone_html
from gradtrace.render.options import Theme
from gradtrace.service.hashing import permalink_id

log = logging.getLogger(__name__)

router = APIRouter(tags=["permalinks"])

HTML_RESPONSE: dict[str, Any] = {
    "description": "The standalone player (text/html, as an attachment)",
    "content": {"text/html": {}},
}


@functools.lru_cache(maxsize=1)
def _example_of_permalink() -> dict[str, str]:
    """{permalink id: example id}: a stored example downloads as "<example>.html"."""
    from gradtrace.spec import parse_spec

    out = {}
    for example_id in example_ids():
        try:
            out[permalink_id(parse_spec(get_example(example_id)).normalized())] = example_id
        except Exception:  # an example that does not parse just keeps the id as its name
            log.warning("example %s does not parse; its downloads are named by id", example_id)
    return out


async def download_name(spec_id: str) -> str:
    """The example's id when the permalink is an unchanged example, else the permalink id."""
    names = await asyncio.to_thread(_example_of_permalink)
    return names.get(spec_id, spec_id)


@router.get(
    "/specs/{spec_id}/player.html",
    summary="A permalink as one offline HTML file: the interactive player with its trace",
    description="A download (`Content-Disposition: attachment`): the player, the trace and its "
    "layout in one file that works from disk with no network. `theme` fixes the colours; "
    "without it the file follows the reader's light/dark preference.",
    responses={200: HTML_RESPONSE, **ERROR_RESPONSES},
    response_class=Response,
)
async def get_player(
    stored: StoredSpecDep,
    cached: CachedRenderDep,
    theme: Theme | None = Query(None, description="fixed colours (default: the reader's)"),
) -> Response:
    checked = await check_spec(stored.doc)
    name = await download_name(stored.id)  # [a-z0-9-] only: safe inside the quoted filename
    return await cached(
        checked,
        key=f"html:{RENDERER_VERSION}:{checked.key}:{theme or 'auto'}",
        media_type="text/html",
        render=functools.partial(standalone_html, theme=theme),
        headers={"Content-Disposition": f'attachment; filename="{name}.html"'},
    )
