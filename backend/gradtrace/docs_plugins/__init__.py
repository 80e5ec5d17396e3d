"""Diagrams in documentation, drawn at docs-build time: no server, no network.

- Sphinx: ``extensions = ["gradtrace.docs_plugins.sphinx_ext"]``, then the ``gradtrace``
  directive (``.. gradtrace:: model.json``).
- MkDocs: ``plugins: [gradtrace]``, then a fenced ``gradtrace`` block in a page.

Both take a model spec (traced here with PyTorch) or a saved trace JSON and write a static or
animated SVG (an ``<img>``) or the offline player (an ``<iframe>``) next to the built pages.
``diagrams`` holds what the two share; each plugin only speaks its framework.
"""
