"""The OpenAPI document tells the truth: the statuses each route answers, the content types served."""

from __future__ import annotations

import httpx
import pytest


@pytest.fixture(scope="module")
def doc(app_server: str) -> dict:
    return httpx.get(app_server + "/openapi.json", timeout=30).json()


def statuses(doc: dict, method: str, path: str) -> set[int]:
    return {int(s) for s in doc["paths"][path][method]["responses"]}


def test_no_fastapi_validation_error_is_documented(doc: dict) -> None:
    assert "HTTPValidationError" not in str(doc)
    assert 422 not in statuses(doc, "get", "/api/v1/examples/{example_id}")


def test_every_operation_lists_what_any_request_can_get(doc: dict) -> None:
    for path, operations in doc["paths"].items():
        for method in operations:
            got = statuses(doc, method, path)
            assert {400, 413, 431, 503} <= got, (method, path)
            if path.startswith("/api/"):
                assert 429 in got, (method, path)
            if "{" in path:
                assert 404 in got, (method, path)


def test_spec_routes_list_their_own_answers(doc: dict) -> None:
    assert statuses(doc, "post", "/api/v1/trace") == {200, 304, 400, 413, 415, 422, 429, 431, 503}
    assert statuses(doc, "post", "/api/v1/specs") == {200, 201, 400, 413, 415, 422, 429, 431, 503}
    assert 415 not in statuses(doc, "get", "/api/v1/specs/{spec_id}/trace")


@pytest.mark.parametrize("which", ["spec", "trace"])
def test_schema_content_type_is_documented_as_served(app_server: str, doc: dict, which: str) -> None:
    path = f"/api/v1/schema/{which}"
    documented = set(doc["paths"][path]["get"]["responses"]["200"]["content"])
    served = httpx.get(app_server + path, timeout=30).headers["content-type"].split(";")[0]
    assert documented == {served} == {"application/schema+json"}


def test_error_envelope_documents_the_list_of_errors(doc: dict) -> None:
    error = doc["components"]["schemas"]["ErrorEnvelope"]["properties"]["error"]["properties"]
    assert {"code", "message", "path", "line", "column", "errors"} <= set(error)


def test_validation_errors_come_all_at_once(app_server: str) -> None:
    from specs import seed_002

    spec = seed_002(hooks=[{"module": "a", "type": "forward"}, {"module": "b", "type": "forward"}])
    del spec["title"]
    r = httpx.post(app_server + "/api/v1/trace", json=spec, timeout=60)
    assert r.status_code == 422
    error = r.json()["error"]
    assert error["path"] == "/hooks/0/module"
    assert [e["path"] for e in error["errors"]] == ["/hooks/0/module", "/hooks/1/module"]
