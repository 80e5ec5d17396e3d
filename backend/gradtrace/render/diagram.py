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
from gradtrace.render.progress import progress
from gradtrace.render.source import drawing_json, drawing_what

PHASES = ("forward", "backward", "both")
THEMES = ("light", "dark")
DIRECTIONS = ("down", "right")
MAX_DEPTH = 999
_CACHE_ENTRIES = 64
_cache: OrderedDict[tuple[str, bool, str, str, bool, int | None, str], str] = OrderedDict()
_lock = threading.Lock()


def check_options(phase: str, theme: str, depth: int | None = None, direction: str = "down") -> None:
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)} (got {phase!r})")
    if theme not in THEMES:
        raise ValueError(f"theme must be one of {', '.join(THEMES)} (got {theme!r})")
    if depth is not None and (
        isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH
    ):
        raise ValueError(f"depth must be a whole number from 1 to {MAX_DEPTH}, or None (got {depth!r})")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)} (got {direction!r})")


def svg_args(
    animated: bool, phase: str, theme: str, values: bool, depth: int | None = None, direction: str = "down"
) -> list[str]:
    args = ["--format", "svg", "--phase", phase, "--theme", theme, "--direction", direction]
    if depth is not None:
        args += ["--depth", str(depth)]
    if animated:
        args.append("--animated")
    if not values:
        args.append("--no-values")
    return args


def diagram_svg(
    trace: Any,
    animated: bool = False,
    phase: str = "both",
    theme: str = "light",
    values: bool = True,
    depth: int | None = None,
    direction: str = "down",
) -> str:
    """The trace's diagram as SVG text: no scripts, no external references (fit for ``<img>``).

    ``animated``: CSS keyframes replay the forward build and the backward flow, looping.
    ``phase``: which passes to show or play. ``values``: value and gradient chips.
    ``depth``: every module that deep (1: the model's children) is drawn as one box with its
    type, output shape and size, the gradients' norms on the edges between boxes (torchview's
    ``depth``); None: the viewer's rule (a big graph folds, then collapses as deep as fits).
    Runs of repeated blocks (a deep stack of layers) fold into one box either way.
    ``direction``: "down" (top to bottom, the viewer's) or "right" (left to right).
    """
    check_options(phase, theme, depth, direction)
    data = drawing_json(trace)  # (what the picture reads: also what the cache is keyed by)
    key = (hashlib.sha256(data).hexdigest(), bool(animated), phase, theme, bool(values), depth, direction)
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    with progress(lambda: drawing_what(trace)):
        svg = run_render(data, svg_args(animated, phase, theme, values, depth, direction)).decode("utf-8")
    with _lock:
        _cache[key] = svg
        while len(_cache) > _CACHE_ENTRIES:
            _cache.popitem(last=False)
    return svg
