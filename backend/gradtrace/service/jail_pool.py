"""The jail's templates, seen from the API process: started under bubblewrap, one run at a time.

Each template (``service/jail_template.py``) is a ``bwrap`` process with every namespace of
its own (``--unshare-all``: user, PID, network with only its loopback, mount, IPC, UTS,
cgroup), an empty environment, a read-only view of only the Python installation, its
packages and gradtrace, a read-only ``/dev`` of the harmless devices, and nothing else of the
host: no home, no ``/etc`` beyond the linker's cache, no database, no settings. When the API
process runs as root it starts bubblewrap as ``nobody`` where that user can read the
installation, so even the jail's outer user owns nothing (``_as_nobody``). A template forks one confined
process per run (``jail_confine``): runs start warm, in milliseconds.

Where the jail cannot be made (no bubblewrap, no user namespaces), ``start`` logs why and
every run is refused with 503 ``runner_unavailable``: programs never run unconfined.
A template that does not answer by the run's deadline plus a margin is killed (bubblewrap
then kills its whole PID namespace) and replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import stat
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

import gradtrace
from gradtrace.problem import Problem
from gradtrace.runs.view_data import view_from
from gradtrace.service.runner import Answer, WorkerUnavailable
from gradtrace.service.settings import Settings

log = logging.getLogger(__name__)

_START_TIMEOUT_S = 90.0
_ANSWER_MARGIN_S = 10.0  # beyond the run's deadline, for the template to report it
_NOBODY = 65534
_JAIL_UID = 1000
# One answer line: the trace (bounded by result_bytes) and the two outputs, JSON-escaped.
_LINE_LIMIT_FACTOR = 8


def _covered(path: Path, binds: list[Path]) -> bool:
    return any(path == b or b in path.parents for b in binds)


def view_paths() -> list[Path]:
    """What the template needs to see: the Python installation, its packages, gradtrace."""
    wanted = [Path(sys.base_prefix), Path(sys.prefix), Path(gradtrace.__file__).parent]
    wanted += [Path(p) for p in sys.path if p and Path(p).is_dir() and "site-packages" in p]
    binds: list[Path] = [Path("/usr")]
    for path in sorted({p.absolute() for p in wanted}, key=lambda p: len(p.parts)):
        if not _covered(path, binds):
            binds.append(path)
    return binds[1:]


def _readable_by_others(path: Path) -> bool:
    """Whether a user who owns nothing (``nobody``) can reach and read ``path``."""
    real = path.resolve()
    for part in [real, *real.parents]:
        mode = part.stat().st_mode
        if not mode & stat.S_IXOTH or (part == real and not mode & stat.S_IROTH):
            return False
    return True


def _as_nobody() -> bool:
    """Root starts bubblewrap as ``nobody`` where that user can read the installation (the
    jail then owns nothing outside); otherwise as itself (its runs still start no process:
    the seccomp filter refuses fork)."""
    if os.geteuid() != 0:
        return False
    try:
        return all(_readable_by_others(p) for p in [Path(sys.executable), *view_paths()])
    except OSError:
        return False


def bwrap_argv(bwrap: str) -> list[str]:
    argv = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--uid", str(_JAIL_UID),
        "--gid", str(_JAIL_UID),
        "--hostname", "gradtrace-run",
        "--ro-bind", "/usr", "/usr",
    ]  # fmt: skip
    for name in ("bin", "lib", "lib64", "sbin"):
        link = Path("/") / name
        if link.is_symlink():
            argv += ["--symlink", os.readlink(link), str(link)]
        elif link.is_dir():
            argv += ["--ro-bind", str(link), str(link)]
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    # the template's own /tmp (torch writes there), first: a view path under /tmp (a checkout
    # made by mktemp -d) is bound on top of it, and each run binds it again on its own /tmp
    argv += ["--size", str(16 * 1024 * 1024), "--tmpfs", "/tmp"]
    for path in view_paths():
        argv += ["--ro-bind", str(path.resolve()), str(path)]
    argv += [
        "--proc", "/proc",
        "--dev", "/dev",
        "--remount-ro", "/dev",
        "--remount-ro", "/",
        "--chdir", "/tmp",
    ]  # fmt: skip
    package_parent = str(Path(gradtrace.__file__).parent.parent)
    boot = (
        f"import sys; sys.path.insert(0, {package_parent!r}); "
        "from gradtrace.service.jail_template import main; main()"
    )
    return [*argv, sys.executable, "-I", "-c", boot]


@dataclass
class RunAnswer:
    """What the template reported for one run (``jail_template.run_one``)."""

    exit: str
    doc: dict[str, Any]


class _Template:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.runs = 0
        self.hung = False  # it did not answer by the deadline (else, when lost, it died)

    def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()


class JailPool:
    """``start`` the templates, then ``run`` programs; ``available`` says whether it can."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._idle: deque[_Template] = deque()
        self._waiters: deque[asyncio.Future[_Template]] = deque()
        self._templates: set[_Template] = set()
        self._replacing: set[asyncio.Task[None]] = set()  # templates being started after a loss
        self._in_flight = 0
        self._closing = False
        self._bwrap = shutil.which("bwrap")
        self.reason = "the runner has not started"
        self.available = False
        self.start_seconds: float | None = None
        # set once ``start`` has ended, ready or not: a program posted while the first template
        # starts (the server answers seconds before its runner can) waits for it (see run)
        self._start_ended: asyncio.Event | None = None

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> bool:
        ended = self._start_ended = asyncio.Event()
        try:
            return await self._start()
        finally:
            ended.set()

    async def _start(self) -> bool:
        if self._settings.runner_workers <= 0:
            self.reason = "the runner is off on this server (GRADTRACE_RUNNER_WORKERS=0)"
            log.info("runner off: POST /run answers 503 runner_unavailable")
            return False
        if self._bwrap is None:
            return self._unavailable("bubblewrap (bwrap) is not installed")
        try:
            first = await self._start_template()
        except (OSError, RuntimeError, TimeoutError) as exc:
            return self._unavailable(str(exc))
        probe = await self._exchange(first, _probe_request(self._settings), 30.0)
        if probe is None or probe.exit != "ok":
            first.kill()
            await first.process.wait()
            said = (
                f"{probe.exit} {probe.doc.get('code')}: {probe.doc.get('stderr', '').strip()}"
                if probe
                else "no answer"
            )
            return self._unavailable(f"a confined run could not be made ({said})")
        self._add(first)
        self.available = True
        self.reason = ""
        log.info("runner ready: %d template(s) under bubblewrap", self._settings.runner_workers)
        await asyncio.gather(*(self._replace() for _ in range(self._settings.runner_workers - 1)))
        return True

    def _unavailable(self, reason: str) -> bool:
        self.reason = reason
        log.error("runner unavailable, programs will be refused (503 runner_unavailable): %s", reason)
        return False

    async def close(self) -> None:
        self._closing = True
        for waiter in self._waiters:
            waiter.cancel()
        for task in list(self._replacing):
            task.cancel()
        await asyncio.gather(*self._replacing, return_exceptions=True)
        for template in list(self._templates):
            self._templates.discard(template)
            template.kill()
            await template.process.wait()
            # (its stdin pipe closed too: else the process's transport is only closed when
            # collected, after the event loop has closed, and prints a traceback at Ctrl-C)
            if template.process.stdin is not None:
                template.process.stdin.close()
                await template.process.stdin.wait_closed()

    async def _start_template(self) -> _Template:
        assert self._bwrap is not None
        as_nobody = _as_nobody()
        ids: dict[str, Any] = {"user": _NOBODY, "group": _NOBODY, "extra_groups": []} if as_nobody else {}
        started = time.monotonic()
        limit = self._settings.run_result_bytes * _LINE_LIMIT_FACTOR
        process = await asyncio.create_subprocess_exec(
            *bwrap_argv(self._bwrap),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=limit,
            env={},
            **ids,
        )
        template = _Template(process)
        try:
            assert process.stdout is not None
            async with asyncio.timeout(_START_TIMEOUT_S):
                line = await process.stdout.readline()
            if not line or not json.loads(line).get("ready"):
                raise RuntimeError("the jail's template exited before it was ready")
        except BaseException:
            template.kill()
            await process.wait()
            raise
        self.start_seconds = time.monotonic() - started
        log.info(
            "runner template %s ready in %.2f s (as %s)",
            process.pid,
            self.start_seconds,
            "nobody" if as_nobody else f"uid {os.geteuid()}",
        )
        return template

    def _add(self, template: _Template) -> None:
        self._templates.add(template)
        self._give(template)

    async def _replace(self) -> None:
        while not self._closing:
            try:
                template = await self._start_template()
            except (OSError, RuntimeError, TimeoutError) as exc:
                log.error("a runner template failed to start (%s): retrying", exc)
                await asyncio.sleep(1.0)
                continue
            if self._closing:
                template.kill()
                return
            self._add(template)
            return

    # -- handing templates out ---------------------------------------------------------------
    def _give(self, template: _Template) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(template)
                return
        self._idle.append(template)

    async def _acquire(self, timeout_s: float) -> _Template:
        if self._idle:
            return self._idle.popleft()
        waiter: asyncio.Future[_Template] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout_s):
                return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._give(waiter.result())
            else:
                waiter.cancel()
            raise

    async def _exchange(
        self, template: _Template, request: dict[str, Any], timeout_s: float
    ) -> RunAnswer | None:
        """One request to a template and its answer; None when it did not answer in time or died."""
        process = template.process
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps(request).encode() + b"\n")
            await process.stdin.drain()
            async with asyncio.timeout(timeout_s):
                line = await process.stdout.readline()
            doc = json.loads(line)
        except TimeoutError:
            template.hung = True
            log.warning("runner template %s did not answer in %g s: replacing it", process.pid, timeout_s)
            return None
        except (OSError, ValueError, asyncio.LimitOverrunError) as exc:
            log.warning("runner template %s lost (%s): replacing it", process.pid, type(exc).__name__)
            return None
        return RunAnswer(doc.get("exit", "crashed"), doc)

    # -- the public operation ---------------------------------------------------------------
    def _refusal(self) -> WorkerUnavailable:
        """Why no program can run here (the runner is off, or could not start)."""
        return WorkerUnavailable(
            "runner_unavailable", f"this server cannot confine programs: {self.reason}", 60
        )

    async def run(self, source: str) -> RunAnswer:
        """Run one program in a fresh confined process; WorkerUnavailable when it could not run."""
        starting = self._start_ended
        if not self.available and (starting is None or starting.is_set()):
            raise self._refusal()
        settings = self._settings
        if self._in_flight >= settings.runner_workers + settings.queue_limit:
            raise WorkerUnavailable("overloaded", "every runner is busy and the queue is full; retry shortly")
        self._in_flight += 1
        try:
            if not self.available and starting is not None:
                # the runner is starting: the program waits for it as for a busy runner, one of
                # the queue (a flood in the first seconds is bounded as any other)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(settings.queue_timeout_s):
                        await starting.wait()
                if not self.available:
                    raise self._refusal()
            try:
                template = await self._acquire(settings.queue_timeout_s)
            except TimeoutError as exc:
                raise WorkerUnavailable(
                    "overloaded",
                    f"no runner became free within {settings.queue_timeout_s:g} s; retry shortly",
                ) from exc
            answer = await self._exchange(
                template, _run_request(settings, source), settings.run_timeout_s + _ANSWER_MARGIN_S
            )
            if answer is None:
                self._templates.discard(template)
                template.kill()
                await template.process.wait()
                if not self._closing:
                    task = asyncio.ensure_future(self._replace())
                    self._replacing.add(task)
                    task.add_done_callback(self._replacing.discard)
                if template.hung:
                    raise WorkerUnavailable(
                        "run_timeout", "the runner did not answer in time; it is being replaced"
                    )
                raise WorkerUnavailable("worker_crashed", "the runner stopped; it is being replaced")
            template.runs += 1
            self._give(template)
            return answer
        finally:
            self._in_flight -= 1


