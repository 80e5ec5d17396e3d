"""Property: whatever JSON a client posts, the answer is a 200 trace or a 4xx envelope — never
a 500, never a hang. Bounded (a few dozen examples each) to stay cheap on shared CPUs."""

from __future__ import annotations

import json

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from specs import SEED_002

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
FIELDS = sorted(SEED_002)

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def check(r: httpx.Response) -> None:
    assert r.status_code < 500 or r.status_code == 503, r.text
    if r.status_code not in (200, 201):
        body = r.json()
        assert set(body) == {"error"} and {"code", "message", "path"} <= set(body["error"])


@FUZZ
@given(doc=JSON_VALUES)
def test_any_json_document(app_server: str, doc: object) -> None:
    check(
        httpx.post(
            app_server + "/api/v1/trace",
            content=json.dumps(doc),
            headers={"content-type": "application/json"},
            timeout=60,
        )
    )


@FUZZ
@given(field=st.sampled_from(FIELDS), value=JSON_VALUES)
def test_seed_002_with_one_field_replaced(app_server: str, field: str, value: object) -> None:
    spec = dict(SEED_002, **{field: value})
    check(httpx.post(app_server + "/api/v1/trace", json=spec, timeout=60))
    check(httpx.post(app_server + "/api/v1/specs", json=spec, timeout=60))


@FUZZ
@given(line=st.text(max_size=40))
def test_any_program_line(app_server: str, line: str) -> None:
    spec = dict(SEED_002, forward=["x1 = f0(x)", line, "loss = (x1 - 1) ** 2"])
    check(httpx.post(app_server + "/api/v1/trace", json=spec, timeout=60))


@FUZZ
@given(raw=st.binary(max_size=200))
def test_any_bytes(app_server: str, raw: bytes) -> None:
    check(
        httpx.post(
            app_server + "/api/v1/trace",
            content=raw,
            headers={"content-type": "application/json"},
            timeout=60,
        )
    )


@FUZZ
@given(source=st.text(max_size=300))
def test_any_python_source(app_server: str, source: str) -> None:
    check(httpx.post(app_server + "/api/v1/translate", json={"python": source}, timeout=60))


@FUZZ
@given(line=st.text(max_size=60))
def test_any_line_in_a_model(app_server: str, line: str) -> None:
    source = (
        f"import torch\nx = torch.randn(2, requires_grad=True)\n{line}\nloss = x.sum()\nloss.backward()\n"
    )
    check(httpx.post(app_server + "/api/v1/translate", json={"python": source}, timeout=60))
