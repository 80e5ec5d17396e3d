"""POST /api/v1/translate against a real server: both directions, errors at the source line,
and the OpenAPI document's description of it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

import gradtrace

SOURCE = """import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(2, 3)
layer = nn.Linear(3, 1)
loss = layer(x).relu().sum()
loss.backward()
"""


def test_python_to_spec_and_back(app_server: str) -> None:
    r = httpx.post(app_server + "/api/v1/translate", json={"python": SOURCE}, timeout=60)
    assert r.status_code == 200, r.text
    spec = r.json()["spec"]
    assert spec["modules"]["layer"] == {"type": "Linear", "in_features": 3, "out_features": 1, "bias": True}
    assert spec["forward"] == ["loss = layer(x).relu().sum()"]
    r = httpx.post(app_server + "/api/v1/translate", json={"spec": spec}, timeout=60)
    assert r.status_code == 200, r.text
    python = r.json()["python"]
    assert "layer = nn.Linear(3, 1)" in python and "loss.backward()" in python
    again = httpx.post(app_server + "/api/v1/translate", json={"python": python}, timeout=60).json()
    assert again["spec"] == spec


def test_gallery_example_as_python(app_server: str) -> None:
    doc = json.loads((Path(gradtrace.__file__).parent / "examples" / "two-layer-linear.json").read_text())
    r = httpx.post(app_server + "/api/v1/translate", json={"spec": doc}, timeout=60)
    assert r.status_code == 200
    assert "W0.weight.copy_(torch.tensor([[0.1, 0.2], [-0.3, 0.4], [0.5, -0.6]]))" in r.json()["python"]


def test_unsupported_python_is_422_at_its_line_and_column(app_server: str) -> None:
    source = SOURCE.replace("loss = layer(x).relu().sum()", "loss = layer(x).softplus().sum()")
    r = httpx.post(app_server + "/api/v1/translate", json={"python": source}, timeout=60)
    assert r.status_code == 422
    error = r.json()["error"]
    assert (error["code"], error["path"], error["line"], error["column"]) == (
        "unknown_function",
        "/python",
        7,
        17,  # the method's name: `softplus`
    )
    assert "softplus" in error["message"] and "the spec knows" in error["message"]


def test_bad_spec_points_into_the_request(app_server: str) -> None:
    r = httpx.post(
        app_server + "/api/v1/translate",
        json={"spec": {"spec_version": 1, "forward": ["y = ="]}},
        timeout=60,
    )
    assert r.status_code == 422
    assert r.json()["error"]["path"].startswith("/spec/forward/0")


def test_source_over_the_size_limit_is_413(app_server: str) -> None:
    r = httpx.post(app_server + "/api/v1/translate", json={"python": "#" * 200_000}, timeout=60)
    assert r.status_code == 413 and r.json()["error"]["code"] == "limit_exceeded"


def test_openapi_documents_translate_with_its_limits(app_server: str) -> None:
    op = httpx.get(app_server + "/openapi.json", timeout=30).json()["paths"]["/api/v1/translate"]["post"]
    assert "100,000 bytes" in op["description"] and "never executed" in op["description"]
    assert {"200", "400", "413", "415", "422"} <= set(op["responses"])
    schema = op["requestBody"]["content"]["application/json"]["schema"]
    assert schema["oneOf"][0]["properties"]["python"]["maxLength"] == 100_000


def test_every_refused_line_comes_back_in_one_answer(app_server: str) -> None:
    source = (
        SOURCE.replace("loss = layer(x).relu().sum()", "h = layer(x).softplus()\nloss = h.cumsum(0).sum()")
        + "import os\n"
    )
    r = httpx.post(app_server + "/api/v1/translate", json={"python": source}, timeout=60)
    assert r.status_code == 422
    error = r.json()["error"]
    located = [(e["line"], e["column"], e["path"]) for e in error["errors"]]
    assert located == [(7, 14, "/python"), (8, 10, "/python"), (10, 1, "/python")]
    assert (error["line"], error["column"]) == (7, 14)  # the envelope's own fields: the first
