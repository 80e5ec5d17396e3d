"""What the Sphinx directive and the MkDocs plugin share: options, drawing, file names, HTML.

A diagram is asked for with a source file (a model spec or a saved trace JSON) and options;
``draw`` returns the file to write (named by its content's hash, so pages that show the same
diagram share one file and a rebuild rewrites nothing new) and ``html_for`` the markup that
shows it from a page. Every problem is a ``ValueError`` naming the source and what is wrong;
each plugin reports it its framework's way.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gradtrace.render import DrawOptions, RenderError, diagram_svg, standalone_html
from gradtrace.render.options import FIELDS as DRAW_FIELDS

FORMATS = ("svg", "html")
OUTPUT_DIR = "_gradtrace"  # beside the built pages, at the root of the output
DEFAULT_HEIGHT_PX = 560


@dataclass(frozen=True)
class DiagramOptions:
    """A diagram as a page asks for it: how to show it here, and how to draw it (``drawing``)."""

    format: str = "svg"  # svg: a picture (<img>); html: the interactive offline player (<iframe>)
    height: int = DEFAULT_HEIGHT_PX  # the player's iframe
    alt: str | None = None  # default: the trace's title
    drawing: DrawOptions = DrawOptions()

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {self.format!r}")
        if (
            isinstance(self.height, bool)
            or not isinstance(self.height, int)
            or not 100 <= self.height <= 4000
        ):
            raise ValueError(f"height must be a whole number of pixels from 100 to 4000, not {self.height!r}")

    @classmethod
    def from_mapping(cls, options: dict[str, Any]) -> DiagramOptions:
        """Options as written in a page (the drawing's among them); an unknown key is an error
        that lists the known ones."""
        own = {"format", "height", "alt"}
        known = own | set(DRAW_FIELDS)
        unknown = sorted(set(options) - known)
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)}: use {', '.join(sorted(known))}")
        drawing = DrawOptions(**{k: v for k, v in options.items() if k not in own})
        return cls(**{k: v for k, v in options.items() if k in own}, drawing=drawing)


@dataclass(frozen=True)
class Diagram:
    file_name: str  # e.g. gradtrace-3f2a….svg, to be written under OUTPUT_DIR
    content: bytes
    title: str


def _is_trace(doc: Any) -> bool:
    return isinstance(doc, dict) and {"schema_version", "graph", "events"} <= set(doc)


def load_trace(source: Path) -> Any:
    """A ``gradtrace.Trace`` for a saved trace JSON (as it is) or a model spec (traced now).

    A page often shows one model several ways: each file is traced once per build, until it
    changes (the cache is keyed by path, modification time and size).
    """
    try:
        stat = source.stat()
    except OSError as exc:
        raise ValueError(f"cannot read {source}: {exc.strerror or exc}") from exc
    return _load_trace(source.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _load_trace(source: Path, _mtime_ns: int, _size: int) -> Any:
    from gradtrace import Trace, trace_spec
    from gradtrace.problem import Problem

    try:
        doc = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {source}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{source} is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    if _is_trace(doc):
        try:
            return Trace.from_dict(doc)
        except ValueError as exc:  # Trace names the version or the field that is wrong
            raise ValueError(f"{source}: not a valid gradtrace trace ({exc})") from exc
    try:
        return trace_spec(doc)
    except Problem as exc:  # the spec's (at a field, a line) or the engine's (a limit: too many nodes)
        what = f"invalid spec at {exc.path}" if exc.path else "cannot trace it"
        raise ValueError(f"{source}: {what}: {exc}") from exc


def draw(source: Path, options: DiagramOptions) -> Diagram:
    trace = load_trace(source)
    try:
        if options.format == "svg":
            text = diagram_svg(trace, options.drawing)
        else:
            text = standalone_html(trace, theme=options.drawing.theme)
    except RenderError as exc:  # RenderUnavailable too: the message says what is missing
        raise ValueError(f"{source}: cannot draw the diagram: {exc}") from exc
    content = text.encode("utf-8")
    digest = hashlib.sha256(content).hexdigest()[:20]
    return Diagram(f"gradtrace-{digest}.{options.format}", content, str(trace.doc.title or source.stem))


def html_for(url: str, diagram: Diagram, options: DiagramOptions) -> str:
    """The markup a page shows the diagram with; ``url`` is the file's address from the page."""
    from html import escape

    label = escape(options.alt or diagram.title, quote=True)
    if options.format == "svg":
        return f'<img class="gradtrace-diagram" src="{escape(url, quote=True)}" alt="{label}">'
    return (
        f'<iframe class="gradtrace-player" src="{escape(url, quote=True)}" title="{label}" '
        f'width="100%" height="{options.height}" style="border:0" loading="lazy"></iframe>'
    )
