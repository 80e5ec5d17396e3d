"""Shared fixtures: a REAL gradtrace server process on a free loopback port; the test tiers.

``live_server`` (session-scoped) runs ``python -m gradtrace serve --host 127.0.0.1 --port <free>``
with a temporary SQLite database, waits for /readyz (a torch worker answers) and yields the
base URL, e.g. ``http://127.0.0.1:41234``. ``server_factory`` starts extra servers with their
own environment (other limits, PostgreSQL, Redis) and stops them at the end of the test.

The tiers: ``pytest_collection_modifyitems`` below marks every test that starts a process
(``process``), a browser (``browser``) or PostgreSQL/Redis/nginx (``services``), from what the
test uses, so no test has to remember a marker. ``make check`` deselects the three; ``make test``
runs everything. A test whose code starts a process without being marked fails (``_guard``).
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_process import ServerProcess, free_port, start_redis_server

# --- The tiers ---

TESTS = Path(__file__).resolve().parent
# Fixtures that are, or start, what make check leaves out.
_FIXTURE_TIERS = {
    "live_server": "process",
    "server_factory": "process",
    "server": "process",  # tests/reliability/conftest.py: a server of the module's own
    "page": "browser",
    "browser": "browser",
    "context": "browser",
    "new_context": "browser",
    "postgres_url": "services",
    "redis_url": "services",
}
# Folders whose every test is of a tier: the viewer in Chromium, the reliability scenarios
# against real servers, the package built and installed into fresh venvs.
_FOLDER_TIERS = {"e2e": "browser", "reliability": "process", "package": "process"}
# Fixtures that serve the app in this process (its traces in a thread): no process started.
_IN_PROCESS = frozenset({"app_server"})
# Names in a test's code (or in a helper or fixture of tests/ it calls, however deep) that start
# a process: a subprocess, a real server, or the app with its torch worker pool.
_PROCESS_NAMES = frozenset({"subprocess", "Popen", "ServerProcess", "create_app", "WorkerPool"})


def _starts_a_process(code: types.CodeType, scope: dict[str, Any], seen: set[types.CodeType]) -> bool:
    if code in seen:
        return False
    seen.add(code)
    if _PROCESS_NAMES.intersection(code.co_names):
        return True
    for const in code.co_consts:  # nested functions, lambdas, comprehensions
        if isinstance(const, types.CodeType) and _starts_a_process(const, scope, seen):
            return True
    for name in code.co_names:
        called = scope.get(name)
        inner = getattr(called, "__wrapped__", called)
        if isinstance(inner, types.FunctionType) and inner.__code__.co_filename.startswith(str(TESTS)):
            if _starts_a_process(inner.__code__, inner.__globals__, seen):
                return True
    return False


def _tiers(item: pytest.Item) -> set[str]:
    tiers = {_FIXTURE_TIERS[name] for name in getattr(item, "fixturenames", ()) if name in _FIXTURE_TIERS}
    folder = Path(str(item.path)).relative_to(TESTS).parts[0]
    if folder in _FOLDER_TIERS:
        tiers.add(_FOLDER_TIERS[folder])
    seen: set[types.CodeType] = set()
    functions = [getattr(item, "function", None)]
    fixture_info = getattr(item, "_fixtureinfo", None)
    for name, defs in fixture_info.name2fixturedefs.items() if fixture_info else ():
        if name not in _IN_PROCESS:
            functions += [d.func for d in defs]
    for function in functions:
        inner = getattr(function, "__wrapped__", function)
        if isinstance(inner, types.FunctionType) and _starts_a_process(
            inner.__code__, inner.__globals__, seen
        ):
            tiers.add("process")
            break
    return tiers


# Scenarios that need the machine to themselves: load, floods, faults under load and slow clients
# measure latencies and heal times against promises (RELIABILITY.md), so they run after the
# others, one at a time (``alone``). Every test of tests/reliability that starts servers of its
# own (server_factory) is one, unless marked ``untimed`` (it asserts no time or memory figure:
# statuses, codes, bodies, logs), which runs with the others; another test opts in with
# ``pytest.mark.alone``.
_ALONE_FOLDERS = frozenset({"reliability"})


def _xdist_group(item: pytest.Item, tiers: set[str]) -> str:
    """The xdist group (``--dist loadgroup``) of a test that starts processes: its module, so a
    module's own server (scope="module") starts once and its tests keep their order. The tests of
    PostgreSQL, Redis and nginx share one worker, and so do the browser tests of the session's
    jail server (``run_server``): one cluster and one jail, not one per worker."""
    if "services" in tiers:
        return "services"
    if "run_server" in getattr(item, "fixturenames", ()):
        return "run_server"
    return str(Path(str(item.path)).relative_to(TESTS))


_GROUPS = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the tiers set here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        marked = {m.name for m in item.iter_markers()}
        tiers = _tiers(item)
        for tier in tiers - marked:
            item.add_marker(tier)
        folder = Path(str(item.path)).relative_to(TESTS).parts[0]
        own_servers = folder in _ALONE_FOLDERS and "server_factory" in getattr(item, "fixturenames", ())
        if own_servers and not marked & {"alone", "untimed"}:
            item.add_marker("alone")
        elif (tiers | marked) & {"process", "browser", "services"}:
            item.stash[_GROUPS] = _xdist_group(item, tiers | marked)


# ``--dist loadgroup`` (make test) by the groups above. pytest-xdist's own loadgroup reads
# ``xdist_group`` marks into node ids that pytest 9 no longer lets it rewrite, so the workers
# write each test's group to a file the controller's scheduler reads (the workers' collections
# are complete before it schedules). A test with no group is a unit of its own.
_GROUPS_FILE = "GRADTRACE_XDIST_GROUPS"


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("dist", None) == "loadgroup" and _GROUPS_FILE not in os.environ:
        handle, path = tempfile.mkstemp(prefix="xdist-groups-", suffix=".json")
        os.close(handle)
        os.environ[_GROUPS_FILE] = path  # the workers start after this, with this environment


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist sends the collection to the controller
def pytest_collection_finish(session: pytest.Session) -> None:
    worker, path = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get(_GROUPS_FILE)
    if worker and path:
        groups = {item.nodeid: item.stash[_GROUPS] for item in session.items if _GROUPS in item.stash}
        Path(f"{path}.{worker}").write_text(json.dumps(groups))
        os.replace(f"{path}.{worker}", path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist", None) != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                self.groups = json.loads(Path(os.environ[_GROUPS_FILE]).read_text() or "{}")
            return self.groups.get(nodeid, nodeid)

    return ByGroup(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.getoption("dist", None) == "loadgroup" and not os.environ.get("PYTEST_XDIST_WORKER"):
        Path(os.environ.pop(_GROUPS_FILE, "")).unlink(missing_ok=True)


_RUNNING: list[pytest.Item] = []  # the test running now, if it may not start a process


def _refuse_unmarked_process(event: str, args: tuple[Any, ...]) -> None:
    """An unmarked test's own code (or a helper of tests/) starting a process: the scan above
    missed a name. The library's own helpers (the Node renderer) are not the test's doing."""
    if event != "subprocess.Popen" or not _RUNNING:
        return
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in (subprocess.__file__, __file__):
        frame = frame.f_back
    if frame is not None and frame.f_code.co_filename.startswith(str(TESTS)):
        raise RuntimeError(
            f"{_RUNNING[0].nodeid} starts {args[0]} but is not marked 'process': tests/conftest.py's "
            "_PROCESS_NAMES or _FIXTURE_TIERS should name what starts it, so make check leaves it out"
        )


sys.addaudithook(_refuse_unmarked_process)


@pytest.fixture(autouse=True)
def _guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """While a test not marked ``process`` runs, its code starting a process fails it."""
    unmarked = request.node.get_closest_marker("process") is None
    if unmarked:
        _RUNNING.append(request.node)
    try:
        yield
    finally:
        if unmarked:
            _RUNNING.clear()


@pytest.fixture(autouse=True)
def _no_borrowed_event_loop(request: pytest.FixtureRequest) -> Iterator[None]:
    """Playwright's sync API (the session's browser) keeps its event loop running in this thread
    between browser tests. A later test of the same session (make test runs them on the same
    xdist workers) that runs a loop of its own (``asyncio.run``) would find it running and fail:
    it is hidden while a test that uses no browser runs, then put back for the browser's tests."""
    loop = asyncio._get_running_loop()
    if loop is None or request.node.get_closest_marker("browser") is not None:
        yield
        return
    asyncio._set_running_loop(None)
    try:
        yield
    finally:
        asyncio._set_running_loop(loop)


