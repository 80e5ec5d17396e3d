"""Where the viewer's files are: one answer for the server, the renderer and the docs plugins.

The viewer (``frontend/``: HTML, CSS, JS, the Node tools and the vendored ``node_modules``
it imports) exists in two places:

- inside an installed wheel, as ``gradtrace/_frontend/`` (the build copies it there, same
  layout as the checkout's ``frontend/``);
- in a checkout (an editable install, ``make run``), as ``frontend/`` beside ``backend/``.

``GRADTRACE_FRONTEND_DIR`` overrides both: for development only (a viewer being edited
elsewhere). Torch-free and import-free, so anything may use it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ENV_VAR = "GRADTRACE_FRONTEND_DIR"
# backend/gradtrace/frontend_files.py: the package is one level up, the repository three.
PACKAGED = Path(__file__).resolve().parent / "_frontend"
CHECKOUT = Path(__file__).resolve().parents[2] / "frontend"
_MARKER = "index.html"


def frontend_dir(env: Mapping[str, str] | None = None) -> Path:
    """The viewer's directory: the override, else the packaged copy, else the checkout's.

    Always a path, never an error: when neither copy exists the packaged location is
    returned (where an installed gradtrace keeps it), and each user of the files says
    what is missing there — the server answers 404, the renderer raises RenderUnavailable.
    """
    configured = (os.environ if env is None else env).get(ENV_VAR, "").strip()
    if configured:
        return Path(configured)
    for candidate in (PACKAGED, CHECKOUT):
        if (candidate / _MARKER).is_file():
            return candidate
    return PACKAGED
