"""``save(trace, path)``: the file format follows the suffix (.svg, .html, .png, .json)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gradtrace.render.diagram import diagram_svg
from gradtrace.render.page import standalone_html
from gradtrace.render.png import svg_to_png
from gradtrace.render.source import file_doc

SUFFIXES = (".svg", ".html", ".png", ".json")


def render_bytes(
    trace: Any,
    suffix: str,
    animated: bool = False,
    phase: str = "both",
    theme: str | None = "light",
    values: bool | str = True,
    depth: int | None = None,
    direction: str = "down",
) -> bytes:
    """The file content for ``suffix``; raises ValueError for an unknown suffix or option.
    ``depth`` and ``direction`` (see ``diagram_svg``) are for the still pictures (.svg, .png);
    the HTML player folds and expands in the reader's hands. ``values``: the pictures' value
    chips (True, False); the files (.json, .html) keep a budget of tensor numbers unless it
    is ``"all"`` (``source.file_doc``)."""
    suffix = suffix.lower()
    if suffix == ".json":
        return file_doc(trace, values)
    if suffix == ".html":
        # theme None: the page follows the reader's colour scheme.
        return standalone_html(trace, theme=theme, values=values).encode("utf-8")
    if values not in (True, False, "all"):
        raise ValueError(f'values must be True, False or "all" (got {values!r})')
    values = values is not False
    theme = theme or "light"
    if suffix == ".svg":
        svg = diagram_svg(
            trace,
            animated=animated,
            phase=phase,
            theme=theme,
            values=values,
            depth=depth,
            direction=direction,
        )
        return svg.encode("utf-8")
    if suffix == ".png":
        if animated:
            raise ValueError("a PNG is a still picture: save the animated diagram as .svg")
        return svg_to_png(
            diagram_svg(trace, phase=phase, theme=theme, values=values, depth=depth, direction=direction)
        )
    raise ValueError(
        f"cannot save a trace as {suffix or 'a file without suffix'!r}: use one of {', '.join(SUFFIXES)}"
    )


def save(
    trace: Any,
    path: str | Path,
    *,
    animated: bool = False,
    phase: str = "both",
    theme: str | None = "light",
    values: bool | str = True,
    depth: int | None = None,
    direction: str = "down",
) -> Path:
    """Write the trace to ``path`` in the format its suffix names. Options: see render_bytes."""
    path = Path(path)
    data = render_bytes(
        trace,
        path.suffix,
        animated=animated,
        phase=phase,
        theme=theme,
        values=values,
        depth=depth,
        direction=direction,
    )
    path.write_bytes(data)
    return path
