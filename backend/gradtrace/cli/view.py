"""``gradtrace view TRACE.json``: open a saved trace in the viewer (needs the ``[server]`` extra);
``gradtrace view RUN_DIR``: the run view of a ``gradtrace.watch`` run (``/watch.html``).

The file is read and checked first (JSON, a trace of this gradtrace's schema_version), then the
viewer and API are served on a free loopback port with the trace at ``/api/v1/opened-trace``,
and the browser opens ``/?opened=<file name>``. Without a display (a headless machine, a
container, ``--no-browser``) only the URL is printed. It runs until Ctrl-C, or until no request
has come for ``--idle-timeout`` seconds (an hour unless told: a forgotten terminal does not keep
a server and its torch workers forever).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import urllib.parse
from pathlib import Path
from typing import Any

from gradtrace.cli.common import EXIT_OK, UsageError, parse_json, read_input
from gradtrace.cli.serve import load_server

DEFAULT_IDLE_TIMEOUT_S = 3600


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "view",
        help="open a trace.json in the web viewer",
        description="Serve the viewer with a saved trace (from `gradtrace trace` or "
        "gradtrace.trace(model, ...)) and open it in the browser; on a machine without a "
        "display, print the URL to open. Ctrl-C stops it.",
    )
    p.add_argument(
        "trace",
        metavar="TRACE.json|RUN_DIR",
        help="the trace file ('-' reads stdin), or a run directory gradtrace.watch writes",
    )
    add_server_options(p)
    p.set_defaults(func=run)


def add_server_options(p: argparse.ArgumentParser) -> None:
    """--host, --port, --no-browser, --idle-timeout: how a trace is shown (``open_in_viewer``)."""
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: a free one)")
    p.add_argument("--no-browser", action="store_true", help="print the URL, do not open a browser")
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT_S,
        metavar="SECONDS",
        help=f"stop after this long without a request (default {DEFAULT_IDLE_TIMEOUT_S}; 0: never)",
    )


def read_trace(path: str) -> bytes:
    """The trace file's bytes, once they are known to be a trace this gradtrace can show."""
    import msgspec

    from gradtrace.trace_schema import SCHEMA_VERSION, TraceDoc

    data = read_input(path)
    doc = parse_json(data, path)
    if not isinstance(doc, dict) or "schema_version" not in doc:
        what = "a model spec" if isinstance(doc, dict) and "spec_version" in doc else "not a gradtrace trace"
        hint = " (trace it first: gradtrace trace SPEC.json -o trace.json)" if "spec" in what else ""
        raise UsageError(f"{path}: {what}, it has no schema_version{hint}")
    if doc["schema_version"] != SCHEMA_VERSION:
        raise UsageError(
            f"{path}: a trace of schema_version {doc['schema_version']!r}; this gradtrace reads "
            f"{SCHEMA_VERSION} (trace the spec again with this version)"
        )
    try:
        msgspec.json.decode(data, type=TraceDoc)
    except msgspec.ValidationError as exc:
        raise UsageError(f"{path}: not a valid trace: {exc}") from exc
    return data


def has_display() -> bool:
    """Whether a browser can be shown: always on macOS and Windows, with X11/Wayland elsewhere
    (Python's webbrowser would otherwise start a text browser in this terminal)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def run(args: argparse.Namespace) -> int:
    if args.trace != "-" and Path(args.trace).is_dir():
        return open_run(Path(args.trace), args)
    data = read_trace(args.trace)
    name = "trace.json" if args.trace == "-" else Path(args.trace).name
    return open_in_viewer(data, name, args.trace, args)


def open_run(run_dir: Path, args: argparse.Namespace) -> int:
    """``gradtrace view RUN_DIR``: the run view of a directory ``gradtrace.watch`` writes (or
    is writing: the view follows it)."""
    from gradtrace.runs.store import Run

    try:
        Run(run_dir).close()
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    return open_in_viewer(None, run_dir.name, str(run_dir), args, run_dir=run_dir)


def open_in_viewer(
    data: bytes | None, name: str, label: str, args: argparse.Namespace, run_dir: Path | None = None
) -> int:
    """Serve the viewer with the trace ``data`` (a trace document's JSON) at ``/?opened=name``,
    or the run in ``run_dir`` at ``/watch.html?run=name``, and open it in the browser (or print
    its URL); returns when the server stops."""
    create_app, serve, settings = load_server("view")
    # One reader of one saved trace on this machine: the API's own checks run in a thread, not
    # in helper processes, and no jail is started (pasted programs are the hosted service's).
    settings = dataclasses.replace(settings, api_cpu_processes=0, runner_workers=0)
    browser = not args.no_browser and has_display()
    page = "/watch.html?run=" if run_dir is not None else "/?opened="

    def ready(port: int) -> None:
        host = "127.0.0.1" if args.host in ("0.0.0.0", "") else args.host
        url = f"http://{host}:{port}{page}{urllib.parse.quote(name)}"
        opening = "opening it in your browser" if browser else "open this URL in a browser"
        sys.stdout.write(f"{label}: {opening}:\n  {url}\n(Ctrl-C stops the server)\n")
        sys.stdout.flush()
        if browser:
            import webbrowser

            webbrowser.open(url)

    import logging

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    serve(
        create_app(settings, opened_trace=data, opened_run=run_dir),
        args.host,
        args.port,
        "warning",
        on_ready=ready,
        idle_timeout_s=args.idle_timeout or None,
    )
    return EXIT_OK