@pytest.fixture(scope="session", autouse=True)
def _layouts_kept_in_this_session(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The renderer's layouts on disk go to a folder of this session, not the user's cache; no
    startup snapshot is built in the background (tests/embed/test_render_snapshot.py builds them)."""
    os.environ.setdefault("GRADTRACE_CACHE_DIR", str(tmp_path_factory.mktemp("layout_cache")))
    os.environ.setdefault("GRADTRACE_SNAPSHOT", "off")


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a real gradtrace server (temp SQLite DB), ready to trace."""
    # No rate limit here: the whole session (API, browser, embed tests) shares this one client
    # address. The rate limit has its own server in tests/api/test_workers.py.
    server = ServerProcess(tmp_path_factory.mktemp("live_server"), env={"GRADTRACE_RATE_PER_MINUTE": "0"})
    try:
        server.wait_ready()
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def app_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of the app served in THIS process (uvicorn in a thread, on loopback, with the
    server's own protocol class): traces run in a thread (``InThreadRunner``), no worker process.

    For the HTTP contract (envelopes, 4xx bodies, OpenAPI, ETag/304, translate, examples);
    what needs the worker processes (kills, memory caps, restarts) uses ``live_server``."""
    import uvicorn

    from gradtrace.api.app import create_app
    from gradtrace.service.runner import InThreadRunner
    from gradtrace.service.server import ReadDeadlineH11Protocol
    from gradtrace.service.settings import Settings

    folder = tmp_path_factory.mktemp("app_server")
    settings = Settings(
        sqlite_path=folder / "gradtrace.db",
        disk_cache_dir=folder / "tier",
        rate_per_minute=0,
        api_cpu_processes=0,  # translating and checking in a thread too, no helper process
    )
    port = free_port()
    config = uvicorn.Config(
        create_app(settings, runner=InThreadRunner),
        host="127.0.0.1",
        port=port,
        http=ReadDeadlineH11Protocol,
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="app_server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the in-process app server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator:
    """Start extra servers: ``server_factory(env={...})`` -> ready ServerProcess."""
    started: list[ServerProcess] = []

    def start(env: dict[str, str] | None = None, wait: bool = True) -> ServerProcess:
        server = ServerProcess(tmp_path / f"srv{len(started)}", env)
        started.append(server)
        if wait:
            server.wait_ready()
        return server

    yield start
    for server in started:
        server.stop()


# --- PostgreSQL and Redis from Debian's packages, on loopback, for the duration of the session ---

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _as_nobody() -> list[str]:
    # postgres refuses to run as root: run it (and initdb) as an unprivileged user.
    return ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []


def _pg_bin(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if not found:
        pytest.skip("PostgreSQL server binaries are not installed (make system)")
    return str(found[-1])


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL cluster in a temp dir on a free loopback port; yields its URL."""
    # Not under pytest's tmp dir: that is mode 0700 root, which the postgres user cannot enter.
    base = Path(tempfile.mkdtemp(prefix="gradtrace-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        for p in (base, sock):
            os.chown(p, nobody.pw_uid, nobody.pw_gid)
    port = free_port()
    subprocess.run(
        [
            *_as_nobody(),
            _pg_bin("initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "--no-sync",
            "-E",
            "UTF8",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    opts = f"-h 127.0.0.1 -p {port} -k {sock} -c fsync=off -c full_page_writes=off"
    subprocess.run(
        [
            *_as_nobody(),
            _pg_bin("pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(base / "pg.log"),
            "-o",
            opts,
            "-w",
            "-t",
            "60",
            "start",
        ],
        check=True,
        capture_output=True,
        timeout=90,
    )
    try:
        subprocess.run(
            [
                *_as_nobody(),
                _pg_bin("createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "postgres",
                "gradtrace",
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
        yield f"postgresql://postgres@127.0.0.1:{port}/gradtrace"
    finally:
        subprocess.run(
            [*_as_nobody(), _pg_bin("pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A redis-server on a free loopback port, no persistence; yields its URL."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (make system)")
    proc, url = start_redis_server()
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# Debian's Chromium (Playwright cannot download its own browser builds here), with the flags a
# closed network and a root user need. Shared by the viewer (e2e) and export (embed) tests.
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}
