"""The ``gradtrace`` plugin for MkDocs: a spec or a saved trace drawn at build time.

In ``mkdocs.yml``: ``plugins: [gradtrace]`` (with ``search`` or others listed as usual). In
a page, a fenced block whose body is the options (YAML)::

    ```gradtrace
    source: models/two-layer.json
    format: svg          # svg: a picture; html: the interactive offline player
    animated: true
    phase: backward
    theme: dark
    values: true
    height: 560          # the player's height in pixels
    alt: Backward pass of a two-layer network
    depth: 1             # svg: every module this deep drawn as one box (default: the viewer's folding)
    direction: right     # svg: data flows left to right (default down)
    ```

``source`` is relative to the page's file (or to ``docs_dir`` when it starts with ``/``), as
for images. The drawing goes to ``_gradtrace/`` in the built site; the block becomes an
``<img>`` or an ``<iframe>``. A problem stops the build with the page, the block's line and
what is wrong.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page
from mkdocs.utils import get_relative_url

from gradtrace.docs_plugins.diagrams import OUTPUT_DIR, DiagramOptions, draw, html_for

# ```gradtrace … ``` (or ~~~), at the start of a line; the body is YAML.
_BLOCK = re.compile(r"^(?P<fence>```|~~~)gradtrace[ \t]*\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.M | re.S)


class GradtracePlugin(BasePlugin):
    def on_config(self, config: MkDocsConfig) -> MkDocsConfig:
        self._files: dict[str, bytes] = {}  # file name under OUTPUT_DIR -> content
        return config

    def on_page_markdown(self, markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
        docs_dir = Path(config["docs_dir"])
        page_dir = (docs_dir / page.file.src_uri).parent

        def replace(block: re.Match[str]) -> str:
            line = markdown.count("\n", 0, block.start()) + 1
            try:
                given = yaml.safe_load(block.group("body")) or {}
                if not isinstance(given, dict) or "source" not in given:
                    raise ValueError(
                        "the block needs `source: <spec or trace JSON>` and options as `key: value`"
                    )
                source = str(given.pop("source"))
                path = docs_dir / source.lstrip("/") if source.startswith("/") else page_dir / source
                options = DiagramOptions.from_mapping(given)
                diagram = draw(path, options)
            except (ValueError, yaml.YAMLError) as exc:
                raise PluginError(f"gradtrace: {page.file.src_uri}, line {line}: {exc}") from exc
            self._files[diagram.file_name] = diagram.content
            url = get_relative_url(f"{OUTPUT_DIR}/{diagram.file_name}", page.url)
            return f"\n{html_for(url, diagram, options)}\n"

        return _BLOCK.sub(replace, markdown)

    def on_post_build(self, config: MkDocsConfig, **_: Any) -> None:
        out = Path(config["site_dir"]) / OUTPUT_DIR
        out.mkdir(parents=True, exist_ok=True)
        for name, content in self._files.items():
            (out / name).write_bytes(content)