def _run_request(settings: Settings, source: str) -> dict[str, Any]:
    return {
        "source": source,
        "deadline_s": settings.run_timeout_s,
        "tmp_mb": settings.run_tmp_mb,
        "output_bytes": settings.run_output_bytes,
        "result_bytes": settings.run_result_bytes,
        "limits": {
            "cpu_s": settings.run_cpu_s,
            "memory_mb": settings.run_memory_mb,
            "processes": settings.run_processes,
            "open_files": settings.run_open_files,
            "file_mb": settings.run_file_mb,
        },
        "watch": {
            "steps": settings.run_watch_steps,
            "numbers": settings.run_watch_numbers,
            "trace_bytes": settings.run_watch_trace_bytes,
        },
    }


def _probe_request(settings: Settings) -> dict[str, Any]:
    """A run that proves the confinement is made (it answers "confine_failed" otherwise)."""
    return _run_request(settings, "print('ok')")


def _line_of(value: Any) -> int | None:
    """A line number from the jailed process's document (untrusted JSON), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _memory_problem(settings: Settings, line: int | None = None) -> Problem:
    """413 memory_limit, at the program's line where it ran out when Python raised it there."""
    where = f" (it ran out at line {line})" if line is not None else ""
    return Problem(
        "memory_limit",
        f"the program needed more than the {settings.run_memory_mb} MB a run may use{where}; under "
        "gradtrace.record() memory grows with every recorded step (the trace keeps what each "
        "backward's analyses read): run a few steps, a smaller model or batch, or gradtrace.watch "
        "for a long run",
        "/python" if line is not None else None,
        line,
    )


