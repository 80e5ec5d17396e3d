"""Every 4xx of the contract over a real server, with its exact envelope, and no 500s."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest
from specs import seed_002, tiny

JSON = {"content-type": "application/json"}


def envelope(r: httpx.Response) -> dict:
    body = r.json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert {"code", "message", "path"} <= set(err), err
    assert isinstance(err["code"], str) and isinstance(err["message"], str) and err["message"]
    return err


def post(url: str, content: bytes | str, headers: dict | None = None) -> httpx.Response:
    return httpx.post(url, content=content, headers=headers if headers is not None else JSON, timeout=60)


@pytest.mark.parametrize("endpoint", ["/api/v1/trace", "/api/v1/specs"])
def test_415_when_not_json(app_server: str, endpoint: str) -> None:
    r = post(app_server + endpoint, json.dumps(tiny("t")), {"content-type": "text/plain"})
    assert r.status_code == 415
    assert envelope(r) == {
        "code": "unsupported_media_type",
        "message": "send the spec as JSON with Content-Type: application/json",
        "path": None,
    }


@pytest.mark.parametrize(
    ("body", "code", "fragment"),
    [
        (b"", "invalid_json", "empty"),
        (b'{"spec_version": 1,', "invalid_json", "line 1, column 20"),
        (b'{"spec_version": NaN}', "non_finite_number", "NaN"),
        (b'{"seed": Infinity}', "non_finite_number", "Infinity"),
        (b'{"seed": -Infinity}', "non_finite_number", "-Infinity"),
        (b"\xff\xfe{}", "invalid_json", "UTF-8"),
    ],
)
def test_400_bad_json_names_the_problem(app_server: str, body: bytes, code: str, fragment: str) -> None:
    r = post(app_server + "/api/v1/trace", body)
    assert r.status_code == 400
    err = envelope(r)
    assert err["code"] == code and fragment in err["message"]


def test_nan_in_an_integer_field_is_400_not_500(app_server: str) -> None:
    body = json.dumps(tiny("nan"))[:-1] + ', "seed": NaN}'
    r = post(app_server + "/api/v1/trace", body)
    assert r.status_code == 400 and envelope(r)["code"] == "non_finite_number"


def test_413_declared_body_too_large(app_server: str) -> None:
    spec = tiny("big")
    spec["description"] = "x" * 300_000
    r = post(app_server + "/api/v1/trace", json.dumps(spec))
    assert r.status_code == 413
    assert envelope(r) == {
        "code": "payload_too_large",
        "message": "request body too large (limit 262144 bytes)",
        "path": None,
    }


def test_413_chunked_body_too_large(app_server: str) -> None:
    def chunks():
        yield b'{"title": "'
        for _ in range(40):
            yield b"y" * 10_000
        yield b'"}'

    r = httpx.post(app_server + "/api/v1/trace", content=chunks(), headers=JSON, timeout=60)
    assert r.status_code == 413
    assert envelope(r)["code"] == "payload_too_large"


def test_413_json_nested_too_deeply(app_server: str) -> None:
    r = post(app_server + "/api/v1/trace", b"[" * 200_000)
    assert r.status_code == 413 and envelope(r)["code"] == "too_deep"


def test_422_spec_error_points_at_the_program_line(app_server: str) -> None:
    spec = seed_002(forward=["x1 = f0(x)", "y = f1(x1", "loss = (y - 1) ** 2"])
    r = post(app_server + "/api/v1/trace", json.dumps(spec))
    assert r.status_code == 422
    err = envelope(r)
    assert err["code"] == "program_syntax"
    assert err["path"] == "/forward/1"
    assert err["line"] == 2 or isinstance(err.get("column"), int)


def test_422_undefined_name_is_named(app_server: str) -> None:
    spec = seed_002(forward=["x1 = f0(x)", "y = f1(x2)", "loss = (y - 1) ** 2"])
    r = post(app_server + "/api/v1/trace", json.dumps(spec))
    assert r.status_code == 422
    err = envelope(r)
    assert err["path"] == "/forward/1" and "x2" in err["message"]


def test_422_lists_a_mistake_of_each_stage_in_one_answer(app_server: str) -> None:
    from design_specs import FOUR_MISTAKES, spec_with_four_mistakes

    r = post(app_server + "/api/v1/trace", json.dumps(spec_with_four_mistakes()))
    assert r.status_code == 422
    err = envelope(r)
    listed = err["errors"]
    assert [(e["code"], e["path"]) for e in listed] == [(c, p) for c, p, _ in FOUR_MISTAKES]
    for e, (_, _, text) in zip(listed, FOUR_MISTAKES, strict=True):
        assert text in e["message"]
    assert (err["code"], err["path"]) == (listed[0]["code"], listed[0]["path"])
    assert [e.get("line") for e in listed] == [None, 2, 3, None]


def test_422_wrong_structure(app_server: str) -> None:
    for doc in ([], "spec", 3, {"spec_version": 99}):
        r = post(app_server + "/api/v1/trace", json.dumps(doc))
        assert r.status_code == 422, (doc, r.text)
        envelope(r)


def test_413_declared_tensor_over_the_element_limit(app_server: str) -> None:
    spec = tiny("huge")
    spec["inputs"] = {"x": {"shape": [2000, 2000], "init": "randn", "requires_grad": True}}
    r = post(app_server + "/api/v1/trace", json.dumps(spec))
    assert r.status_code == 413
    err = envelope(r)
    assert err["code"] == "limit_exceeded" and err["path"] == "/inputs/x"
    assert "4,000,000" in err["message"]


def test_overflowing_shape_is_refused_before_allocation(app_server: str) -> None:
    # torch.Size([2**40, 2**40]).numel() is 0: the check must be in Python ints, in the API.
    spec = tiny("overflow")
    spec["inputs"] = {"x": {"shape": [2**40, 2**40], "init": "randn", "requires_grad": True}}
    r = post(app_server + "/api/v1/trace", json.dumps(spec))
    assert r.status_code in (413, 422)
    assert envelope(r)["path"].startswith("/inputs/x")


def test_user_text_is_never_echoed_unescaped(app_server: str) -> None:
    spec = tiny("xss")
    spec["forward"] = ["y = <script>alert(1)</script>"]
    r = post(app_server + "/api/v1/trace", json.dumps(spec))
    assert r.status_code == 422
    assert b"<script>" not in r.content and b"<" not in r.content
    assert r.headers["content-type"].startswith("application/json")
    assert r.headers["x-content-type-options"] == "nosniff"


def test_404_envelopes(app_server: str) -> None:
    for path, code in [
        ("/api/v1/specs/aaaaaaaaaaaa", "permalink_not_found"),
        ("/api/v1/specs/not-an-id!", "permalink_not_found"),
        ("/api/v1/specs/aaaaaaaaaaaa/trace", "permalink_not_found"),
        ("/api/v1/examples/no-such-example", "example_not_found"),
        ("/api/v1/no/such/route", "not_found"),
    ]:
        r = httpx.get(app_server + path)
        assert r.status_code == 404, path
        assert envelope(r)["code"] == code, path


def test_405_wrong_method_is_an_envelope(app_server: str) -> None:
    r = httpx.get(app_server + "/api/v1/trace")
    assert r.status_code == 405
    assert envelope(r) == {"code": "method_not_allowed", "message": "use POST on this resource", "path": None}
    assert r.headers["allow"] == "POST"
    d = httpx.delete(app_server + "/api/v1/specs/aaaaaaaaaaaa")
    assert d.status_code == 405 and d.headers["allow"] == "GET"


def test_security_headers_and_csp(app_server: str) -> None:
    r = httpx.get(app_server + "/api/v1/specs/aaaaaaaaaaaa")
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    e = httpx.get(app_server + "/embed/aaaaaaaaaaaa")
    assert "frame-ancestors *" in e.headers["content-security-policy"]
    assert "x-frame-options" not in e.headers


def test_cors_preflight_and_simple_requests(app_server: str) -> None:
    r = httpx.options(
        app_server + "/api/v1/trace",
        headers={
            "Origin": "https://docs.example",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type",
        },
    )
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] in ("*", "https://docs.example")
    assert "POST" in r.headers["access-control-allow-methods"]
    g = httpx.get(app_server + "/api/v1/schema/spec", headers={"Origin": "https://docs.example"})
    assert g.headers["access-control-allow-origin"] == "*"


def two_inputs(title: str, a: list[int], b: list[int], forward: list[str]) -> dict:
    return {
        "spec_version": 1,
        "title": title,
        "inputs": {
            "a": {"shape": a, "init": "randn", "requires_grad": True},
            "b": {"shape": b, "init": "randn"},
        },
        "forward": forward,
    }


def test_413_flops_over_the_limit_caught_by_the_dry_run(app_server: str) -> None:
    spec = two_inputs("flops", [1000, 1000], [1000, 1000], ["c = a @ b", "d = c @ b", "loss = d.sum()"])
    r = post(app_server + "/api/v1/trace", json.dumps(spec))
    assert r.status_code == 413, r.text
    err = envelope(r)
    assert err["code"] == "limit_exceeded" and "max_flops" in err["message"]


def test_413_hidden_blow_up_caught_by_the_dry_run(app_server: str) -> None:
    # Declared inputs are tiny (100k elements each); their outer product would be 10^10.
    spec = two_inputs("blow-up", [100_000, 1], [1, 100_000], ["c = a @ b", "loss = c.sum()"])
    r = post(app_server + "/api/v1/trace", json.dumps(spec))
    assert r.status_code == 413, r.text
    err = envelope(r)
    assert err["code"] == "limit_exceeded"
    assert err["path"] == "/forward/0" and "10,000,000,000" in err["message"]


def test_oversized_header_is_refused_and_the_server_lives_on(app_server: str) -> None:
    # h11 caps only incomplete header blocks; one that arrives whole is capped by the app.
    r = httpx.get(app_server + "/healthz", headers={"X-Big": "a" * 70_000})
    assert r.status_code == 431
    assert envelope(r) == {
        "code": "headers_too_large",
        "message": "request headers too large (limit 16384 bytes)",
        "path": None,
    }
    assert httpx.get(app_server + "/healthz").status_code == 200


def test_oversized_header_arriving_in_pieces_gets_the_same_431(app_server: str) -> None:
    # Sent slowly, the block is incomplete when h11 hits its 16 KiB cap: the server's protocol
    # answers, with the app's envelope and status.
    host, port = app_server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: ")
        try:
            for _ in range(20):
                sock.sendall(b"a" * 4096)
                time.sleep(0.01)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and closed before the rest was sent: as it should
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431"), head
    assert json.loads(body)["error"]["code"] == "headers_too_large"
    assert httpx.get(app_server + "/healthz").status_code == 200
