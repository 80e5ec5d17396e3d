"""The jail's template process: imported torch and gradtrace once, forks one process per run.

Started by ``service/jail_pool.py`` under bubblewrap (its own namespaces, a read-only view of
only Python, torch and gradtrace, no environment), it never runs a program itself. It speaks
one JSON line at a time on stdin/stdout with the API process::

    <- {"ready": true, "pid": ...}
    -> {"source": "...", "limits": {...}, "watch": {...}, "deadline_s": 20, "output_bytes": 65536, "result_bytes": ...}
    <- {"exit": "ok" | "timeout" | "cpu" | "file_size" | "crashed" | "confine_failed", ...}

For each run it forks a supervisor, which makes the run's own namespaces (``jail_confine``) and
forks the run: PID 1 of its PID namespace, so when it ends, or its supervisor is killed at the
deadline, the kernel kills every process it started. The run's stdout and stderr are pipes
read here (each kept up to a bound, the rest read and dropped: a program printing gigabytes
is cut, not stalled), its result document a third pipe (bounded too).
"""

from __future__ import annotations

import json
import os
import resource
import select
import selectors
import signal
import sys
import time
import traceback
from typing import Any

# Exit codes of the run (and its supervisor, which passes the run's on).
_EXIT_OK = 0
_EXIT_CONFINE_FAILED = 71
_EXIT_INTERNAL = 72
_SIGNAL_BASE = 128  # the supervisor exits 128 + n when the run was killed by signal n


def _supervise(request: dict[str, Any], out_w: int, err_w: int, res_w: int) -> int:
    """The supervisor (forked from the template): namespaces, then the run, then its status."""
    from gradtrace.service import jail_confine

    try:
        jail_confine.enter_run_namespaces()
    except (jail_confine.ConfineError, OSError) as exc:
        os.write(2, f"jail: {exc}\n".encode())
        return _EXIT_CONFINE_FAILED
    pid = os.fork()
    if pid == 0:
        code = _EXIT_INTERNAL
        try:
            code = _run(request, out_w, err_w, res_w)
        except BaseException:
            traceback.print_exc()  # a failure of gradtrace's own, to the run's stderr
        finally:
            os._exit(code)
    for fd in (out_w, err_w, res_w):
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return _SIGNAL_BASE + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _run(request: dict[str, Any], out_w: int, err_w: int, res_w: int) -> int:
    """The run: confined before the program's first line, then the program."""
    from gradtrace.service import jail_confine, jail_program

    limits = jail_confine.RunLimits(**request["limits"])
    try:
        jail_confine.die_with_parent()
        os.setsid()  # its own session and process group: kill(0, ...) reaches nothing outside the run
        jail_confine.set_rlimits(limits)  # measures the process in /proc: before /proc is hidden
        jail_confine.mount_run_filesystems(request["tmp_mb"])
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for fd in (null, out_w, err_w):
            os.close(fd)
        os.closerange(3, res_w)
        os.closerange(res_w + 1, 1 << 16)
        os.environ.clear()
        os.chdir("/tmp")
        jail_confine.drop_capabilities()
        jail_confine.load_seccomp()
    except (jail_confine.ConfineError, OSError) as exc:
        os.write(2, f"jail: {exc}\n".encode())
        return _EXIT_CONFINE_FAILED
    result = jail_program.run_program(request["source"], request["watch"])
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # the program closed or replaced them: what it printed is its business
        pass
    data = json.dumps(result, allow_nan=False, separators=(",", ":")).encode()
    with os.fdopen(res_w, "wb") as out:
        out.write(data)
    return _EXIT_OK


class _Reader:
    """One pipe of the run, kept up to ``limit`` bytes; what comes after is read and dropped."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd, self.limit = fd, limit
        self.chunks: list[bytes] = []
        self.kept = 0
        self.cut = False

    def read(self) -> bool:
        """Read what is there; False at end of file."""
        data = os.read(self.fd, 1 << 16)
        if not data:
            return False
        room = self.limit - self.kept
        if len(data) > room:
            self.cut = True
            data = data[: max(room, 0)]
        if data:
            self.chunks.append(data)
            self.kept += len(data)
        return True

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", "replace")


def run_one(request: dict[str, Any]) -> dict[str, Any]:
    """Fork the supervisor, read the run's pipes until it ends or its deadline, kill it then."""
    pipes = [os.pipe() for _ in range(3)]
    (out_r, out_w), (err_r, err_w), (res_r, res_w) = pipes
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        code = _EXIT_INTERNAL
        try:
            for fd in (out_r, err_r, res_r):
                os.close(fd)
            code = _supervise(request, out_w, err_w, res_w)
        finally:
            os._exit(code)
    for fd in (out_w, err_w, res_w):
        os.close(fd)
    readers = [
        _Reader(out_r, request["output_bytes"]),
        _Reader(err_r, request["output_bytes"]),
        _Reader(res_r, request["result_bytes"]),
    ]
    deadline = started + request["deadline_s"]
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for reader in readers:
            selector.register(reader.fd, selectors.EVENT_READ, reader)
        while selector.get_map():
            wait = deadline - time.monotonic()
            if wait <= 0 and not timed_out:
                timed_out = True
                _kill(pid)  # the run dies with its supervisor, and all it started with the run
                deadline = time.monotonic() + 2.0  # what is still buffered, then give up
                continue
            if wait <= 0:
                break
            for key, _ in selector.select(wait):
                if not key.data.read():
                    selector.unregister(key.fd)
    for reader in readers:
        os.close(reader.fd)
    status, usage = _wait(pid, 0.0 if timed_out else 2.0)
    seconds = time.monotonic() - started
    max_rss_kb = usage.ru_maxrss
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else _SIGNAL_BASE + os.WTERMSIG(status)
    out, err, res = readers
    answer: dict[str, Any] = {
        "exit": _verdict(code, timed_out),
        "code": code,
        "seconds": seconds,
        "max_rss_mb": max_rss_kb / 1024,
        "stdout": out.text(),
        "stdout_truncated": out.cut,
        "stderr": err.text(),
        "stderr_truncated": err.cut,
        "result": None,
        "result_truncated": res.cut,
    }
    if not res.cut and res.chunks:
        answer["result"] = b"".join(res.chunks).decode("utf-8", "replace")
    return answer


def _verdict(code: int, timed_out: bool) -> str:
    if timed_out:
        return "timeout"
    if code == _EXIT_OK:
        return "ok"
    if code == _EXIT_CONFINE_FAILED:
        return "confine_failed"
    if code == _SIGNAL_BASE + signal.SIGXCPU:
        return "cpu"
    if code == _SIGNAL_BASE + signal.SIGXFSZ:
        return "file_size"
    return "crashed"


def _wait(pid: int, grace_s: float) -> tuple[int, resource.struct_rusage]:
    """The supervisor's exit status and usage (its run's included), killed after ``grace_s``."""
    with os.fdopen(os.pidfd_open(pid), "rb") as exited:
        if not select.select([exited], [], [], grace_s)[0]:
            _kill(pid)
    _, status, usage = os.wait4(pid, 0)
    return status, usage


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _warm_up() -> None:
    """Import what a run uses (torch, the recorder, libseccomp's binding) and run one trace, so
    that every forked run starts warm."""
    import pyseccomp  # noqa: F401 - loaded here, used by each run's filter

    from gradtrace.service import jail_confine, jail_program, worker_tasks  # noqa: F401

    worker_tasks.init_worker(0, 0)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # nothing but the protocol goes to the API's pipe
    _warm_up()
    protocol.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        protocol.write(json.dumps(run_one(request)) + "\n")


if __name__ == "__main__":
    main()
