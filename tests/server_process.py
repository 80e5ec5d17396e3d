"""A real ``python -m gradtrace serve`` subprocess on a free loopback port, for tests and benchmarks."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def ctrl_c_as_at_a_terminal() -> None:
    """A ``preexec_fn``: SIGINT back to its default in the child, as in a program started from
    a terminal. A shell's ``&`` (``nohup make test &``) makes what it starts ignore SIGINT, and
    a child inherits that: Ctrl-C sent in a test would then reach a process ignoring it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ready(url: str) -> bool:
    """Whether the server at ``url`` answers ``/readyz`` with 200 (False: not yet, or not at all)."""
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=5) as resp:
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis_server() -> tuple[subprocess.Popen[bytes], str]:
    """A redis-server on a free loopback port, no persistence, answering PING: (process, URL)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            shutil.which("redis-server") or "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--protected-mode",
            "yes",
            "--daemonize",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return proc, f"redis://127.0.0.1:{port}/0"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("redis-server did not start")


def get_without_reading(port: int, path: str = "/") -> socket.socket:
    """A GET of ``path`` on a socket that is never read; its small receive buffer keeps the
    kernel from taking the answer off the server's hands."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock


def children_of(pid: int) -> list[int]:
    """Direct children of a process, from /proc (no psutil needed)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry))
    return out


def process_group(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group, from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.append(int(entry))
    return out


class ServerProcess:
    """One ``python -m gradtrace serve`` subprocess; ``.url`` is its base URL."""

    def __init__(self, workdir: Path, env: dict[str, str] | None = None, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"server-{self.port}.log"
        full_env = dict(os.environ)
        full_env.setdefault("GRADTRACE_DB", str(workdir / "gradtrace.db"))
        # POST /run's jail only where a test runs programs (its template imports torch once more)
        full_env.setdefault("GRADTRACE_RUNNER_WORKERS", "0")
        full_env.update(env or {})
        # Quiet servers in tests; the log file keeps everything for a failure report.
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gradtrace", "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=REPO,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() ends the workers too
        )

    def helpers(self) -> dict[str, int]:
        """pid of the worker pool's forkserver (a child of the server), by role."""
        out = {}
        for pid in children_of(self.proc.pid):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"forkserver" in cmd:
                out["forkserver"] = pid
        return out

    def worker_pids(self) -> list[int]:
        """The torch workers: children of the forkserver."""
        fs = self.helpers().get("forkserver")
        return children_of(fs) if fs else []

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log_text()}")
            if ready(self.url):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"server not ready after {timeout} s:\n{self.log_text()}")

    def wait_runner_ready(self, timeout: float = 120.0) -> None:
        """Until ``/readyz`` says POST /run's jail is ready (a server started with the runner on)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with urllib.request.urlopen(self.url + "/readyz", timeout=10) as resp:
                if json.loads(resp.read()).get("runner") == "ready":
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the runner is not ready after {timeout} s:\n{self.log_text()}")

    def stop(self) -> None:
        """SIGTERM to the API process alone (as docker does), which stops its workers and helpers
        on the way out; then whatever of its group is left (a worker stopped or hung) is killed.
        Not SIGTERM to the whole group: the workers, killed by it at once, would be replaced by
        new ones (importing torch again) while the API shuts down, seconds per server."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.wait(timeout=5)
        self._log.close()


def printed_until(proc: subprocess.Popen, marker: str, timeout_s: float = 90) -> str:
    """What a command (``gradtrace view``, ``gradtrace run``) printed on its text stdout, up to
    and including the first line holding ``marker``, or all of it if it ended or time ran out."""
    assert proc.stdout is not None
    head, deadline = "", time.monotonic() + timeout_s
    while marker not in head and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        head += line
    return head


@contextlib.contextmanager
def runner_server(workdir: Path, env: dict[str, str] | None = None) -> Iterator[ServerProcess]:
    """A server with POST /run's jail on (one template, one trace worker, no rate limit), ready
    to run programs; stopped on exit."""
    base = {"GRADTRACE_RATE_PER_MINUTE": "0", "GRADTRACE_RUNNER_WORKERS": "1", "GRADTRACE_WORKERS": "1"}
    proc = ServerProcess(workdir, env={**base, **(env or {})})
    try:
        proc.wait_ready()
        proc.wait_runner_ready()
        yield proc
    finally:
        proc.stop()


def stop_with_ctrl_c(proc: subprocess.Popen, timeout_s: float = 60) -> None:
    """SIGINT, what Ctrl-C sends; killed if it has not ended ``timeout_s`` later."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


@contextlib.contextmanager
def gradtrace_view(target: Path, workdir: Path) -> Iterator[str]:
    """``gradtrace view TARGET --no-browser`` as a user runs it (one worker, its permalinks in
    ``workdir``): the URL it prints; Ctrl-C on exit."""
    env = {**os.environ, "GRADTRACE_WORKERS": "1", "GRADTRACE_DB": str(workdir / "p.db")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradtrace", "view", str(target), "--no-browser"],
        cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        found = re.search(r"http://\S+", printed_until(proc, "http://"))
        assert found, proc.stderr.read() if proc.stderr and proc.poll() is not None else "no URL printed"
        yield found.group(0)
    finally:
        stop_with_ctrl_c(proc)
