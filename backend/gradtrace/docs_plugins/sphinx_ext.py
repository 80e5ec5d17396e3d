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
       :depth: 1             (svg: every module this deep drawn as one box; default: the viewer's folding)
       :direction: right     (svg: data flows left to right; default down)

The path is relative to the page (or to the source directory when it starts with ``/``), as
for ``image``. The drawing is written to ``_gradtrace/`` in the output directory and shown
with ``<img>`` or ``<iframe>`` (HTML builders; other builders leave it out). Sphinx rebuilds a
page when its diagram's source file changes.

A mistake (an unknown option, a wrong value, a missing or broken source) fails the build,
as in MkDocs: an ERROR naming the page, the line and what is wrong, and ``sphinx-build``
exits 1 (as its link checker does for a broken link) however many pages are still written;
the page is read again by the next build until it is fixed. With ``gradtrace_warn_only =
True`` in ``conf.py`` it is a WARNING instead (``-W`` still turns it into a failure).
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
from gradtrace.docs_plugins.diagrams import OUTPUT_DIR, DiagramOptions, draw, html_for
from gradtrace.render.options import FIELDS as DRAW_FIELDS

log = logging.getLogger(__name__)

FLAGS = ("animated", "no-values")  # written alone: `:animated:` (`:no-values:` is values=False)
# `:name: value`: how the page shows it, and the rest of the drawing's options
VALUED = ("format", "height", "alt", *(name for name in DRAW_FIELDS if name not in ("animated", "values")))


class _EveryOption(dict[str, Any]):
    """The directive's option_spec: it takes every option as written, so that the directive
    itself checks them and fails the build (docutils reports a bad one as a message that
    leaves the build's exit status alone)."""

    def __missing__(self, name: str) -> Any:
        return directives.unchanged


class GradtraceDirective(SphinxDirective):
    # Checked in run() too, for the same reason: the source path, and no content.
    optional_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = _EveryOption(dict.fromkeys((*FLAGS, *VALUED), directives.unchanged))

    def run(self) -> list[nodes.Node]:
        if self.env.app.builder.format != "html":  # say so rather than leave a silent gap
            log.warning("gradtrace diagrams are shown by HTML builders only", location=self.get_location())
            return []
        try:
            if not self.arguments:
                raise ValueError(
                    "the directive needs the spec or trace JSON to draw: .. gradtrace:: model.json"
                )
            if self.content:
                raise ValueError("the directive takes no content: options go in `:name: value` lines")
            relative, absolute = self.env.relfn2path(self.arguments[0], self.env.docname)
            self.env.note_dependency(relative)
            options = DiagramOptions.from_mapping(self._given())
            diagram = draw(Path(absolute), options)
        except ValueError as exc:
            return self._problem(str(exc))
        target = Path(self.env.app.outdir) / OUTPUT_DIR / diagram.file_name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.is_file():
            target.write_bytes(diagram.content)
        page = self.env.app.builder.get_target_uri(self.env.docname)
        url = relative_uri(page, f"{OUTPUT_DIR}/{diagram.file_name}")
        return [nodes.raw("", html_for(url, diagram, options), format="html")]

    def _given(self) -> dict[str, Any]:
        """The options as DiagramOptions names them (`:no-values:` is values=False)."""
        unknown = sorted(set(self.options) - {*FLAGS, *VALUED})
        if unknown:
            known = ", ".join(f":{name}:" for name in sorted((*FLAGS, *VALUED)))
            raise ValueError(f"unknown option(s) {', '.join(f':{u}:' for u in unknown)} (use {known})")
        for flag in FLAGS:
            if self.options.get(flag):  # (a flag's value is None; anything written after it is one)
                raise ValueError(f":{flag}: is a flag, written alone (got {self.options[flag]!r})")
        given: dict[str, Any] = {key: self.options[key] for key in VALUED if key in self.options}
        for name in ("height", "depth"):
            if name in given:
                try:
                    given[name] = int(given[name])
                except ValueError:
                    raise ValueError(f"{name} must be a whole number, not {given[name]!r}") from None
        given["animated"] = "animated" in self.options
        given["values"] = "no-values" not in self.options
        return given

    def _problem(self, message: str) -> list[nodes.Node]:
        """No diagram here, and an ERROR that fails the build (see ``build_finished``); with
        ``gradtrace_warn_only``, a WARNING."""
        where = self.get_location()
        if self.config.gradtrace_warn_only:
            log.warning("gradtrace: %s", message, location=where)
        else:
            log.error("gradtrace: %s", message, location=where)
            _failed(self.env).setdefault(self.env.docname, []).append(f"{where}: {message}")
        return []


def _failed(env: Any) -> dict[str, list[str]]:
    """The pages whose diagrams could not be drawn (kept in the environment, which Sphinx keeps
    between builds): docname -> where and what."""
    if not hasattr(env, "gradtrace_failed"):
        env.gradtrace_failed = {}
    failed: dict[str, list[str]] = env.gradtrace_failed
    return failed


def purge_doc(app: Any, env: Any, docname: str) -> None:
    _failed(env).pop(docname, None)


def merge_info(app: Any, env: Any, docnames: set[str], other: Any) -> None:
    """Parallel reading: the pages a worker read, with their failures."""
    _failed(env).update({d: m for d, m in _failed(other).items() if d in docnames})


def read_failed_again(app: Any, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    """A page that failed is read again by the next build, so it fails again until fixed (not
    only the build that first read it)."""
    return [docname for docname in _failed(env) if docname not in removed]


def build_finished(app: Any, exc: BaseException | None) -> None:
    failed = _failed(app.env)
    if exc is None and failed:
        count = sum(len(messages) for messages in failed.values())
        log.error(
            "gradtrace: %d diagram(s) could not be drawn: the build failed "
            "(gradtrace_warn_only = True in conf.py makes these warnings)",
            count,
        )
        app.statuscode = 1


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("gradtrace", GradtraceDirective)
    app.add_config_value("gradtrace_warn_only", False, "env", types=frozenset({bool}))
    app.connect("env-purge-doc", purge_doc)
    app.connect("env-merge-info", merge_info)
    app.connect("env-get-outdated", read_failed_again)
    app.connect("build-finished", build_finished)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
