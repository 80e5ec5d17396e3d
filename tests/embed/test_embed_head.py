"""HEAD on /embed/{id} answers as GET does, without the body (issue 24, item 5): link
checkers and docs builds ask HEAD before they embed a page. Over a real server."""

from __future__ import annotations

import httpx

# Headers a response's time or connection make differ between two requests.
_PER_REQUEST = {"date", "x-request-id", "connection", "keep-alive"}


def _same_headers(get: httpx.Response, head: httpx.Response) -> None:
    for name, value in get.headers.items():
        if name.lower() not in _PER_REQUEST:
            assert head.headers.get(name) == value, name


def test_head_on_an_embed_answers_like_get(live_server: str) -> None:
    url = live_server + "/embed/abcdefghijkl"
    get = httpx.get(url, timeout=30)
    head = httpx.head(url, timeout=30)
    assert get.status_code == head.status_code == 200
    assert head.content == b""
    assert int(head.headers["content-length"]) == len(get.content) > 0
    assert head.headers["content-type"].startswith("text/html")
    _same_headers(get, head)  # the framing policy (CSP) and the other security headers too


def test_head_on_a_bad_embed_id_is_the_same_404(live_server: str) -> None:
    url = live_server + "/embed/not..an..id"
    get = httpx.get(url, timeout=30)
    head = httpx.head(url, timeout=30)
    assert get.status_code == head.status_code == 404
    assert head.content == b""
    _same_headers(get, head)
