"""GET /api/v1/specs/{id}/diagram.svg over a real server: SVG for <img>, cached, never a 500."""

from __future__ import annotations

import httpx
import pytest
from svg_checks import assert_self_contained_svg, drawn_node_ids

from gradtrace.examples import get_example


@pytest.fixture(scope="module")
def permalink(app_server: str) -> tuple[str, str]:
    r = httpx.post(app_server + "/api/v1/specs", json=get_example("two-layer-linear"), timeout=60)
    assert r.status_code in (200, 201), r.text
    return app_server, r.json()["diagram_url"]


def test_diagram_svg_is_an_image_with_every_node(permalink: tuple[str, str]) -> None:
    base, url = permalink
    r = httpx.get(url, timeout=120)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/svg+xml"
    assert r.headers["x-content-type-options"] == "nosniff"
    root = assert_self_contained_svg(r.text)
    trace = httpx.get(url.replace("/diagram.svg", "/trace"), timeout=120).json()
    assert drawn_node_ids(root) == {n["id"] for n in trace["graph"]["nodes"]}
    # Cached by (trace, options): the second answer is the same bytes, from the cache.
    again = httpx.get(url, timeout=60)
    assert again.headers["x-cache"] == "hit" and again.content == r.content
    assert httpx.get(url, headers={"If-None-Match": r.headers["etag"]}, timeout=60).status_code == 304


def test_animated_dark_backward_variant(permalink: tuple[str, str]) -> None:
    _, url = permalink
    r = httpx.get(
        url, params={"animated": "true", "theme": "dark", "phase": "both", "values": "false"}, timeout=120
    )
    assert r.status_code == 200, r.text
    assert_self_contained_svg(r.text)
    assert "@keyframes gt-fwd-" in r.text and "@keyframes gt-bwd-" in r.text
    assert "gt-theme-dark" in r.text
    plain = httpx.get(url, timeout=60)
    assert plain.headers["etag"] != r.headers["etag"]


def test_bad_options_and_unknown_ids_are_4xx_envelopes(permalink: tuple[str, str]) -> None:
    base, url = permalink
    r = httpx.get(url, params={"phase": "sideways"}, timeout=30)
    assert r.status_code == 422
    assert r.json()["error"]["code"] and "phase" in r.text
    r = httpx.get(url, params={"theme": "<b>"}, timeout=30)
    assert r.status_code == 422
    r = httpx.get(base + "/api/v1/specs/aaaaaaaaaaaaaaaa/diagram.svg", timeout=30)
    assert r.status_code == 404 and r.json()["error"]["code"] == "permalink_not_found"
    r = httpx.get(base + "/api/v1/specs/..%2F..%2Fetc/diagram.svg", timeout=30)
    assert r.status_code == 404


def test_render_failure_is_a_503_envelope(server_factory) -> None:
    # A server whose renderer cannot run (no Node.js): the diagram is a 503, the trace still works.
    server = server_factory(env={"GRADTRACE_NODE": "/nonexistent/node"})
    r = httpx.post(server.url + "/api/v1/specs", json=get_example("two-layer-linear"), timeout=60)
    url = r.json()["diagram_url"].replace(r.json()["diagram_url"].split("/api/")[0], server.url)
    d = httpx.get(url, timeout=120)
    assert d.status_code == 503, d.text
    assert d.json()["error"]["code"] == "render_unavailable"
    assert httpx.get(url.replace("/diagram.svg", "/trace"), timeout=120).status_code == 200
