"""Runs gradtrace's Node renderer (``frontend/tools/render.mjs``) in a subprocess.

The layout engine (elkjs) and the SVG/HTML builders are the viewer's own JavaScript, so every
exported picture matches the viewer. This module finds Node and the frontend directory, feeds
the trace on stdin, and turns every way that can fail into a RenderError with a clear message;
it never hangs (a timeout kills the child).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

from gradtrace import frontend_files

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 120.0


class RenderError(RuntimeError):
    """The renderer ran and failed (bad trace, internal error, timeout)."""


class RenderUnavailable(RenderError):
    """The renderer cannot run here: Node.js or the frontend files are missing."""


def frontend_dir() -> Path:
    path = frontend_files.frontend_dir()
    if not (path / "tools" / "render.mjs").is_file():
        raise RenderUnavailable(
            f"gradtrace's renderer is not at {path / 'tools' / 'render.mjs'}: this installation "
            f"lacks its viewer files (reinstall gradtrace; {frontend_files.ENV_VAR} overrides the place)"
        )
    if not (path / "node_modules" / "elkjs").is_dir():
        raise RenderUnavailable(
            f"the layout engine is not installed in {path / 'node_modules'}: run `npm ci` in {path}"
        )
    return path


def node_binary() -> str:
    configured = os.environ.get("GRADTRACE_NODE")
    found = configured or shutil.which("node") or shutil.which("nodejs")
    if not found:
        raise RenderUnavailable(
            "rendering diagrams needs Node.js (18 or newer) on PATH, or GRADTRACE_NODE set to it; "
            "saving as .json needs neither"
        )
    return found


def _timeout() -> float:
    raw = os.environ.get("GRADTRACE_RENDER_TIMEOUT", "")
    try:
        return float(raw) if raw.strip() else DEFAULT_TIMEOUT_S
    except ValueError:
        return DEFAULT_TIMEOUT_S


def run_render(trace_json: bytes, args: list[str], timeout: float | None = None) -> bytes:
    """Run ``render.mjs ARGS`` with the trace JSON on stdin; return its stdout."""
    tool = frontend_dir() / "tools" / "render.mjs"
    cmd = [node_binary(), str(tool), *args]
    limit = timeout if timeout is not None else _timeout()
    try:
        done = subprocess.run(cmd, input=trace_json, capture_output=True, timeout=limit, check=False)
    except subprocess.TimeoutExpired as exc:
        raise RenderError(f"rendering took longer than {limit:g} s and was stopped") from exc
    except OSError as exc:
        raise RenderUnavailable(f"cannot run Node.js ({cmd[0]}): {exc}") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        first = message[0] if message else f"exit status {done.returncode}"
        log.warning("render.mjs %s failed: %s", " ".join(args), "\n".join(message[:20]))
        raise RenderError(first.removeprefix("render: "))
    return done.stdout
