"""POST /api/v1/trace over a real server: real numbers (oracle: plain torch), the cache, ETags."""

from __future__ import annotations

import json
import re

import httpx
import msgspec
import torch
from specs import reordered, seed_002, tiny

from gradtrace.trace_schema import TraceDoc


def plain_torch_seed_002() -> dict[str, float]:
    """Seed 002 in plain PyTorch, no hooks: the forward values the trace must reproduce."""
    f0 = torch.nn.Linear(1, 1)
    f = torch.nn.Linear(1, 1)
    with torch.no_grad():
        f0.weight.fill_(0.3), f0.bias.fill_(0.1), f.weight.fill_(0.4), f.bias.fill_(0.2)
    x = torch.tensor([0.3], requires_grad=True)
    x1 = f0(x)
    y = f(x1) ** 2
    loss = (y - 1) ** 2
    loss.backward()
    return {"x1": x1.item(), "y": y.item(), "loss": loss.item(), "f1.f.weight.grad": f.weight.grad.item()}


def post_trace(base: str, spec: object, **headers: str) -> httpx.Response:
    return httpx.post(base + "/api/v1/trace", json=spec, headers=headers, timeout=120)


def test_trace_of_seed_002_has_the_real_numbers(app_server: str) -> None:
    r = post_trace(app_server, seed_002(title="seed 002 numbers"))
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    doc = msgspec.json.decode(r.content, type=TraceDoc)  # the worker's bytes are a valid trace
    oracle = plain_torch_seed_002()
    for name in ("x1", "y", "loss"):
        assert abs(doc.values[name].values[0] - oracle[name]) < 1e-6, name
    # The hook doubles grad_input of f1, not f1's own parameters' gradients.
    assert abs(doc.grads["f1.f.weight"].values[0] - oracle["f1.f.weight.grad"]) < 1e-6
    assert doc.torch_version.startswith("2.13")
    assert any(e.kind == "module_backward" and e.module == "f1" for e in doc.events)


def test_identical_specs_are_cache_hits_with_the_same_etag(app_server: str) -> None:
    spec = tiny("cache test", 3.25)
    first = post_trace(app_server, spec)
    assert first.status_code == 200, first.text
    assert first.headers["x-cache"] == "miss"
    etag = first.headers["etag"]
    assert etag.startswith('"') and len(etag) == 34
    again = post_trace(app_server, spec)
    assert again.headers["x-cache"] == "hit" and again.headers["etag"] == etag
    assert again.content == first.content
    # Same content, other key order and whitespace: the same normalised spec, the same trace.
    other = httpx.post(
        app_server + "/api/v1/trace",
        content=json.dumps(reordered(spec), indent=3),
        headers={"content-type": "application/json"},
    )
    assert other.headers["x-cache"] == "hit" and other.headers["etag"] == etag
    # A conditional request answers 304 without a body.
    cond = post_trace(app_server, spec, **{"If-None-Match": etag})
    assert cond.status_code == 304 and cond.content == b""


def test_a_different_spec_is_a_different_trace(app_server: str) -> None:
    a = post_trace(app_server, tiny("diff", 1.0))
    b = post_trace(app_server, tiny("diff", 2.0))
    assert a.status_code == b.status_code == 200
    assert a.headers["etag"] != b.headers["etag"]
    assert json.loads(a.content)["values"]["loss"]["values"] == [5.0]  # 1 + 4
    assert json.loads(b.content)["values"]["loss"]["values"] == [8.0]  # 4 + 4


def test_pytorch_refusal_is_recorded_not_an_error(app_server: str) -> None:
    spec = seed_002(
        title="second backward", steps=[{"do": "backward", "of": "loss"}, {"do": "backward", "of": "loss"}]
    )
    r = post_trace(app_server, spec)
    assert r.status_code == 200, r.text
    errors = [e for e in r.json()["events"] if e["kind"] == "error"]
    assert errors and "backward through the graph a second time" in errors[0]["message"]


def test_forward_error_is_a_422_naming_the_line(app_server: str) -> None:
    spec = tiny("shape mismatch")
    spec["inputs"]["w"] = {"value": [[1.0, 2.0, 3.0]], "requires_grad": True}
    spec["forward"] = ["y = x * x", "z = w @ y", "loss = z.sum()"]
    r = post_trace(app_server, spec)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["path"] == "/forward/1"
    assert err["code"] in ("forward_error", "shape_error")


def test_schemas_are_served_and_the_trace_matches_its_schema(app_server: str) -> None:
    spec_schema = httpx.get(app_server + "/api/v1/schema/spec")
    trace_schema = httpx.get(app_server + "/api/v1/schema/trace")
    for r in (spec_schema, trace_schema):
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/schema+json")
        assert r.headers["cache-control"] == "public, max-age=3600"
        assert httpx.get(r.url, headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    assert trace_schema.json()["properties"]["schema_version"]
    assert "forward" in spec_schema.json()["properties"]


def test_openapi_describes_every_endpoint(app_server: str) -> None:
    doc = httpx.get(app_server + "/openapi.json").json()
    paths = set(doc["paths"])
    for p in (
        "/api/v1/trace",
        "/api/v1/examples",
        "/api/v1/examples/{example_id}",
        "/api/v1/schema/spec",
        "/api/v1/schema/trace",
        "/api/v1/specs",
        "/api/v1/specs/{spec_id}",
        "/api/v1/specs/{spec_id}/trace",
        "/healthz",
        "/readyz",
    ):
        assert p in paths, p
    body = doc["paths"]["/api/v1/trace"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/ModelSpec"}
    assert {"ModelSpec", "TraceDoc", "ErrorEnvelope", "Permalink"} <= set(doc["components"]["schemas"])
    created = doc["paths"]["/api/v1/specs"]["post"]["responses"]["201"]["content"]["application/json"][
        "schema"
    ]
    assert created == {"$ref": "#/components/schemas/Permalink"}
    text = json.dumps(doc)
    assert '"#/$defs/' not in text  # every nested schema was moved into components
    docs = httpx.get(app_server + "/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_docs_page_works_offline(app_server: str) -> None:
    """Swagger UI comes from the frontend's npm package, not a CDN: /docs renders offline."""
    page = httpx.get(app_server + "/docs")
    assert "http://" not in page.text and "https://" not in page.text
    assets = re.findall(r'(?:src|href)="(/vendor/swagger-ui/[^"]+)"', page.text)
    assert {a.rsplit("/", 1)[1] for a in assets} >= {"swagger-ui-bundle.js", "swagger-ui.css"}
    for asset in assets:
        r = httpx.get(app_server + asset)
        assert r.status_code == 200 and len(r.content) > 500, asset
    csp = page.headers["content-security-policy"]
    assert "cdn" not in csp and "frame-ancestors 'none'" in csp


def test_examples_list_and_each_example_traces(app_server: str) -> None:
    r = httpx.get(app_server + "/api/v1/examples")
    assert r.status_code == 200
    items = r.json()
    assert len(items) >= 5
    assert all(set(e) >= {"id", "title", "description"} for e in items)
    first = httpx.get(app_server + f"/api/v1/examples/{items[0]['id']}")
    assert first.status_code == 200
    t = post_trace(app_server, first.json())
    assert t.status_code == 200, t.text
    assert t.json()["title"] == first.json()["title"]
