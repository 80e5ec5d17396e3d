"""A watched run's view as one HTML page, and inline in a notebook cell (offline: nothing fetched).

The run view (``frontend/watch.html``) with its CSS and code inlined (the code bundled in
Python, as the player's) and the run's view document embedded (``<script id="run-data">``:
``runs/view_data.py``, without the full traces: the player is not in the page). In a notebook
the page travels gzipped inside an ``<iframe srcdoc>`` and unpacks itself with the browser's
own DecompressionStream, its scripts and styles kept away from the notebook's page. A run of
50 steps of an 8-layer MLP makes a cell of ~60 KB.
"""

from __future__ import annotations

import html

import msgspec

from gradtrace.render.node_tool import frontend_dir
from gradtrace.render.page import _UNPACK, _newest_change, _packed, _page_parts, script_safe
from gradtrace.runs.store import Run
from gradtrace.runs.view_data import RunView, run_view

NOTEBOOK_HEIGHT_PX = 640


def run_page_html(run: Run | RunView) -> str:
    """The run view of ``run`` as a self-contained page."""
    view = run if isinstance(run, RunView) else run_view(run)
    root = frontend_dir()
    head, code, closing = _page_parts(root, _newest_change(root), "watch.html")
    data = msgspec.json.encode(view).replace(b"<", b"\\u003c").decode("utf-8")
    return (
        f'{head}<script type="application/json" id="run-data">{data}</script>\n'
        f'<script type="module">\n{script_safe(code)}</script>\n{closing}'
    )


def run_notebook_html(run: Run | RunView, height: int = NOTEBOOK_HEIGHT_PX) -> str:
    """The run view inline in a notebook output cell."""
    view = run if isinstance(run, RunView) else run_view(run)
    inner = (
        '<!doctype html><meta charset="utf-8"><title>gradtrace run</title>'
        f'<script type="application/octet-stream" id="gradtrace-page">{_packed(run_page_html(view))}</script>{_UNPACK}'
    )
    title = html.escape(f"gradtrace run: {view.meta.get('model', 'model')}, {len(view.steps)} logged steps")
    return (
        f'<iframe class="gradtrace-run" title="{title}" srcdoc="{html.escape(inner, quote=True)}" '
        f'style="width:100%;height:{int(height)}px;border:1px solid #ccd;border-radius:6px" '
        'sandbox="allow-scripts allow-downloads"></iframe>'
    )
