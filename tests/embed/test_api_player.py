"""GET /api/v1/specs/{id}/player.html over a real server: the offline player as a download."""

from __future__ import annotations

import base64
import gzip
import json
import re

import httpx
import pytest

from gradtrace.examples import get_example


@pytest.fixture(scope="module")
def permalink(app_server: str) -> dict[str, str]:
    r = httpx.post(app_server + "/api/v1/specs", json=get_example("two-layer-linear"), timeout=60)
    assert r.status_code in (200, 201), r.text
    return {"base": app_server, **r.json()}


def embedded_data(page: str) -> dict:
    """The trace and layout a player file carries (gzipped, base64, in its packed data block)."""
    packed = re.search(r'id="gradtrace-packed-data">([A-Za-z0-9+/=]+)</script>', page)
    if packed:
        return json.loads(gzip.decompress(base64.b64decode(packed.group(1))))
    found = re.search(r'<script type="application/json" id="gradtrace-data">(.*?)</script>', page, re.S)
    assert found, "no gradtrace-data block"
    return json.loads(found.group(1))


def test_player_html_is_an_offline_download_with_the_trace(permalink: dict[str, str]) -> None:
    url = f"{permalink['base']}/api/v1/specs/{permalink['id']}/player.html"
    r = httpx.get(url, timeout=180)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/html")
    # An unchanged example is named after it.
    assert r.headers["content-disposition"] == 'attachment; filename="two-layer-linear.html"'
    trace = httpx.get(f"{permalink['base']}/api/v1/specs/{permalink['id']}/trace", timeout=120).json()
    data = embedded_data(r.text)
    assert data["trace"] == trace
    # Laid out at export time: the file carries the layout, not the layout engine.
    assert data["layout"]["nodes"] and "g.ELK = f()" not in r.text and len(r.content) <= 400_000
    # Nothing outside the file: no external script or stylesheet, no module import by URL.
    assert not re.search(r"<script[^>]*\bsrc=", r.text)
    assert not re.search(r"<link[^>]*rel=\"?stylesheet", r.text)
    assert not re.search(r"""\bimport\s*(\(\s*)?["'](https?:|/)""", r.text)
    # Cached by (trace, theme), revalidated by ETag.
    again = httpx.get(url, timeout=60)
    assert again.headers["x-cache"] == "hit" and again.content == r.content
    assert httpx.get(url, headers={"If-None-Match": r.headers["etag"]}, timeout=60).status_code == 304


def test_edited_spec_is_named_by_id_and_theme_is_fixed(permalink: dict[str, str]) -> None:
    spec = get_example("two-layer-linear")
    spec["title"] = "An edited copy"
    r = httpx.post(permalink["base"] + "/api/v1/specs", json=spec, timeout=60)
    spec_id = r.json()["id"]
    url = f"{permalink['base']}/api/v1/specs/{spec_id}/player.html"
    page = httpx.get(url, params={"theme": "dark"}, timeout=180)
    assert page.status_code == 200, page.text
    assert page.headers["content-disposition"] == f'attachment; filename="{spec_id}.html"'
    assert embedded_data(page.text)["theme"] == "dark"
    assert httpx.get(url, params={"theme": "sepia"}, timeout=30).status_code == 422
    missing = httpx.get(permalink["base"] + "/api/v1/specs/aaaaaaaaaaaa/player.html", timeout=30)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "permalink_not_found"


def test_the_player_needs_no_node(server_factory) -> None:
    # A server whose Node.js cannot run: SVG diagrams are 503 (test_api_diagram), the player is not.
    server = server_factory(env={"GRADTRACE_NODE": "/nonexistent/node"})
    r = httpx.post(server.url + "/api/v1/specs", json=get_example("two-layer-linear"), timeout=60)
    d = httpx.get(f"{server.url}/api/v1/specs/{r.json()['id']}/player.html", timeout=120)
    assert d.status_code == 200, d.text
    assert embedded_data(d.text)["trace"]["graph"]["nodes"]
