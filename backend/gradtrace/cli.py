"""The ``gradtrace`` command: a small dispatcher, one function per subcommand.

Exit codes a script can rely on:
  0  success
  1  the spec is invalid, or PyTorch refused to build/run it (message on stderr)
  2  usage error: unknown option, missing or unreadable file, not JSON

To add a subcommand: write ``cmd_<name>(args) -> int`` and register it in ``_build_parser``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2

_EPILOG = """\
examples:
  gradtrace serve --port 8000              run the viewer and API at http://127.0.0.1:8000/
  gradtrace examples                       list the built-in examples (id, title)
  gradtrace examples full-backward-hook > s.json   write one example's spec to a file
  gradtrace validate s.json                check a spec without running it (exit 1 if invalid)
  gradtrace trace s.json -o trace.json     trace a spec with real PyTorch, write the trace JSON
  gradtrace render s.json -o d.svg --animated   draw it (.svg, .html player, .png), offline

exit codes: 0 success, 1 invalid spec or PyTorch refused it, 2 usage error or unreadable file.
"""


class UsageError(Exception):
    pass


def _err(message: str) -> None:
    sys.stderr.write(f"gradtrace: {message}\n")


def _reject_constant(token: str) -> float:
    raise UsageError(f"non-finite number {token} is not valid JSON in a spec")


def read_spec_file(path: str) -> Any:
    """Read a spec from a file ('-' is stdin), rejecting NaN/Infinity like the API does."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc


def _format_spec_error(source: str, exc: Any) -> str:
    where = [source]
    if getattr(exc, "line", None) is not None:
        where.append(f"line {exc.line}" + (f", column {exc.column}" if exc.column is not None else ""))
    if getattr(exc, "path", None):
        where.append(exc.path)
    return f"{': '.join(where)}: {getattr(exc, 'code', 'invalid_spec')}: {getattr(exc, 'message', exc)}"


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from gradtrace.api.app import create_app
    from gradtrace.service.settings import Settings

    try:
        settings = Settings.from_env()
    except ValueError as exc:  # a malformed GRADTRACE_* variable: say which, no traceback
        raise UsageError(str(exc)) from exc
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    # h11, not httptools: h11 caps request headers (16 KiB); httptools accepted 8 MiB.
    uvicorn.run(
        create_app(settings),
        host=args.host,
        port=args.port,
        http="h11",
        log_level=args.log_level,
        timeout_keep_alive=5,
        proxy_headers=False,
    )
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    from gradtrace.spec import SpecError, SpecLimits, check_declared, parse_spec

    doc = read_spec_file(args.spec)
    try:
        spec = parse_spec(doc)
        check_declared(spec, SpecLimits())
    except SpecError as exc:
        _err(_format_spec_error(args.spec, exc))
        return EXIT_INVALID
    if args.normalized:
        sys.stdout.write(json.dumps(spec.normalized(), indent=2) + "\n")
    else:
        sys.stdout.write(f"{args.spec}: valid spec\n")
    return EXIT_OK


def cmd_trace(args: argparse.Namespace) -> int:
    from gradtrace.spec import SpecError, SpecLimits, check_declared, parse_spec

    doc = read_spec_file(args.spec)
    limits = SpecLimits()
    try:
        spec = parse_spec(doc)
        check_declared(spec, limits)  # before importing torch: a bad spec fails fast
        from gradtrace.engine import TraceError, run_spec  # torch: only now

        try:
            trace = run_spec(spec, limits)  # limits (meta dry run), then the TraceDoc
        except TraceError as exc:
            _err(_format_spec_error(args.spec, exc))
            return EXIT_INVALID
    except SpecError as exc:
        _err(_format_spec_error(args.spec, exc))
        return EXIT_INVALID
    from gradtrace.trace import Trace

    text = Trace(trace).to_json(indent=2 if args.pretty else None)
    if args.output and args.output != "-":
        Path(args.output).write_text(text + "\n", encoding="utf-8")
        errors = sum(1 for e in trace.events if e.kind == "error")
        sys.stderr.write(
            f"wrote {args.output}: {len(trace.graph.nodes)} nodes, {len(trace.events)} events"
            + (f", {errors} error event(s)" if errors else "")
            + "\n"
        )
    else:
        sys.stdout.write(text + "\n")
    return EXIT_OK


def cmd_examples(args: argparse.Namespace) -> int:
    from gradtrace.examples import get_example, list_examples

    if args.id:
        try:
            spec = get_example(args.id)
        except KeyError:
            known = ", ".join(e["id"] for e in list_examples())
            _err(f"no example {args.id!r}; known: {known}")
            return EXIT_USAGE
        sys.stdout.write(json.dumps(spec, indent=2) + "\n")
        return EXIT_OK
    items = list_examples()
    if args.json:
        sys.stdout.write(json.dumps(items, indent=2) + "\n")
    else:
        width = max((len(e["id"]) for e in items), default=0)
        for e in items:
            sys.stdout.write(f"{e['id']:<{width}}  {e['title']}\n")
    return EXIT_OK


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gradtrace",
        description="See what PyTorch autograd really does: the graph as it is built, the backward "
        "pass in the engine's real order, every hook, the real numbers.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

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
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser(
        "trace",
        help="trace a spec with real PyTorch and print the trace JSON",
        description="Build the model a spec describes, run its forward and steps with "
        "every hook recorded, and write the trace (the format the viewer reads).",
    )
    p.add_argument("spec", metavar="SPEC.json", help="the model spec ('-' reads stdin)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the trace here instead of stdout")
    p.add_argument("--pretty", action="store_true", help="indent the JSON")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser(
        "validate",
        help="check a spec without running it",
        description="Parse and check a spec (names, program, declared shapes, limits) "
        "without importing torch. Exit 0 if valid, 1 with the reason if not.",
    )
    p.add_argument("spec", metavar="SPEC.json", help="the model spec ('-' reads stdin)")
    p.add_argument("--normalized", action="store_true", help="print the normalised spec")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "examples",
        help="list the built-in examples, or print one",
        description="Without ID: list the examples. With ID: print that example's spec.",
    )
    p.add_argument("id", nargs="?", help="an example id from the list")
    p.add_argument("--json", action="store_true", help="list as JSON")
    p.set_defaults(func=cmd_examples)

    from gradtrace.render.command import add_render_parser

    add_render_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except UsageError as exc:
        _err(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
