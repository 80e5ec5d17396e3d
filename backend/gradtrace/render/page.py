"""The interactive player as one HTML file, and the same player inline in a notebook. No Node.

``standalone_html`` is the embed page with everything inlined (the viewer's JS bundled in
Python, its CSS, the trace): it works offline and from file://. The graph is laid out at export
time by the one layout code (``render.mjs --format layout``), so the 1.6 MB layout engine does not
travel, and the player's code and the trace travel gzipped (unpacked by the browser's own
DecompressionStream): a small model's file is ~100 KB. Without Node the layout engine travels
instead and the player lays the graph out when it opens (a ~2 MB file).
``notebook_html`` gzips that page into an ``<iframe srcdoc>`` that unpacks it with the browser's
own DecompressionStream, so scripts and styles stay isolated from the notebook page and the
output is a fraction of the page's size: the same output works in Jupyter, JupyterLab and VS Code.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import html
import json
import re
from pathlib import Path
from typing import Any

from gradtrace.render.bundle import bundle
from gradtrace.render.node_tool import RenderError, frontend_dir, run_render
from gradtrace.render.options import THEMES
from gradtrace.render.source import file_doc, keep_values, trace_json, trace_title

NOTEBOOK_HEIGHT_PX = 620
# Tensor numbers a notebook cell carries (64 KiB of float32; every tensor keeps its statistics):
# with the player's code, a 2-layer transformer's cell stays under 1 MB (BENCHMARKS.md,
# "notebook cell").
NOTEBOOK_VALUE_BUDGET = 16_384
_ENTRY = re.compile(r'<script\s+type="module"\s+src="/?(js/[\w.-]+\.js)"\s*></script>')
_STYLESHEET = re.compile(r'<link\s+rel="stylesheet"\s+href="/?(css/[\w.-]+\.css)"\s*/?>')
_OPEN_LINK = re.compile(r'<a\b[^>]*class="open-link"[^>]*>[\s\S]*?</a>')
ELK_BUNDLE = Path("node_modules/elkjs/lib/elk.bundled.js")


def script_safe(js: str) -> str:
    """Text that can sit inside <script>…</script> without ending it early."""
    return re.sub(r"</(script)", r"\\x3C/\1", js, flags=re.I).replace("<!--", "\\x3C!--")


def _newest_change(root: Path) -> float:
    files = [
        root / "embed.html",
        root / "watch.html",
        *(root / "js").rglob("*.js"),
        *(root / "css").glob("*.css"),
    ]
    return max(f.stat().st_mtime for f in files)


@functools.lru_cache(maxsize=4)
def _page_parts(root: Path, _version: float, name: str = "embed.html") -> tuple[str, str, str]:
    """(page before the data, the player's code, the closing tags): the trace goes between.
    ``name``: the viewer's page (``watch.html``: the run view, ``render.run_page``)."""
    page = (root / name).read_text(encoding="utf-8")
    entry = _ENTRY.search(page)
    if not entry:
        raise RenderError(f'{name} has no <script type="module" src="/js/…"> entry to inline')
    page = page.replace(entry.group(0), "")

    def inline_css(m: re.Match[str]) -> str:
        css = (root / m.group(1)).read_text(encoding="utf-8")
        return "<style>\n" + re.sub(r"</style", r"<\\/style", css, flags=re.I) + "\n</style>"

    page = _STYLESHEET.sub(inline_css, page)
    # No server behind a file: the "open in gradtrace" link would lead nowhere.
    page = _OPEN_LINK.sub("", page)
    head, closing = page.split("</body>", 1) if "</body>" in page else ("", "")
    if not closing:
        raise RenderError(f"{name} has no </body>")
    return head, bundle(root / entry.group(1)), "</body>" + closing


@functools.lru_cache(maxsize=2)
def _elk_script(root: Path) -> str:
    return script_safe((root / ELK_BUNDLE).read_text(encoding="utf-8"))


def export_layout(trace: Any) -> dict[str, Any] | None:
    """The player's opening layout (its default folding), computed now by the one layout code;
    None where Node cannot run (the file then carries the layout engine)."""
    try:
        return dict(json.loads(run_render(trace_json(trace), ["--format", "layout"])))
    except RenderError:
        return None


def _packed(text: str) -> str:
    return base64.b64encode(gzip.compress(text.encode("utf-8"), 9, mtime=0)).decode("ascii")


# Unpacks the trace into #gradtrace-data, then starts the player (a module script added now runs).
_UNPACK_PLAYER = (
    "<script>(async()=>{"
    "const un=async(id)=>{const b=Uint8Array.from(atob(document.getElementById(id).textContent),c=>c.charCodeAt(0));"
    'return new Response(new Blob([b]).stream().pipeThrough(new DecompressionStream("gzip"))).text();};'
    'document.getElementById("gradtrace-data").textContent=await un("gradtrace-packed-data");'
    'const s=document.createElement("script");s.type="module";s.textContent=await un("gradtrace-packed-player");'
    "document.body.append(s);"
    '})().catch(e=>{const st=document.getElementById("status");'
    'if(st)st.textContent="this browser cannot unpack the player (DecompressionStream): "+e.message;})</script>'
)


def standalone_html(
    trace: Any, theme: str | None = None, *, packed: bool = True, values: bool | str = True
) -> str:
    """A self-contained HTML page: the player, the trace and its layout.

    ``theme`` None follows the reader's colour scheme. ``packed``: the player's code and the
    trace travel gzipped (False: as plain text, for a caller that compresses the whole page).
    ``values``: the trace's numbers as a saved file keeps them (``source.file_doc``: a budget,
    final values first; ``"all"``: every one).
    """
    if theme is not None and theme not in THEMES:
        raise ValueError(f"theme must be one of {', '.join(THEMES)} (got {theme!r})")
    root = frontend_dir()
    head, player, closing = _page_parts(root, _newest_change(root))
    title = html.escape(trace_title(trace))
    head = re.sub(r"<title>[\s\S]*?</title>", lambda _: f"<title>{title} · gradtrace</title>", head, count=1)
    if theme:
        head = re.sub(
            r"<html([^>]*)>", lambda m: f'<html{m.group(1)} class="gt-theme-{theme}">', head, count=1
        )
    # The trace's JSON goes in as it is; "<" as \u003c keeps "</script>" in a string harmless.
    data = file_doc(trace, values).replace(b"<", b"\\u003c").decode("utf-8")
    layout = export_layout(trace)
    settings = json.dumps({"layout": layout, "mode": "embed", "theme": theme})[1:-1].replace("<", "\\u003c")
    payload = f'{{"trace":{data},{settings}}}'
    # No layout: the layout engine travels and the player lays the graph out when it opens.
    elk = "" if layout else f"<script>{_elk_script(root)}</script>\n"
    if not packed:
        block = f'<script type="application/json" id="gradtrace-data">{payload}</script>\n'
        return f'{head}{block}{elk}<script type="module">\n{script_safe(player)}</script>\n{closing}'
    block = (
        '<script type="application/json" id="gradtrace-data"></script>\n'
        f'<script type="application/octet-stream" id="gradtrace-packed-data">{_packed(payload)}</script>\n'
        f'<script type="application/octet-stream" id="gradtrace-packed-player">{_packed(player)}</script>\n'
    )
    return head + block + elk + _UNPACK_PLAYER + "\n" + closing


_UNPACK = (
    "<script>(async()=>{"
    'const b64=document.getElementById("gradtrace-page").textContent;'
    "const bytes=Uint8Array.from(atob(b64),c=>c.charCodeAt(0));"
    'const page=await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text();'
    "document.open();document.write(page);document.close();"
    "})()</script>"
)


# The player pages this process has put in a notebook (by digest): later cells carry only their
# trace and ask the page for the player's code (see ``notebook_html``).
_PLAYER_SENT: set[str] = set()
_SLOT = "__GRADTRACE_PAYLOAD__"

# In the notebook's page (every cell, once per page): keep the player's code a cell carried and
# hand it to each player iframe that asks for it.
_HOST = (
    "<script>(()=>{const w=window,v=%(v)s;w.__gradtracePlayers=w.__gradtracePlayers||{};"
    'const el=document.getElementById("gradtrace-player-"+v);if(el)w.__gradtracePlayers[v]=el.textContent;'
    "if(w.__gradtraceListening)return;w.__gradtraceListening=true;"
    'w.addEventListener("message",(e)=>{const m=e.data;if(!m||m.gradtrace!=="player?"||!e.source)return;'
    'const code=w.__gradtracePlayers[m.v]||(document.getElementById("gradtrace-player-"+m.v)||{}).textContent;'
    'if(code)e.source.postMessage({gradtrace:"player",v:m.v,code},"*");});})()</script>'
)

# In the cell's iframe: ask the page for the player's code, put the trace in, open the page.
_ASK = (
    "<script>(()=>{const v=%(v)s;let got=false,n=0;"
    "const un=(b64)=>new Response(new Blob([Uint8Array.from(atob(b64),c=>c.charCodeAt(0))])"
    '.stream().pipeThrough(new DecompressionStream("gzip"))).text();'
    'addEventListener("message",async(e)=>{const m=e.data;if(got||!m||m.gradtrace!=="player"||m.v!==v)return;got=true;'
    'const [t,d]=await Promise.all([un(m.code),un(document.getElementById("gradtrace-trace").textContent)]);'
    "document.open();document.write(t.split(%(slot)s).join(d));document.close();});"
    "const ask=()=>{if(got)return;if(n++>=40){document.body.textContent=%(missing)s;return;}"
    'parent.postMessage({gradtrace:"player?",v},"*");setTimeout(ask,250);};ask();})()</script>'
)
PLAYER_MISSING = (
    "The gradtrace player's code travels once per notebook, in the first gradtrace output of the "
    "session, and it is not on this page (that output was cleared, or this viewer runs no "
    "scripts): run that cell again, or save the trace with trace.save('trace.html')."
)


def _iframe(trace: Any, inner: str, height: int) -> str:
    title = html.escape(trace_title(trace))
    # srcdoc: the page travels inside the attribute (quote-escaped); sandbox keeps its scripts
    # away from the notebook's own page.
    return (
        f'<iframe class="gradtrace-player" title="{title}" srcdoc="{html.escape(inner, quote=True)}" '
        f'style="width:100%;height:{int(height)}px;border:1px solid #ccd;border-radius:6px" '
        'sandbox="allow-scripts allow-downloads allow-popups"></iframe>'
    )


def notebook_html(
    trace: Any,
    height: int = NOTEBOOK_HEIGHT_PX,
    value_budget: int = NOTEBOOK_VALUE_BUDGET,
    *,
    player: bool | None = None,
) -> str:
    """The player inline in a notebook output cell (offline: nothing is fetched).

    The cell keeps ``value_budget`` tensor numbers (``source.keep_values``), so any trace,
    however many numbers it holds, makes a cell of a size a notebook can carry. The player's
    code (~60 KB gzipped) travels once per notebook: in the process's first cell (``player``
    True: in this one too; False: never), and later cells carry only their trace and layout,
    asking the page for the code. Without Node (no layout at export time) each cell carries
    the whole page, the layout engine included.
    """
    small = keep_values(json.loads(trace_json(trace)), value_budget)
    if export_layout(small) is None:
        page = standalone_html(small, packed=False)
        inner = (
            '<!doctype html><meta charset="utf-8"><title>gradtrace</title>'
            f'<script type="application/octet-stream" id="gradtrace-page">{_packed(page)}</script>{_UNPACK}'
        )
        return _iframe(trace, inner, height)
    root = frontend_dir()
    head, code, closing = _page_parts(root, _newest_change(root))
    template = (
        f'{head}<script type="application/json" id="gradtrace-data">{_SLOT}</script>\n'
        f'<script type="module">\n{script_safe(code)}</script>\n{closing}'
    )
    digest = hashlib.sha256(template.encode("utf-8")).hexdigest()[:16]
    carry = digest not in _PLAYER_SENT if player is None else player
    if player is not False:
        _PLAYER_SENT.add(digest)
    page = standalone_html(small, packed=False)
    found = re.search(r'<script type="application/json" id="gradtrace-data">(.*?)</script>\n', page, re.S)
    if not found:
        raise RenderError("the player page has no gradtrace-data block")
    v = json.dumps(digest)
    inner = (
        '<!doctype html><meta charset="utf-8"><title>gradtrace</title><body>'
        f'<script type="application/octet-stream" id="gradtrace-trace">{_packed(found.group(1))}</script>'
        + _ASK
        % {"v": v, "slot": json.dumps(_SLOT), "missing": json.dumps(PLAYER_MISSING)}
    )
    host = ""
    if carry:
        host = f'<script type="application/octet-stream" id="gradtrace-player-{digest}">{_packed(template)}</script>'
    return host + (_HOST % {"v": v}) + _iframe(trace, inner, height)
