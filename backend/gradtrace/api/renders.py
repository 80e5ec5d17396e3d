"""The Node renders (a diagram's SVG, the standalone player) off the event loop, a few at a time.

One ``RenderQueue`` per app (made by the lifespan in ``api/app.py``, given to routes as
``RenderQueueDep``): at most ``MAX_CONCURRENT_RENDERS`` run at once (Node + ELK is CPU-bound;
the machine has few cores), at most ``MAX_WAITING_RENDERS`` wait or run, and the rest are
refused at once with 503 ``render_busy``. A render failure is a 503 envelope, never a 500.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from gradtrace.api.errors import ApiError
from gradtrace.problem import public_text
from gradtrace.render import RenderError, RenderUnavailable

log = logging.getLogger(__name__)

MAX_CONCURRENT_RENDERS = 2
MAX_WAITING_RENDERS = 8


class RenderQueue:
    def __init__(self) -> None:
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_RENDERS)
        self._waiting = 0  # waiting for a slot or rendering

    async def run(self, render: Callable[[bytes], str], data: bytes) -> str:
        """``render(data)`` in a thread when a slot is free; its failures as 503 envelopes."""
        if self._waiting >= MAX_WAITING_RENDERS:
            raise ApiError(
                503,
                "render_busy",
                "too many diagrams are being drawn; retry shortly",
                headers={"Retry-After": "2"},
            )
        self._waiting += 1
        try:
            async with self._slots:
                return await asyncio.to_thread(render, data)
        except RenderUnavailable as exc:
            log.error("diagram renderer unavailable: %s", exc)
            raise ApiError(
                503, "render_unavailable", "the diagram renderer is not available on this server"
            ) from exc
        except RenderError as exc:
            log.warning("diagram render failed: %s", exc)
            raise ApiError(
                503,
                "render_failed",
                f"the diagram could not be drawn: {public_text(str(exc))}",
                headers={"Retry-After": "5"},
            ) from exc
        finally:
            self._waiting -= 1
