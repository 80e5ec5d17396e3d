"""A static SVG as PNG, through headless Chromium (Debian's ``chromium`` or any Chrome).

An offline route that draws exactly what a browser shows (fonts, CSS variables, markers);
the page is a local file, and Chromium runs with a throwaway profile and a timeout.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from gradtrace.render.node_tool import RenderError, RenderUnavailable
from gradtrace.render.progress import progress

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
MAX_PIXELS = 80_000_000  # past this the device scale drops, so the bitmap stays bounded


def chromium_binary() -> str:
    configured = os.environ.get("GRADTRACE_CHROMIUM")
    for name in (configured,) if configured else _CANDIDATES:
        found = shutil.which(name) if name else None
        if found:
            return found
    raise RenderUnavailable(
        "PNG export needs Chromium or Chrome on PATH (or GRADTRACE_CHROMIUM set to it); "
        "SVG and HTML export do not"
    )


def svg_size(svg: str) -> tuple[int, int]:
    m = re.search(r'<svg[^>]*\bwidth="([\d.]+)"[^>]*\bheight="([\d.]+)"', svg)
    if not m:
        raise RenderError("the SVG has no width/height to size the PNG by")
    return int(float(m.group(1)) + 0.5), int(float(m.group(2)) + 0.5)


def svg_to_png(svg: str, scale: float = 2.0, timeout: float = 60.0) -> bytes:
    """Rasterise a static SVG at ``scale`` device pixels per CSS pixel."""
    width, height = svg_size(svg)
    while scale > 0.25 and width * height * scale * scale > MAX_PIXELS:
        scale /= 2
    with tempfile.TemporaryDirectory(prefix="gradtrace-png-") as tmp:
        page = Path(tmp) / "diagram.html"
        page.write_text(
            '<!doctype html><meta charset="utf-8"><style>html,body{margin:0;overflow:hidden}'
            f"svg{{display:block}}</style>{svg}",
            encoding="utf-8",
        )
        out = Path(tmp) / "diagram.png"
        cmd = [
            chromium_binary(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-extensions",
            f"--user-data-dir={Path(tmp) / 'profile'}",
            f"--force-device-scale-factor={scale:g}",
            f"--window-size={width},{height}",
            f"--screenshot={out}",
            page.as_uri(),
        ]
        try:
            with progress(f"rasterising {width:,}×{height:,} px at {scale:g}× in Chromium"):
                done = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            raise RenderError(f"Chromium took longer than {timeout:g} s to draw the PNG") from exc
        if done.returncode != 0 or not out.is_file():
            tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise RenderError(f"Chromium could not draw the PNG: {' | '.join(tail) or done.returncode}")
        return out.read_bytes()
