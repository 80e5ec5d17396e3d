"""Framing by path: only a permalink's player (and its diagram) may be framed, by any site and by
a page opened from disk; the app page never, whatever dot segments or encoded slashes say.
(A page opened from disk, in Chromium: tests/e2e/test_framing_from_disk.py.)"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx
import pytest

EMBED_ID = "abcdefghij23"


def raw_head(base: str, target: str) -> str:
    """Status line and headers of a GET sent byte for byte (clients would normalise the path)."""
    url = urlsplit(base)
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).partition(b"\r\n\r\n")[0].decode("latin-1").lower()


def test_only_the_player_is_frameable(app_server: str) -> None:
    embed = httpx.get(f"{app_server}/embed/{EMBED_ID}")
    assert embed.status_code == 200
    assert "frame-ancestors * file:" in embed.headers["content-security-policy"]
    assert "x-frame-options" not in embed.headers
    head = httpx.head(f"{app_server}/embed/{EMBED_ID}")  # HEAD answers like GET
    assert (
        head.status_code == 200
        and head.headers["content-security-policy"] == embed.headers["content-security-policy"]
    )
    for path in ("/", "/index.html", "/embed.html", "/js/main.js", "/api/v1/examples"):
        r = httpx.get(app_server + path)
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"], path
        assert r.headers["x-frame-options"] == "DENY", path


@pytest.mark.parametrize(
    "target",
    [
        "/embed/..%2findex.html",
        "/embed/..%2F..%2Findex.html",
        "/embed/%2e%2e/index.html",
        "/embed/x/..%2f..%2findex.html",
        "/embed/..%5cindex.html",
        "/api/v1/specs/../../../index.html%23/diagram.svg",
        "/api/v1/specs/..%2f..%2f..%2findex.html%3f/diagram.svg",
    ],
)
def test_dot_segments_never_make_the_app_frameable(app_server: str, target: str) -> None:
    head = raw_head(app_server, target)
    assert "frame-ancestors *" not in head, head
    if head.startswith("http/1.1 200"):  # whatever it served, it may not be framed
        assert "frame-ancestors 'none'" in head and "x-frame-options: deny" in head
