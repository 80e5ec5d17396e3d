"""The jail's attack suite: hostile programs posted to ``POST /api/v1/run`` of a real server.

Each program tries one way out (the environment, the server's files, sockets on loopback, a
fork bomb, a memory bomb, a full disk, an infinite loop, sleeping forever, printing
gigabytes, system calls through ctypes, other processes' ``/proc``, symlinks, threads) and
must be contained: no secret in anything it answers, no connection made, stopped by its
deadline, no process left behind; meanwhile another client's traces are still served
(>= 99%). Short run deadline (3 s) in ``make test``; ``make reliability`` repeats the suite.
Figures to ``var/reliability/jail.json``; RELIABILITY.md ("The runner") sums them up.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psutil
import pytest
from reliability_helpers import FULL, RESULTS_DIR, Load, light_spec, summary
from server_process import ServerProcess, runner_server

from gradtrace.service.jail_pool import JailPool, RunAnswer
from gradtrace.service.runner import WorkerUnavailable
from gradtrace.service.settings import Settings

pytestmark = pytest.mark.slow

SECRET = "gradtrace-secret-7f3a9c"  # in the server's environment and in a file beside its database
RUN_TIMEOUT_S = 3.0
ROUNDS = 5 if FULL else 1


@pytest.fixture(scope="module")
def jail_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("jail")
    (workdir / "settings.env").write_text(f"SECRET={SECRET}\n")
    env = {
        "GRADTRACE_RUN_TIMEOUT": str(RUN_TIMEOUT_S),
        "GRADTRACE_RUN_CPU_SECONDS": str(int(RUN_TIMEOUT_S)),
        "GRADTRACE_SECRET_PROBE": SECRET,
    }
    with runner_server(workdir, env) as proc:
        yield proc


def _paths(server: ServerProcess) -> dict[str, str]:
    workdir = server.log_path.parent
    return {
        "db": str(workdir / "gradtrace.db"),
        "settings": str(workdir / "settings.env"),
        "work": str(workdir),
    }


def hostile_programs(server: ServerProcess) -> dict[str, str]:
    p = _paths(server)
    port = server.port
    return {
        "environment": "import os\nprint(dict(os.environ))\nprint(open('/proc/self/environ').read())\n",
        "server_files": (
            "import os\n"
            f"for path in [{p['db']!r}, {p['settings']!r}, '/etc/passwd', '/etc/shadow', '/root/.bashrc',\n"
            f"             {p['work']!r}, '/proc/1/environ', '/proc/1/cmdline', '/work', '/home']:\n"
            "    try:\n"
            "        print(path, open(path, 'rb').read()[:200] if not os.path.isdir(path) else os.listdir(path))\n"
            "    except OSError as e:\n"
            "        print(path, 'refused', type(e).__name__)\n"
        ),
        "sockets": (
            "import socket\n"
            f"for port in [{port}, 6379, 5432, 80]:\n"
            "    for family in (socket.AF_INET, socket.AF_INET6):\n"
            "        try:\n"
            "            s = socket.socket(family, socket.SOCK_STREAM)\n"
            "            s.settimeout(1)\n"
            "            s.connect(('127.0.0.1' if family == socket.AF_INET else '::1', port))\n"
            "            print('CONNECTED', port)\n"
            "        except OSError as e:\n"
            "            print(port, 'refused', type(e).__name__)\n"
            "for path in ['/var/run/postgresql/.s.PGSQL.5432', '/run/redis/redis-server.sock', '/tmp/.s.PGSQL.5432']:\n"
            "    try:\n"
            "        s = socket.socket(socket.AF_UNIX)\n"
            "        s.connect(path)\n"
            "        print('CONNECTED', path)\n"
            "    except OSError as e:\n"
            "        print(path, 'refused', type(e).__name__)\n"
        ),
        "fork_bomb": "import os\nwhile True:\n    os.fork()\n",
        "memory_bomb": "x = bytearray(64 * 1024 ** 3)\n",
        "memory_bomb_torch": "import torch\nxs = []\nwhile True:\n    xs.append(torch.ones(256, 1024, 1024))\n",
        "fill_disk": (
            "n = 0\nwhile True:\n    with open(f'/tmp/f{n}', 'wb') as f:\n        f.write(b'x' * 1024 * 1024)\n    n += 1\n"
        ),
        "big_file": "with open('/tmp/big', 'wb') as f:\n    while True:\n        f.write(b'x' * 1024 * 1024)\n",
        "write_outside": "for p in ['/usr/x', '/x', '/dev/x', '/proc/x']:\n    try:\n        open(p, 'w')\n    except OSError as e:\n        print(p, type(e).__name__)\n",
        "infinite_loop": "while True:\n    pass\n",
        "sleep_forever": "import time\ntime.sleep(10 ** 6)\n",
        "print_without_end": "import sys\nline = 'x' * (1 << 20)\nwhile True:\n    sys.stdout.write(line)\n",
        "print_256_mib": "import sys\nline = 'x' * (1 << 20)\nfor _ in range(256):\n    sys.stdout.write(line)\n",
        "ctypes_syscalls": (
            "import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "print('mount', libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno())\n"
            "print('unshare', libc.unshare(0x10000000), ctypes.get_errno())\n"
            "print('ptrace', libc.ptrace(16, 1, 0, 0), ctypes.get_errno())\n"
            "print('setns', libc.setns(0, 0), ctypes.get_errno())\n"
            "print('bpf', libc.syscall(321, 0, 0, 0), ctypes.get_errno())\n"
            "print('ppid', os.getppid())\n"
            "os.kill(-1, 9)\n"
        ),
        "kill_parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
        "other_processes": "import os\nprint(os.listdir('/proc'))\nfor pid in range(1, 50):\n    try:\n        print(open(f'/proc/{pid}/cmdline').read())\n    except OSError:\n        pass\n",
        "symlink_escape": (
            "import os\n"
            f"os.symlink({p['db']!r}, '/tmp/db')\n"
            "os.symlink('/proc/1/root', '/tmp/root')\n"
            "for path in ['/tmp/db', '/tmp/root/etc/passwd']:\n"
            "    try:\n"
            "        print(open(path, 'rb').read()[:100])\n"
            "    except OSError as e:\n"
            "        print(path, type(e).__name__)\n"
        ),
        "threads": "import threading, time\nts = []\nwhile True:\n    t = threading.Thread(target=time.sleep, args=(100,))\n    t.start()\n    ts.append(t)\n",
    }


def _is_template(p: psutil.Process) -> bool:
    try:
        return p.name() != "bwrap" and "jail_template" in " ".join(p.cmdline())
    except psutil.NoSuchProcess:  # a worker or a run ending meanwhile
        return False


def templates(server: ServerProcess) -> list[psutil.Process]:
    return [p for p in psutil.Process(server.proc.pid).children(recursive=True) if _is_template(p)]


def left_behind(server: ServerProcess, timeout: float = 3.0) -> int:
    """Processes the runs left under the templates (each template waits for none when idle)."""
    deadline = time.monotonic() + timeout
    while True:
        count = 0
        for template in templates(server):
            try:
                count += len(template.children(recursive=True))
            except psutil.NoSuchProcess:
                pass
        if count == 0 or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


def post_run(server: ServerProcess, source: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    r = httpx.post(server.url + "/api/v1/run", json={"python": source}, timeout=60)
    return r, time.monotonic() - started


def contained(name: str, r: httpx.Response) -> dict[str, Any]:
    """The answer is the program's failure or a bound's status, never a secret or a connection."""
    assert SECRET not in r.text, name
    assert "CONNECTED" not in r.text, name
    assert r.status_code in (200, 413, 503), (name, r.status_code, r.text[:300])
    doc = r.json()
    if r.status_code != 200:
        assert doc["error"]["code"] in {"run_timeout", "memory_limit", "too_large", "too_costly"}, (name, doc)
        return {"status": r.status_code, "code": doc["error"]["code"]}
    exception = doc["exception"]
    return {
        "status": 200,
        "exception": exception and exception["type"],
        "stdout_truncated": doc["stdout_truncated"],
    }


def test_hostile_programs_are_contained(jail_server: ServerProcess) -> None:
    server = jail_server
    programs = hostile_programs(server)
    others = Load(server.url, clients=1, spec_of=light_spec, path="/api/v1/trace").start()
    figures: dict[str, Any] = {}
    try:
        for round_ in range(ROUNDS):
            for name, source in programs.items():
                source = f"# round {round_}\n{source}"  # a new source each round: not the cache's answer
                r, seconds = post_run(server, source)
                seen = contained(name, r)
                left = left_behind(server)
                assert left == 0, (name, left)
                held = sum(t.memory_info().rss for t in templates(server)) / 2**20  # idle: no run
                figures.setdefault(name, []).append(
                    {**seen, "seconds": round(seconds, 2), "left": left, "templates_rss_mb": round(held, 1)}
                )
    finally:
        served = summary(others.stop())
    after, _ = post_run(
        server,
        "import torch\nw = torch.ones(2, requires_grad=True)\n(w * 3).sum().backward()\nprint(w.grad)\n",
    )
    assert after.status_code == 200 and "tensor([3., 3.])" in after.json()["stdout"], after.text[:300]
    _check_figures(figures, served)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "jail.json").write_text(json.dumps({"runs": figures, "others": served}, indent=1))


def _check_figures(figures: dict[str, Any], served: dict[str, Any]) -> None:
    for name in ("infinite_loop", "sleep_forever", "print_without_end"):
        for seen in figures[name]:
            assert seen["status"] == 503 and seen["code"] in ("run_timeout", "too_costly"), (name, seen)
            assert seen["seconds"] < RUN_TIMEOUT_S + 3, (name, seen)  # killed at its deadline
    for seen in figures["memory_bomb"]:
        assert seen.get("code") == "memory_limit", seen
    for seen in figures["print_256_mib"]:
        assert seen["status"] == 200 and seen["stdout_truncated"], seen
    assert served["requests"] > 0
    assert served["ok"] >= 0.99 * served["requests"], served


def test_nothing_secret_in_the_outputs(jail_server: ServerProcess) -> None:
    """The reads themselves: each path is refused or absent, the environment empty."""
    programs = hostile_programs(jail_server)
    r, _ = post_run(jail_server, programs["environment"])
    assert r.json()["stdout"].startswith("{}\n"), r.text[:300]
    r, _ = post_run(jail_server, programs["server_files"])
    out = r.json()["stdout"]
    for path in _paths(jail_server).values():
        assert f"{path} refused" in out, out
    r, _ = post_run(jail_server, programs["ctypes_syscalls"])
    out = r.json()["stdout"]
    for call in ("mount", "unshare", "ptrace", "setns", "bpf"):
        assert f"{call} -1 1\n" in out, out  # EPERM
    r, _ = post_run(jail_server, programs["other_processes"])
    assert r.json()["stdout"].startswith("[]\n"), r.text[:300]


def test_sources_are_permalinks(jail_server: ServerProcess) -> None:
    source = "print('kept')\n"
    r, _ = post_run(jail_server, source)
    run_id = r.json()["id"]
    stored = httpx.get(f"{jail_server.url}/api/v1/runs/{run_id}", timeout=10)
    assert stored.json() == {"python": source}


def test_a_syntax_error_names_its_line(jail_server: ServerProcess) -> None:
    r, _ = post_run(jail_server, "x = 1\ndef f(:\n")
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "python_syntax" and r.json()["error"]["line"] == 2


def test_a_program_past_its_deadline_is_refused_at_once_next_time(jail_server: ServerProcess) -> None:
    source = "# remembered by its hash\nwhile True:\n    pass\n"
    first, _ = post_run(jail_server, source)
    assert first.status_code == 503 and first.json()["error"]["code"] == "run_timeout"
    again, seconds = post_run(jail_server, source)
    assert again.status_code == 413 and again.json()["error"]["code"] == "too_costly", again.text
    assert again.json()["error"]["path"] == "/python"
    assert seconds < 1.0  # refused without running


def test_a_template_killed_from_outside_is_replaced(jail_server: ServerProcess) -> None:
    """The template runs no program, but if it dies anyway (the OOM killer, an operator) the
    request that meets it is a 503 and a new template takes over."""
    for template in templates(jail_server):
        template.kill()
    lost, _ = post_run(jail_server, "print('after the kill')\n")
    assert lost.status_code == 503 and lost.json()["error"]["code"] == "worker_crashed", lost.text
    deadline = time.monotonic() + 120
    while True:
        r, _ = post_run(jail_server, "print('after the kill')\n")
        if r.status_code == 200:
            break
        assert r.status_code == 503 and time.monotonic() < deadline, r.text
        time.sleep(1)
    assert r.json()["stdout"] == "after the kill\n"
    assert left_behind(jail_server) == 0


def test_a_program_posted_while_the_runner_starts_waits_for_it() -> None:
    # the server answers before its jail's first template is up (2-3 s): a program posted then
    # waits for it, as for a busy runner, not a 503 saying this server cannot confine programs.
    # The pool itself, with its real templates: run() is called before start() has ended.
    source = "import torch\nw = torch.ones(3, requires_grad=True)\n(w * w).sum().backward()\nprint(w.grad)\n"

    async def first_program_at_once() -> tuple[bool, RunAnswer | Exception]:
        pool = JailPool(Settings())
        starting = asyncio.create_task(pool.start())
        await asyncio.sleep(0)  # (start() has begun: its first template is being made)
        ready_then = pool.available
        try:
            answer: RunAnswer | Exception = await pool.run(source)
        except WorkerUnavailable as exc:
            answer = exc
        assert await asyncio.wait_for(starting, 120)  # (then closed: never while it starts)
        await pool.close()
        return ready_then, answer

    ready_then, answer = asyncio.run(first_program_at_once())
    assert not ready_then
    assert isinstance(answer, RunAnswer), answer
    assert answer.exit == "ok", answer.doc
    assert answer.doc["stdout"] == "tensor([2., 2., 2.])\n"
