"""The interactive player as one HTML file, and the same player inline in a notebook. No Node.

``standalone_html`` is the embed page with everything inlined (the viewer's JS bundled in
Python, its CSS, elkjs, the trace): it works offline and from file://, and the player lays the
graph out in the browser with the same layout code as the live viewer.
``notebook_html`` gzips that page into an ``<iframe srcdoc>`` that unpacks it with the browser's
own DecompressionStream, so scripts and styles stay isolated from the notebook page and the
output is a fraction of the page's size: the same output works in Jupyter, JupyterLab and VS Code.
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
import re
from pathlib import Path
from typing import Any

from gradtrace.render.bundle import bundle
from gradtrace.render.diagram import THEMES
from gradtrace.render.node_tool import RenderError, frontend_dir
from gradtrace.render.source import keep_values, trace_json, trace_title

NOTEBOOK_HEIGHT_PX = 620
# Tensor numbers a notebook cell carries (64 KiB of float32; every tensor keeps its statistics):
# with the player's code (~0.6 MB) a 2-layer transformer's cell stays under 1 MB.
NOTEBOOK_VALUE_BUDGET = 16_384
_ENTRY = re.compile(r'<script\s+type="module"\s+src="/?(js/[\w.-]+\.js)"\s*></script>')
_STYLESHEET = re.compile(r'<link\s+rel="stylesheet"\s+href="/?(css/[\w.-]+\.css)"\s*/?>')
_OPEN_LINK = re.compile(r'<a\b[^>]*class="open-link"[^>]*>[\s\S]*?</a>')
ELK_BUNDLE = Path("node_modules/elkjs/lib/elk.bundled.js")


def script_safe(js: str) -> str:
    """Text that can sit inside <script>…</script> without ending it early."""
    return re.sub(r"</(script)", r"\\x3C/\1", js, flags=re.I).replace("<!--", "\\x3C!--")


def _newest_change(root: Path) -> float:
    files = [root / "embed.html", *(root / "js").rglob("*.js"), *(root / "css").glob("*.css")]
    return max(f.stat().st_mtime for f in files)


@functools.lru_cache(maxsize=4)
def _page_parts(root: Path, _version: float) -> tuple[str, str, str]:
    """(page before the data, the scripts after it, the closing tags): the trace goes between."""
    page = (root / "embed.html").read_text(encoding="utf-8")
    entry = _ENTRY.search(page)
    if not entry:
        raise RenderError('embed.html has no <script type="module" src="/js/…"> entry to inline')
    page = page.replace(entry.group(0), "")

    def inline_css(m: re.Match[str]) -> str:
        css = (root / m.group(1)).read_text(encoding="utf-8")
        return "<style>\n" + re.sub(r"</style", r"<\\/style", css, flags=re.I) + "\n</style>"

    page = _STYLESHEET.sub(inline_css, page)
    # No server behind a file: the "open in gradtrace" link would lead nowhere.
    page = _OPEN_LINK.sub("", page)
    head, closing = page.split("</body>", 1) if "</body>" in page else ("", "")
    if not closing:
        raise RenderError("embed.html has no </body>")
    elk = script_safe((root / ELK_BUNDLE).read_text(encoding="utf-8"))
    player = script_safe(bundle(root / entry.group(1)))
    scripts = f'</script>\n<script>{elk}</script>\n<script type="module">\n{player}</script>\n'
    return head, scripts, "</body>" + closing


def standalone_html(trace: Any, theme: str | None = None) -> str:
    """A self-contained HTML page: the player and the trace (laid out when it opens).

    ``theme`` None follows the reader's colour scheme.
    """
    if theme is not None and theme not in THEMES:
        raise ValueError(f"theme must be one of {', '.join(THEMES)} (got {theme!r})")
    root = frontend_dir()
    head, scripts, closing = _page_parts(root, _newest_change(root))
    title = html.escape(trace_title(trace))
    head = re.sub(r"<title>[\s\S]*?</title>", lambda _: f"<title>{title} · gradtrace</title>", head, count=1)
    if theme:
        head = re.sub(
            r"<html([^>]*)>", lambda m: f'<html{m.group(1)} class="gt-theme-{theme}">', head, count=1
        )
    # The trace's JSON goes in as it is; "<" as \u003c keeps "</script>" in a string harmless.
    data = trace_json(trace).replace(b"<", b"\\u003c").decode("utf-8")
    settings = json.dumps({"layout": None, "mode": "embed", "theme": theme})[1:-1]
    block = f'<script type="application/json" id="gradtrace-data">{{"trace":{data},{settings}}}'
    return head + block + scripts + closing


_UNPACK = (
    "<script>(async()=>{"
    'const b64=document.getElementById("gradtrace-page").textContent;'
    "const bytes=Uint8Array.from(atob(b64),c=>c.charCodeAt(0));"
    'const page=await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text();'
    "document.open();document.write(page);document.close();"
    "})()</script>"
)


def notebook_html(
    trace: Any, height: int = NOTEBOOK_HEIGHT_PX, value_budget: int = NOTEBOOK_VALUE_BUDGET
) -> str:
    """The player inline in a notebook output cell (offline: nothing is fetched).

    The cell keeps ``value_budget`` tensor numbers (``source.keep_values``), so any trace,
    however many numbers it holds, makes a cell of a size a notebook can carry.
    """
    small = keep_values(json.loads(trace_json(trace)), value_budget)
    page = standalone_html(small)
    packed = base64.b64encode(gzip.compress(page.encode("utf-8"), 6)).decode("ascii")
    inner = (
        '<!doctype html><meta charset="utf-8"><title>gradtrace</title>'
        f'<script type="application/octet-stream" id="gradtrace-page">{packed}</script>{_UNPACK}'
    )
    title = html.escape(trace_title(trace))
    # srcdoc: the page travels inside the attribute (quote-escaped); sandbox keeps its scripts
    # away from the notebook's own page.
    return (
        f'<iframe class="gradtrace-player" title="{title}" srcdoc="{html.escape(inner, quote=True)}" '
        f'style="width:100%;height:{int(height)}px;border:1px solid #ccd;border-radius:6px" '
        'sandbox="allow-scripts allow-downloads allow-popups"></iframe>'
    )
