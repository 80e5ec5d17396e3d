"""Diagrams of traces: static and animated SVG, standalone HTML, PNG, notebook output.

SVG is drawn by the viewer's own JavaScript (``frontend/js/export``, layout by elkjs) in one
warm Node process per Python process, so every picture matches the viewer. HTML and notebook
output are put together in Python (the player lays itself out in the browser): no Node.
PNG rasterises the SVG in headless Chromium. Torch-free.
"""

from gradtrace.render.diagram import diagram_svg
from gradtrace.render.node_tool import RenderError, RenderUnavailable
from gradtrace.render.options import DIRECTIONS, PHASES, THEMES, DrawOptions
from gradtrace.render.page import notebook_html, standalone_html
from gradtrace.render.png import svg_to_png
from gradtrace.render.save import SUFFIXES, render_bytes, save
from gradtrace.render.source import FILE_VALUE_BUDGET

__all__ = [
    "DIRECTIONS",
    "FILE_VALUE_BUDGET",
    "PHASES",
    "SUFFIXES",
    "THEMES",
    "DrawOptions",
    "RenderError",
    "RenderUnavailable",
    "diagram_svg",
    "notebook_html",
    "render_bytes",
    "save",
    "standalone_html",
    "svg_to_png",
]
