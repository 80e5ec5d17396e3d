"""Conditional requests and ids by the book (RFC 9110): ``If-None-Match`` only for stored ids,
ids checked against their alphabet and length before any use, no id echoed into a header."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx
import pytest
from specs import tiny

from gradtrace.service.hashing import is_permalink_id

STORED_VIEWS = ("", "/trace", "/diagram.svg", "/player.html")


def stored_id(base: str) -> str:
    r = httpx.post(base + "/api/v1/specs", json=tiny("conditional", 0.25), timeout=60)
    assert r.status_code in (200, 201), r.text
    return r.json()["id"]


def raw_get(base: str, target: bytes) -> bytes:
    """The whole answer to a GET whose request target is sent byte for byte (no client escaping)."""
    url = urlsplit(base)
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
        sock.sendall(
            b"GET " + target + b" HTTP/1.1\r\nHost: t\r\nIf-None-Match: *\r\nConnection: close\r\n\r\n"
        )
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_id_alphabet_and_length() -> None:
    assert is_permalink_id("abcdefghij23")
    for bad in (
        "abcdefghij2",
        "abcdefghij234",
        "ABCDEFGHIJ23",
        "abcdefghij01",
        "abcdefghij2\n",
        "ab%cdefghij2",
    ):
        assert not is_permalink_id(bad), bad


@pytest.mark.parametrize("view", STORED_VIEWS)
def test_if_none_match_star_is_a_404_for_an_id_not_stored(app_server: str, view: str) -> None:
    for sid in ("aaaaaaaaaaaa", "not-an-id", "x" * 300):
        r = httpx.get(f"{app_server}/api/v1/specs/{sid}{view}", headers={"If-None-Match": "*"}, timeout=60)
        assert r.status_code == 404, (sid, r.status_code)
        assert r.json()["error"]["code"] == "permalink_not_found"
        assert "etag" not in r.headers and sid not in str(r.headers)


def test_if_none_match_on_a_stored_id(app_server: str) -> None:
    sid = stored_id(app_server)
    url = f"{app_server}/api/v1/specs/{sid}"
    got = httpx.get(url)
    etag = got.headers["etag"]
    assert sid not in etag  # the content's hash, not the id as sent
    assert httpx.get(url, headers={"If-None-Match": "*"}).status_code == 304
    assert httpx.get(url, headers={"If-None-Match": f'"x", {etag}'}).status_code == 304
    assert httpx.get(url, headers={"If-None-Match": '"other"'}).status_code == 200
    # RFC 9110: If-None-Match compares weakly, so a weak tag of the same value matches
    assert httpx.get(url, headers={"If-None-Match": f"W/{etag}"}).status_code == 304
    assert httpx.get(url, headers={"If-None-Match": 'W/"other"'}).status_code == 200
    not_modified = httpx.get(url, headers={"If-None-Match": etag})
    assert not_modified.status_code == 304 and not_modified.headers["etag"] == etag
    assert not_modified.content == b""


@pytest.mark.parametrize(
    "target",
    [
        "/api/v1/specs/%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9",  # non-Latin-1 once decoded
        "/api/v1/specs/%E2%82%AC/trace",
        "/api/v1/specs/abc%0d%0aX-Injected:%201",
        "/api/v1/specs/abcdefghij23%0d%0a/diagram.svg",
        "/api/v1/specs/%0d%0a%0d%0a",
        "/embed/abc%0d%0aX-Injected:%201",
        "/embed/%C3%A9",
        "/api/v1/specs/%FF%FE",  # not UTF-8 at all
    ],
)
def test_hostile_ids_get_a_clean_404(app_server: str, target: str) -> None:
    answer = raw_get(app_server, target.encode())
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 404 "), head[:200]
    assert b"x-injected" not in head.lower() and b"etag" not in head.lower()
    assert b'"not_found"' in body or b'"permalink_not_found"' in body
    assert httpx.get(app_server + "/healthz").status_code == 200  # the server is still fine
