"""``diagram_svg``: a trace as a self-contained SVG (static or animated), cached in process.

Drawing runs in the warm Node renderer (node_tool), which lays each graph out once (elkjs: the
costly part of a drawing, and it grows with the graph) and keeps the layout (in memory,
and on disk for the next process) and the chips' places; identical requests are answered from
an LRU here, keyed by the trace's hash and the options. The renderer gets the trace without its
base64 tensor numbers (source.drawing_json), which no picture shows.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

from gradtrace.render.node_tool import run_render
from gradtrace.render.options import DrawOptions, draw_options, takes_draw_options
from gradtrace.render.progress import progress
from gradtrace.render.source import drawing_json, drawing_what

_CACHE_ENTRIES = 64
_cache: OrderedDict[tuple[str, DrawOptions], str] = OrderedDict()
_lock = threading.Lock()


@takes_draw_options
def diagram_svg(trace: Any, options: DrawOptions | None = None, **changes: Any) -> str:
    """The trace's diagram as SVG text: no scripts, no external references (fit for ``<img>``).

    Drawn as ``options`` says (a ``DrawOptions``), or its fields given as keyword arguments
    (``diagram_svg(trace, animated=True, phase="backward")``): see ``DrawOptions``. Runs of
    repeated blocks (a deep stack of layers) fold into one box whatever the ``depth``.
    """
    drawn = draw_options(options, **changes).picture()
    data = drawing_json(trace)  # (what the picture reads: also what the cache is keyed by)
    key = (hashlib.sha256(data).hexdigest(), drawn)
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    with progress(lambda: drawing_what(trace)):
        svg = run_render(data, drawn.svg_args()).decode("utf-8")
    with _lock:
        _cache[key] = svg
        while len(_cache) > _CACHE_ENTRIES:
            _cache.popitem(last=False)
    return svg
