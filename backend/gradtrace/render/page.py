"""The interactive player as one HTML file, and the same player inline in a notebook.

``standalone_html`` is the embed page with everything inlined (works offline, from file://).
``notebook_html`` wraps it in an ``<iframe srcdoc>`` so its scripts and styles are isolated
from the notebook page: the same output works in Jupyter, JupyterLab and VS Code.
"""

from __future__ import annotations

import html
from typing import Any

from gradtrace.render.diagram import THEMES
from gradtrace.render.node_tool import run_render
from gradtrace.render.source import node_count, trace_json, trace_title

NOTEBOOK_HEIGHT_PX = 620
COLLAPSED_PAST_NODES = 400  # layout.js defaultCollapsed: the viewer collapses modules past this


def standalone_html(trace: Any, theme: str | None = None, elk: bool = True) -> str:
    """A self-contained HTML page: the player, the trace and its layout.

    ``elk=False`` leaves the layout engine (1.6 MB) out: the precomputed layout is drawn, but
    collapsing or expanding a module can no longer re-lay the graph out.
    """
    args = ["--format", "html", "--mode", "embed"]
    if theme is not None:
        if theme not in THEMES:
            raise ValueError(f"theme must be one of {', '.join(THEMES)} (got {theme!r})")
        args += ["--theme", theme]
    if not elk:
        args.append("--no-elk")
    return run_render(trace_json(trace), args).decode("utf-8")


def notebook_html(trace: Any, height: int = NOTEBOOK_HEIGHT_PX, elk: bool | None = None) -> str:
    """The player inline in a notebook output cell (offline: nothing is fetched).

    ELK (1.6 MB) is carried only where the player starts collapsed (past 400 nodes), so
    that expanding a module can lay the graph out again; small graphs stay small outputs.
    """
    if elk is None:
        elk = node_count(trace) > COLLAPSED_PAST_NODES
    page = standalone_html(trace, elk=elk)
    title = html.escape(trace_title(trace))
    # srcdoc: the page travels inside the attribute (quote-escaped); sandbox keeps its scripts
    # away from the notebook's own page.
    return (
        f'<iframe class="gradtrace-player" title="{title}" srcdoc="{html.escape(page, quote=True)}" '
        f'style="width:100%;height:{int(height)}px;border:1px solid #ccd;border-radius:6px" '
        'sandbox="allow-scripts allow-downloads allow-popups"></iframe>'
    )
