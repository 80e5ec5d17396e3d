"""POST /api/v1/compare over a real server: seed 002 against its ×2 variant (specs and
permalinks), the published schema, and every bad body as a 4xx envelope naming the side."""

from __future__ import annotations

import json
import re

import httpx
import jsonschema
import pytest
from specs import seed_002, tiny

from gradtrace.examples import get_example

TIMEOUT = 120


def compare(base: str, body: object) -> httpx.Response:
    return httpx.post(base + "/api/v1/compare", json=body, timeout=TIMEOUT)


def check_x2_diff(diff: dict) -> None:
    """a = seed 002, b = the same model with its full backward hook doubling grad_input."""
    assert sorted(diff["summary"]["changed_grads"]) == ["f0.bias", "f0.weight", "x"]
    assert sorted(diff["summary"]["unchanged_grads"]) == ["f1.f.bias", "f1.f.weight"]
    by_name = {d["name"]: d for d in diff["grads"]}
    for name in ("x", "f0.weight", "f0.bias"):
        assert by_name[name]["status"] == "changed"
        assert by_name[name]["ratio"] == 2.0
    for name in ("f1.f.bias", "f1.f.weight"):
        assert by_name[name]["status"] == "unchanged" and by_name[name]["max_abs_diff"] == 0.0
    assert not diff["nodes"]["only_a"] and not diff["nodes"]["only_b"]
    assert [(h["where"], h["status"]) for h in diff["hooks"]] == [("f1", "changed")]


def test_seed_002_against_its_x2_variant(app_server: str) -> None:
    a, b = get_example("full-backward-hook"), get_example("full-backward-hook-x2")
    r = compare(app_server, {"a": a, "b": b})
    assert r.status_code == 200, r.text
    diff = r.json()
    check_x2_diff(diff)
    # the numbers are the traces' own: |b - a| of each final gradient, as POST /trace gives them
    posted = [httpx.post(app_server + "/api/v1/trace", json=spec, timeout=TIMEOUT) for spec in (a, b)]
    assert [r.headers["x-cache"] for r in posted] == ["hit", "hit"]  # compare traced them into the same cache
    ta, tb = (r.json() for r in posted)
    for d in diff["grads"]:
        (va,), (vb,) = ta["grads"][d["name"]]["values"], tb["grads"][d["name"]]["values"]
        assert d["max_abs_diff"] == pytest.approx(abs(vb - va), rel=1e-6)
    # changed edges are edges of b, and exactly the ones below the hook carry a changed gradient
    edge_ids_b = {e["id"] for e in tb["graph"]["edges"]}
    assert diff["summary"]["changed_edges"] and set(diff["summary"]["changed_edges"]) <= edge_ids_b


def test_permalink_ids_on_either_side(app_server: str) -> None:
    a = get_example("full-backward-hook")
    sid = httpx.post(app_server + "/api/v1/specs", json=a, timeout=TIMEOUT).json()["id"]
    r = compare(app_server, {"a": sid, "b": get_example("full-backward-hook-x2")})
    assert r.status_code == 200, r.text
    diff = r.json()
    check_x2_diff(diff)
    assert diff["a"]["permalink"] == sid and diff["b"]["permalink"] is None


def test_the_answer_follows_the_published_schema(app_server: str) -> None:
    schema = httpx.get(app_server + "/api/v1/schema/compare")
    assert schema.status_code == 200
    assert schema.headers["content-type"].startswith("application/schema+json")
    spec = seed_002(title="compare schema")
    r = compare(app_server, {"a": spec, "b": spec})
    assert r.status_code == 200, r.text
    jsonschema.validate(r.json(), schema.json())
    assert r.json()["summary"]["changed_grads"] == []
    openapi = httpx.get(app_server + "/openapi.json").json()
    assert "/api/v1/compare" in openapi["paths"]
    components = openapi["components"]["schemas"]
    assert "CompareDoc" in components
    refs = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(openapi)))
    assert refs <= set(components), refs - set(components)  # every reference resolves


@pytest.mark.parametrize(
    ("body", "status", "code", "path"),
    [
        ([1, 2], 422, "invalid_request", None),  # the body as a whole: no field to blame
        ({"a": {}}, 422, "invalid_request", "/b"),
        ({"a": 3, "b": "x"}, 422, "invalid_request", "/a"),
        ({"a": "zzzzzzzzzzzz", "b": "aaaaaaaaaaaa"}, 404, "permalink_not_found", "/a"),
        ({"a": {"spec_version": 1}, "b": {"spec_version": 1}, "c": 1}, 422, "invalid_request", "/c"),
    ],
)
def test_bad_bodies_are_4xx_envelopes(app_server: str, body, status, code, path) -> None:  # noqa: ANN001
    r = compare(app_server, body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code
    assert r.json()["error"]["path"] == path


def test_a_bad_spec_is_named_under_its_side(app_server: str) -> None:
    good = seed_002(title="compare good side")
    r = compare(app_server, {"a": good, "b": seed_002(forward=["y = nope(x)"])})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["path"] == "/b/forward/0"
    r = compare(app_server, {"a": seed_002(modules="no"), "b": good})
    assert r.status_code == 422 and r.json()["error"]["path"].startswith("/a")


def test_an_error_pytorch_raises_in_the_worker_is_named_under_its_side(app_server: str) -> None:
    bad = tiny("compare shape mismatch")
    bad["inputs"]["w"] = {"value": [[1.0, 2.0, 3.0]], "requires_grad": True}
    bad["forward"] = ["y = x * x", "z = w @ y", "loss = z.sum()"]
    r = compare(app_server, {"a": tiny("compare fine side"), "b": bad})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["path"] == "/b/forward/1"
    assert r.json()["error"]["line"] == 2


def test_a_step_pytorch_refuses_is_still_compared(app_server: str) -> None:
    # a second backward through a freed graph is an error event in the trace, not an HTTP error
    r = compare(
        app_server, {"a": get_example("retain-graph-accumulation"), "b": get_example("freed-graph-error")}
    )
    assert r.status_code == 200, r.text


def test_not_json_and_wrong_content_type(app_server: str) -> None:
    r = httpx.post(app_server + "/api/v1/compare", content=b"{", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    r = httpx.post(app_server + "/api/v1/compare", content=b"{}", headers={"content-type": "text/plain"})
    assert r.status_code == 415