def outcome_of(answer: RunAnswer, settings: Settings) -> Answer:
    """What the template reported, as the answer to the request (or WorkerUnavailable).

    The result document comes from the jailed process and is read as untrusted JSON: only its
    known fields are kept. The program's own exception is part of a 200 answer (the program
    ran); the jail's bounds are 413 (memory, output of the recorder) or 503 (deadline).
    """
    doc = answer.doc
    seconds = float(doc.get("seconds") or 0.0)
    if answer.exit in ("timeout", "cpu"):
        what = "wall-clock" if answer.exit == "timeout" else "CPU"
        raise WorkerUnavailable(
            "run_timeout",
            f"the program ran past its {settings.run_timeout_s:g} s {what} deadline and was stopped",
        )
    if answer.exit == "confine_failed":
        raise WorkerUnavailable("runner_unavailable", "the run could not be confined; it was not started", 60)
    if answer.exit == "file_size":
        return Answer(
            Problem(
                "too_large",
                f"the program wrote a file larger than a run may ({settings.run_file_mb} MB; a gradtrace.watch "
                "run grows with its logged steps and full traces: log fewer steps with every=N, or pass "
                "full_traces=False)",
            ),
            seconds,
        )
    if doc.get("result_truncated"):
        return Answer(Problem("too_large", "the recorded trace is larger than a run may answer"), seconds)
    try:
        result = json.loads(doc["result"]) if doc.get("result") else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        if answer.exit == "crashed" and doc.get("code") in _MEMORY_SIGNALS:
            return Answer(_memory_problem(settings), seconds)
        return Answer(
            Problem("run_failed", "the program ended without a result (it exited or crashed outside Python)"),
            seconds,
        )
    if result.get("memory_error"):
        return Answer(_memory_problem(settings, _line_of(result.get("memory_line"))), seconds)
    problem = result.get("problem")
    if isinstance(problem, dict):
        line = _line_of(problem.get("line"))
        path = "/python" if line is not None else None
        return Answer(Problem(str(problem.get("code")), str(problem.get("message")), path, line), seconds)
    body = {
        "trace": result.get("trace"),
        "watch": _watch_of(result.get("watch")),
        "stdout": str(doc.get("stdout", "")),
        "stdout_truncated": bool(doc.get("stdout_truncated")),
        "stderr": str(doc.get("stderr", "")),
        "stderr_truncated": bool(doc.get("stderr_truncated")),
        "exception": _exception_of(result.get("exception")),
        "seconds": round(seconds, 3),
    }
    return Answer(json.dumps(body, allow_nan=False, separators=(",", ":")).encode(), seconds)


# A run killed by SIGSEGV or SIGABRT with its memory bound reached (an allocation in C++).
_MEMORY_SIGNALS = (128 + 6, 128 + 11)


def _watch_of(value: Any) -> Any:
    """The run view document a watched program's jail sent, checked field by field (a
    document that does not hold together is dropped, and logged: the jail wrote it)."""
    if value is None:
        return None
    try:
        return msgspec.to_builtins(view_from(value))
    except ValueError as exc:
        log.warning("a run's watch document was dropped: %s", exc)
        return None


def _exception_of(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        return None
    line = value.get("line")
    return {
        "type": str(value.get("type", ""))[:200],
        "message": str(value.get("message", ""))[:2000],
        "line": line if isinstance(line, int) else None,
    }
