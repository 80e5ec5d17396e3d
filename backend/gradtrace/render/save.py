"""``save(trace, path)``: the file format follows the suffix (.svg, .html, .png, .json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradtrace.render.diagram import diagram_svg
from gradtrace.render.options import DrawOptions, draw_options, takes_draw_options
from gradtrace.render.page import standalone_html
from gradtrace.render.png import svg_to_png
from gradtrace.render.source import file_doc

SUFFIXES = (".svg", ".html", ".png", ".json")


@takes_draw_options
def render_bytes(trace: Any, suffix: str, options: DrawOptions | None = None, **changes: Any) -> bytes:
    """The file content for ``suffix``, drawn as ``options`` (or its fields given as keyword
    arguments) say; raises ValueError for an unknown suffix or option. ``depth`` and
    ``direction`` are for the still pictures (.svg, .png); the HTML player folds and expands
    in the reader's hands. ``values``: the pictures' value chips (True, False); the files
    (.json, .html) keep a budget of tensor numbers unless it is ``"all"`` (``source.file_doc``)."""
    drawn = draw_options(options, **changes)
    suffix = suffix.lower()
    if suffix == ".json":
        return file_doc(trace, drawn.values)
    if suffix == ".html":
        # theme None: the page follows the reader's colour scheme.
        return standalone_html(trace, theme=drawn.theme, values=drawn.values).encode("utf-8")
    if suffix == ".svg":
        return diagram_svg(trace, drawn).encode("utf-8")
    if suffix == ".png":
        if drawn.animated:
            raise ValueError("a PNG is a still picture: save the animated diagram as .svg")
        return svg_to_png(diagram_svg(trace, drawn))
    raise ValueError(
        f"cannot save a trace as {suffix or 'a file without suffix'!r}: use one of {', '.join(SUFFIXES)}"
    )


@takes_draw_options
def save(trace: Any, path: str | Path, options: DrawOptions | None = None, **changes: Any) -> Path:
    """Write the trace to ``path`` in the format its suffix names. Options: see render_bytes."""
    path = Path(path)
    path.write_bytes(render_bytes(trace, path.suffix, options, **changes))
    return path
