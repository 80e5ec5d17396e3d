"""/healthz and /readyz over a real server process."""

import httpx


def test_healthz(live_server: str) -> None:
    r = httpx.get(live_server + "/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_readyz_reports_a_live_worker(live_server: str) -> None:
    r = httpx.get(live_server + "/readyz")
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "ready"
    assert isinstance(body["worker_pid"], int) and body["worker_pid"] > 0


def test_unknown_path_is_the_404_envelope(live_server: str) -> None:
    r = httpx.get(live_server + "/api/v1/nothing-here")
    assert r.status_code == 404
    assert r.json() == {"error": {"code": "not_found", "message": "no such resource", "path": None}}
