"""``gradtrace view TRACE.json`` as a user runs it: a real server subprocess, its printed URL
fetched, the very trace file served to the viewer, Ctrl-C ending it; bad files refused first."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from server_process import ctrl_c_as_at_a_terminal, printed_until

REPO = Path(__file__).resolve().parents[2]
SPEC = {
    "spec_version": 1,
    "title": "view me",
    "inputs": {"x": {"value": [1.0, 3.0], "requires_grad": True}},
    "forward": ["y = x * x", "loss = y.sum()"],
}


def gradtrace(*args: str, env: dict[str, str] | None = None, **kwargs: object) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gradtrace", *args],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=ctrl_c_as_at_a_terminal,
        **kwargs,  # type: ignore[call-overload]
    )


def refusal_of(target: Path) -> str:
    """What ``gradtrace view TARGET`` says refusing it: exit status 2, nothing on stdout, one
    ``gradtrace: `` line on stderr (returned)."""
    r = subprocess.run(
        [sys.executable, "-m", "gradtrace", "view", str(target), "--no-browser"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("gradtrace: "), r.stderr
    return r.stderr


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    out = tmp_path / "my trace.json"
    r = subprocess.run(
        [sys.executable, "-m", "gradtrace", "trace", str(spec), "-o", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return out


def test_view_serves_the_trace_at_the_printed_url_until_ctrl_c(trace_file: Path, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "GRADTRACE_WORKERS": "1",
        "GRADTRACE_DB": str(tmp_path / "permalinks.db"),
        "DISPLAY": ":99",  # a display: only --no-browser keeps the browser shut
    }
    proc = gradtrace("view", str(trace_file), "--no-browser", env=env)
    try:
        head = printed_until(proc, "Ctrl-C")
        found = re.search(r"http://127\.0\.0\.1:\d+/\?opened=\S+", head)
        assert found, head + (proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        url = found.group(0)
        assert url.endswith("?opened=my%20trace.json") and "open this URL in a browser" in head
        base = url.split("/?", 1)[0]
        with urllib.request.urlopen(url, timeout=30) as page:
            html = page.read().decode()
        assert 'id="open-trace"' in html and "/js/main.js" in html  # the viewer itself
        with urllib.request.urlopen(base + "/api/v1/opened-trace", timeout=30) as served:
            assert served.headers["Content-Type"] == "application/json"
            body = served.read()
        assert body == trace_file.read_bytes()
        trace = json.loads(body)
        assert trace["title"] == "view me" and trace["grads"]["x"]["values"] == [2.0, 6.0]
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err  # 128 + SIGINT, as the shell reports an interrupted command
        assert "Traceback" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def test_view_stops_by_itself_when_idle(trace_file: Path, tmp_path: Path) -> None:
    env = {**os.environ, "GRADTRACE_WORKERS": "1", "GRADTRACE_DB": str(tmp_path / "p.db")}
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)  # headless: the URL is printed, no browser is tried
    proc = gradtrace("view", str(trace_file), "--idle-timeout", "2", env=env)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert "open this URL in a browser" in out and "no request for 2 s: stopping" in err


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (json.dumps(SPEC), "a model spec, it has no schema_version (trace it first"),
        (json.dumps({"schema_version": 99}), "a trace of schema_version 99; this gradtrace reads 3"),
        (
            json.dumps({"schema_version": 3, "title": "half"}),
            "not a valid trace: Object missing required field",
        ),
        ("[1, 2", "not JSON"),
    ],
)
def test_view_refuses_what_is_not_a_trace(tmp_path: Path, content: str, fragment: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    refused = refusal_of(bad)
    assert fragment in refused, refused


def test_view_refuses_a_directory_that_holds_no_run(tmp_path: Path) -> None:
    refused = refusal_of(tmp_path)
    assert "no run at" in refused and "gradtrace.watch" in refused, refused
