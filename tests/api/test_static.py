"""The viewer over the real server: /, its assets, /embed/{id}, /vendor/elkjs/; torch-free API."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"


@pytest.mark.skipif(not (FRONTEND / "index.html").is_file(), reason="the viewer is not written yet")
def test_viewer_at_root(live_server: str) -> None:
    r = httpx.get(live_server + "/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.text == (FRONTEND / "index.html").read_text()
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    js = httpx.get(live_server + "/js/main.js")
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]


@pytest.mark.skipif(not (FRONTEND / "embed.html").is_file(), reason="the embed player is not written yet")
def test_embed_page_may_be_framed_anywhere(live_server: str) -> None:
    r = httpx.get(live_server + "/embed/abcdefghijkl")
    assert r.status_code == 200 and r.text == (FRONTEND / "embed.html").read_text()
    assert "frame-ancestors *" in r.headers["content-security-policy"]
    assert "x-frame-options" not in r.headers
    assert httpx.get(live_server + "/embed/../../etc").status_code == 404


def test_elkjs_is_served_from_the_vendor_path(live_server: str) -> None:
    r = httpx.get(live_server + "/vendor/elkjs/elk-api.js")
    assert r.status_code == 200 and "javascript" in r.headers["content-type"]
    assert httpx.get(live_server + "/vendor/elkjs/elk-worker.min.js").status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/node_modules/elkjs/package.json",
        "/package.json",
        "/tools/render.mjs",
        "/.gitignore",
        "/../README.md",
    ],
)
def test_non_viewer_files_are_not_served(live_server: str, path: str) -> None:
    r = httpx.get(live_server + path)
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"


def test_the_api_process_never_loads_torch(server_factory) -> None:  # noqa: ANN001
    server = server_factory(env={"GRADTRACE_WORKERS": "1"})
    r = httpx.post(
        server.url + "/api/v1/trace",
        json={"spec_version": 1, "title": "t", "inputs": {"x": {"value": [1.0]}}, "forward": ["y = x * 2"]},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    maps = Path(f"/proc/{server.proc.pid}/maps").read_text()
    assert "libtorch" not in maps  # the traces ran in workers; the API process never mapped torch


def test_importing_the_app_does_not_import_torch() -> None:
    code = "import sys; from gradtrace.api import create_app; create_app(); sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
