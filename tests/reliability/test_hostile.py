"""The hostile corpus against a real server: every case gets its promised status, code and field.

Beyond each case's own answer: every error is the JSON envelope (never text/plain, never a
500), every status is one the OpenAPI document lists for that operation, the server logs no
traceback, and it still traces a valid spec afterwards.
"""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path

import httpx
import pytest
from hostile_corpus import ANY, HTTP_CASES, RAW_CASES, Case, RawCase
from server_process import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def openapi(server: ServerProcess) -> dict:
    return httpx.get(server.url + "/openapi.json", timeout=30).json()


def documented_statuses(openapi: dict, method: str, url: str) -> set[int] | None:
    """The statuses the OpenAPI document lists for the operation serving this URL (None: no operation)."""
    path = url.split("?", 1)[0]
    for template, operations in openapi["paths"].items():
        pattern = "^" + re.sub(r"\\{[^/]+\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, path) and method.lower() in operations:
            return {int(s) for s in operations[method.lower()]["responses"]}
    return None


def check_envelope(body: bytes, case_id: str) -> dict:
    doc = json.loads(body)
    assert set(doc) == {"error"}, (case_id, doc)
    error = doc["error"]
    assert isinstance(error["code"], str) and isinstance(error["message"], str) and error["message"], case_id
    assert error["path"] is None or error["path"] == "" or error["path"].startswith("/"), case_id
    return error


def test_the_corpus_is_big_enough() -> None:
    assert len(HTTP_CASES) + len(RAW_CASES) >= 60
    assert len({c.id for c in HTTP_CASES} | {c.id for c in RAW_CASES}) == len(HTTP_CASES) + len(RAW_CASES)


@pytest.mark.parametrize("case", HTTP_CASES, ids=lambda c: c.id)
def test_hostile_request(server: ServerProcess, openapi: dict, case: Case) -> None:
    r = httpx.request(case.method, server.url + case.url, content=case.body, headers=case.headers, timeout=60)
    assert r.status_code == case.status, (case.id, r.status_code, r.text[:400])
    if case.allow is not None:
        assert r.headers["allow"] == case.allow, case.id
    documented = documented_statuses(openapi, case.method, case.url)
    if documented is not None:
        assert r.status_code in documented, (case.id, r.status_code, sorted(documented))
    if case.code is None:
        return
    assert r.headers["content-type"].startswith("application/json"), case.id
    error = check_envelope(r.content, case.id)
    assert error["code"] == case.code, (case.id, error)
    if case.path is not ANY:
        assert error["path"] == case.path, (case.id, error)
    if case.line is not None:
        assert error.get("line") == case.line, (case.id, error)
    if case.errors is not None:
        assert len(error["errors"]) == case.errors and error["errors"][0]["path"] == error["path"], case.id
    assert len(r.content) < 4000, (case.id, "an error never echoes the body")


def _raw_exchange(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(request)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return status, headers, body


@pytest.mark.parametrize("case", RAW_CASES, ids=lambda c: c.id)
def test_malformed_framing_gets_an_envelope(server: ServerProcess, case: RawCase) -> None:
    status, headers, body = _raw_exchange(server.url, case.request)
    assert status == case.status, (case.id, status, body[:200])
    assert headers["content-type"].startswith("application/json"), (case.id, headers)
    assert check_envelope(body, case.id)["code"] == case.code


def test_client_disconnecting_mid_body_logs_no_traceback(server: ServerProcess) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    for _ in range(3):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(
                b"POST /api/v1/trace HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 5000\r\n\r\n" + b'{"title": "' + b"a" * 1000
            )
    time.sleep(1.0)
    assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200


def test_after_the_corpus_the_server_is_clean_and_still_traces(server: ServerProcess) -> None:
    from design_specs import seed_002

    r = httpx.post(server.url + "/api/v1/trace", json=seed_002(), timeout=60)
    assert r.status_code == 200 and r.json()["spec"]["title"] == seed_002()["title"]
    log = Path(server.log_path).read_text(errors="replace")
    assert "Traceback" not in log, log[-4000:]
    assert " 500 " not in log


def test_python_payloads_never_run(server: ServerProcess) -> None:
    """Every Python payload of the corpus would create EXECUTION_MARKER if any of it ran."""
    from hostile_corpus import EXECUTION_MARKER, PYTHON_CASES

    marker = Path(EXECUTION_MARKER)
    marker.unlink(missing_ok=True)
    for case in PYTHON_CASES:
        r = httpx.post(server.url + case.url, content=case.body, headers=case.headers, timeout=60)
        assert r.status_code < 500, (case.id, r.text[:300])
    assert not marker.exists()
