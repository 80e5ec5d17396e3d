"""``gradtrace serve`` stopped with Ctrl-C as at a terminal: the whole process group gets SIGINT
(the API process, its CPU lane's helpers, the workers' forkserver and workers), and the server
stops cleanly, without a traceback from any of them: once ready, and while still starting (the
forkserver importing torch, the helpers importing the API)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from server_process import REPO, ctrl_c_as_at_a_terminal, free_port, process_group, ready


@pytest.mark.parametrize("when", ["starting", "ready"])
def test_serve_stops_at_ctrl_c_without_tracebacks(tmp_path: Path, when: str) -> None:
    port = free_port()
    env = {
        **os.environ,
        "GRADTRACE_WORKERS": "1",
        "GRADTRACE_RUNNER_WORKERS": "0",
        "GRADTRACE_DB": str(tmp_path / "permalinks.db"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradtrace", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # a terminal's foreground job: a process group of its own, SIGINT at its default
        start_new_session=True,
        preexec_fn=ctrl_c_as_at_a_terminal,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        if when == "starting":  # the helpers and the forkserver started, still importing
            while len(process_group(proc.pid)) < 4:
                assert proc.poll() is None and time.monotonic() < deadline, "no process started"
                time.sleep(0.05)
            time.sleep(0.5)
        else:
            while not ready(url):  # the workers and the CPU lane's helpers all started
                assert proc.poll() is None and time.monotonic() < deadline, "the server never became ready"
                time.sleep(0.2)
            assert len(process_group(proc.pid)) >= 4  # the API, its helpers, the forkserver, a worker
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C at a terminal sends: to the whole group
        out, _ = proc.communicate(timeout=60)
        assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
        assert "Application shutdown complete" in out, out
        assert proc.returncode == 130, out  # 128 + SIGINT, as `gradtrace view` and a shell report it
        deadline = time.monotonic() + 10
        while process_group(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert process_group(proc.pid) == []  # nothing of the server left running
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
