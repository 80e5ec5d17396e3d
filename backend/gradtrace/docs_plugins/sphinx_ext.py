"""The ``gradtrace`` directive for Sphinx: a spec or a saved trace drawn at build time.

In ``conf.py``: ``extensions = ["gradtrace.docs_plugins.sphinx_ext"]``. In a page::

    .. gradtrace:: models/two-layer.json
       :animated:
       :phase: backward
       :theme: dark
       :format: svg          (svg: a picture; html: the interactive offline player)
       :no-values:
       :height: 560          (the player's height in pixels)
       :alt: Backward pass of a two-layer network

The path is relative to the page (or to the source directory when it starts with ``/``), as
for ``image``. The drawing is written to ``_gradtrace/`` in the output directory and shown
with ``<img>`` or ``<iframe>`` (HTML builders; other builders leave it out). Sphinx rebuilds a
page when its diagram's source file changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.osutil import relative_uri

from gradtrace import __version__
from gradtrace.docs_plugins.diagrams import FORMATS, OUTPUT_DIR, DiagramOptions, draw, html_for
from gradtrace.render import PHASES, THEMES

log = logging.getLogger(__name__)


class GradtraceDirective(SphinxDirective):
    required_arguments = 1
    has_content = False
    option_spec = {
        "format": lambda value: directives.choice(value, FORMATS),
        "animated": directives.flag,
        "phase": lambda value: directives.choice(value, PHASES),
        "theme": lambda value: directives.choice(value, THEMES),
        "no-values": directives.flag,
        "height": directives.positive_int,
        "alt": directives.unchanged,
    }

    def run(self) -> list[nodes.Node]:
        if self.env.app.builder.format != "html":  # say so rather than leave a silent gap
            log.warning("gradtrace diagrams are shown by HTML builders only", location=self.get_location())
            return []
        relative, absolute = self.env.relfn2path(self.arguments[0], self.env.docname)
        self.env.note_dependency(relative)
        given: dict[str, Any] = {
            key: self.options[key]
            for key in ("format", "phase", "theme", "height", "alt")
            if key in self.options
        }
        given["animated"] = "animated" in self.options
        given["values"] = "no-values" not in self.options
        try:
            options = DiagramOptions.from_mapping(given)
            diagram = draw(Path(absolute), options)
        except ValueError as exc:
            raise self.error(f"gradtrace: {exc}") from exc
        target = Path(self.env.app.outdir) / OUTPUT_DIR / diagram.file_name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file():
            target.write_bytes(diagram.content)
        page = self.env.app.builder.get_target_uri(self.env.docname)
        url = relative_uri(page, f"{OUTPUT_DIR}/{diagram.file_name}")
        return [nodes.raw("", html_for(url, diagram, options), format="html")]


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("gradtrace", GradtraceDirective)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
