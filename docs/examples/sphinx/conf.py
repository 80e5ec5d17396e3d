"""A minimal Sphinx site that draws gradtrace diagrams at build time."""

project = "gradtrace in Sphinx"
extensions = ["gradtrace.docs_plugins.sphinx_ext"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
