"""Issue 25 over a real server: bombs refused before a worker is taken, a trace past the deadline
remembered (permalinks included), worker time charged per client, no internals in any error."""

from __future__ import annotations

import time

import httpx
import pytest
from cost_bombs import BOMBS, INTERNALS, LEAKY_LINES, torch_error
from specs import tiny


@pytest.mark.parametrize("name", list(BOMBS))
def test_bombs_are_refused_before_a_worker_is_taken(live_server: str, name: str) -> None:
    doc, code, path, line = BOMBS[name]
    r = httpx.post(live_server + "/api/v1/trace", json=doc, timeout=60)
    assert r.status_code == 413, r.text[:300]
    error = r.json()["error"]
    assert (error["code"], error["path"], error.get("line")) == (code, path, line)
    assert "retry-after" not in r.headers  # a 4xx: the same spec is not to be sent again


def test_a_bomb_on_either_side_of_a_compare_is_refused(live_server: str) -> None:
    doc, _, path, _ = BOMBS["backward_steps"]
    r = httpx.post(live_server + "/api/v1/compare", json={"a": tiny("cmp"), "b": doc}, timeout=60)
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "too_costly" and r.json()["error"]["path"] == "/b" + path


def test_torch_internals_never_reach_the_client(live_server: str) -> None:
    r = httpx.post(live_server + "/api/v1/trace", json=torch_error(LEAKY_LINES[0]), timeout=60)
    assert r.status_code == 422
    error = r.json()["error"]
    assert (error["code"], error["path"], error["line"]) == ("forward_error", "/forward/0", 1)
    assert "Overflow when unpacking long long" in error["message"]
    assert "\n" not in error["message"] and not INTERNALS.search(r.text), r.text


@pytest.mark.parametrize("line", LEAKY_LINES[1:])
def test_no_torch_error_carries_internals(live_server: str, line: str) -> None:
    r = httpx.post(live_server + "/api/v1/trace", json=torch_error(line), timeout=60)
    assert r.status_code in (413, 422), r.text[:300]
    assert not INTERNALS.search(r.text), r.text


def test_a_trace_past_the_deadline_is_remembered_and_refused_at_once(server_factory) -> None:  # noqa: ANN001
    # Every trace sleeps 2 s in its worker; the deadline is 1 s: each spec runs past it.
    server = server_factory(
        env={
            "GRADTRACE_TRACE_TIMEOUT": "1",
            "GRADTRACE_DEBUG_TRACE_DELAY": "2",
            "GRADTRACE_RATE_PER_MINUTE": "0",
            "GRADTRACE_WORKERS": "1",
        }
    )
    spec = tiny("slow")
    first = httpx.post(server.url + "/api/v1/trace", json=spec, timeout=60)
    assert first.status_code == 503 and first.json()["error"]["code"] == "trace_timeout"
    for _ in range(2):
        started = time.monotonic()
        again = httpx.post(server.url + "/api/v1/trace", json=spec, timeout=60)
        assert again.status_code == 413, again.text
        error = again.json()["error"]
        assert error["code"] == "too_costly" and error["path"] == "/forward"
        assert "ran past the 1 s deadline" in error["message"]
        assert time.monotonic() - started < 5  # no worker: the one worker is still being replaced
    stored = httpx.post(server.url + "/api/v1/specs", json=spec, timeout=60).json()
    for view in ("trace", "diagram.svg", "player.html"):
        r = httpx.get(f"{server.url}/api/v1/specs/{stored['id']}/{view}", timeout=60)
        assert r.status_code == 413 and r.json()["error"]["code"] == "too_costly", (view, r.text)


@pytest.mark.alone  # its worker-time budget is 1 s: charged times assume a machine of its own
def test_worker_time_is_charged_to_the_client_that_used_it(server_factory) -> None:  # noqa: ANN001
    server = server_factory(
        env={
            "GRADTRACE_RATE_PER_MINUTE": "1000",
            "GRADTRACE_WORKER_SECONDS_PER_MINUTE": "1.0",
            "GRADTRACE_DEBUG_TRACE_DELAY": "0.6",
            "GRADTRACE_TRUST_PROXY": "1",
        }
    )
    while time.time() % 60 > 40:  # all requests inside one one-minute window
        time.sleep(1)
    greedy, other = {"x-real-ip": "10.0.0.1"}, {"x-real-ip": "10.0.0.2"}
    for n in range(2):  # 0.6 s of worker time each: the budget of 1 s is used up after two
        r = httpx.post(server.url + "/api/v1/trace", json=tiny(f"greedy {n}"), headers=greedy, timeout=60)
        assert r.status_code == 200
    r = httpx.post(server.url + "/api/v1/trace", json=tiny("greedy 2"), headers=greedy, timeout=60)
    assert r.status_code == 429 and r.json()["error"]["code"] == "worker_time_exceeded"
    assert 1 <= int(r.headers["retry-after"]) <= 61
    r = httpx.post(server.url + "/api/v1/trace", json=tiny("other"), headers=other, timeout=60)
    assert r.status_code == 200
