"""A V8 startup snapshot of the Node renderer, so the first drawing of a process is quick.

A fresh Node spends half a second or more loading and warming up the layout engine (elkjs)
before it draws anything. ``frontend/tools/snapshot.cjs`` does that once, and Node keeps the
result as a startup snapshot (``node --snapshot-blob BLOB --build-snapshot``, Node 20 or newer);
a renderer started from it (``node --snapshot-blob BLOB -- --serve``) begins with elkjs loaded.
The picture is the same: the process runs the same render.mjs on the same elkjs.

The snapshot is built where gradtrace is used, on first use, in the user's cache folder
(``layout_cache_dir()/snapshots``), keyed by the Node binary and the renderer's code, by a
background process: the drawing that asks for it goes the plain way, later processes start
from it. ``GRADTRACE_SNAPSHOT=off`` never uses one; a snapshot Node cannot start from is
removed and the renderer started the plain way.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

ENTRY = Path("tools") / "snapshot.cjs"
# The files a snapshot is made of (relative to the viewer's folder): another one, another key.
CODE = (
    "tools/*.mjs",
    "tools/*.cjs",
    "tools/*.json",  # the graphs the snapshot is warmed up with
    "js/*.js",
    "js/export/*.js",
    "css/graph.css",
    "node_modules/elkjs/package.json",
)
# Builds a snapshot into a file next to it and moves it in place once whole, in a process of its
# own (it outlives the Python process that asked for it, a CLI run that draws once and exits).
_BUILD = (
    "import os, subprocess, sys\n"
    "node, entry, partial, blob = sys.argv[1:]\n"
    "done = subprocess.run([node, '--snapshot-blob', partial, '--build-snapshot', entry],"
    " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)\n"
    "if done.returncode == 0 and os.path.getsize(partial) > 0:\n"
    "    os.replace(partial, blob)\n"
    "elif os.path.exists(partial):\n"
    "    os.remove(partial)\n"
)

_started: set[Path] = set()  # builds this process started (one per snapshot)
_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get("GRADTRACE_SNAPSHOT", "").strip().lower() not in ("off", "0", "no")


def blob_path(node: str, frontend: Path, cache: Path) -> Path:
    """Where the snapshot of this Node and this renderer code is (or will be) kept."""
    digest = hashlib.sha256()
    binary = Path(node).resolve()
    stat = binary.stat()
    digest.update(f"{binary}\n{stat.st_size}\n{stat.st_mtime_ns}\n{frontend.resolve()}\n".encode())
    for pattern in CODE:
        for path in sorted(frontend.glob(pattern)):
            digest.update(f"{path.relative_to(frontend).as_posix()}\n".encode())
            digest.update(path.read_bytes())
    return cache / "snapshots" / f"{digest.hexdigest()[:32]}.blob"


def ready_blob(node: str, frontend: Path, cache: Path | None) -> Path | None:
    """The snapshot to start from, if it is built; else None, and its build is started."""
    if cache is None or not enabled() or not (frontend / ENTRY).is_file():
        return None
    try:
        blob = blob_path(node, frontend, cache)
    except OSError:
        return None
    if blob.is_file():
        return blob
    build(node, frontend, blob)
    return None


def build(node: str, frontend: Path, blob: Path, wait: bool = False) -> subprocess.Popen[bytes] | None:
    """Build ``blob`` in the background (once per process); ``wait``: until it is done."""
    with _lock:
        if blob in _started:
            return None
        _started.add(blob)
    try:
        blob.parent.mkdir(parents=True, exist_ok=True)
        partial = blob.with_name(f"{blob.name}.{os.getpid()}.partial")
        proc = subprocess.Popen(
            [sys.executable, "-c", _BUILD, node, str(frontend / ENTRY), str(partial), str(blob)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None  # no snapshot: the renderer starts the plain way
    if wait:
        proc.wait()
    return proc


def discard(blob: Path) -> None:
    """Remove a snapshot Node could not start from (the next use builds it again)."""
    try:
        blob.unlink()
    except OSError:
        pass
