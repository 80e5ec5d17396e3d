"""``gradtrace serve``: the web viewer and the HTTP API (needs the ``[server]`` extra)."""

from __future__ import annotations

import argparse
from typing import Any

from gradtrace.cli.common import EXIT_OK, UsageError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "serve",
        help="run the web viewer and the HTTP API",
        description="Serve the viewer at / and the API at /api/v1 (OpenAPI at /docs). "
        "Configuration comes from the environment: GRADTRACE_DB (SQLite file), "
        "DATABASE_URL (PostgreSQL), REDIS_URL, GRADTRACE_WORKERS, GRADTRACE_FRONTEND_DIR.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.set_defaults(func=run)


def load_server(command: str) -> tuple[Any, Any, Any]:
    """(create_app, serve, Settings from the environment) for a command that runs the server;
    a missing server extra or a malformed GRADTRACE_* variable is a UsageError saying so."""
    try:
        from gradtrace.api.app import create_app
        from gradtrace.service.server import serve
    except ModuleNotFoundError as exc:  # the library alone: the service is an extra
        raise UsageError(
            f"gradtrace {command} needs the server extra ({exc.name} is not installed): "
            "pip install 'gradtrace[server]'"
        ) from exc
    from gradtrace.service.settings import Settings

    try:
        settings = Settings.from_env()
    except ValueError as exc:  # a malformed GRADTRACE_* variable: say which, no traceback
        raise UsageError(str(exc)) from exc
    return create_app, serve, settings


def run(args: argparse.Namespace) -> int:
    import logging

    create_app, serve, settings = load_server("serve")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    serve(create_app(settings), args.host, args.port, args.log_level)
    return EXIT_OK
