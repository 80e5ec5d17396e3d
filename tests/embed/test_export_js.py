"""Runs the export modules' Node tests (tests/embed/js/*.test.mjs) under pytest, so `make test`
covers them with the rest of the embed tests (npm test runs tests/frontend only)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).parent


def test_export_modules_in_node() -> None:
    node = shutil.which("node")
    assert node, "Node.js is required (the renderer runs on it)"
    done = subprocess.run([node, "--test", str(HERE / "js")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout
