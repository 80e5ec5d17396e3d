"""``gradtrace run script.py``: run a PyTorch program as written, on this machine, under
``gradtrace.record()``, then save its trace (``-o trace.json``, ``.html``, ``.svg``, ``.png``)
or open it in the viewer as ``gradtrace view`` does.

The program runs as ``python script.py ARGS…`` would run it: as ``__main__``, with its own
directory first on ``sys.path`` and ``sys.argv`` set, its prints on this terminal. Nothing
confines it (it is your program, on your machine; the service runs pasted programs in a jail).
An exception in it is reported with the program's own frames and the trace up to it is still
saved or shown; the command then exits 1.
"""

from __future__ import annotations

import argparse
import builtins
import sys
import traceback
from pathlib import Path
from typing import Any

from gradtrace.cli.common import EXIT_INVALID, EXIT_OK, UsageError, err, read_input
from gradtrace.cli.serve import load_server
from gradtrace.cli.view import add_server_options, open_in_viewer

# Run in the program's namespace, so that the frame record() reads names from is the program's
# module frame (its globals are the program's variables); the underscore names are skipped.
_WRAPPER = "with __gradtrace_record__ as __gradtrace_recording__:\n    exec(__gradtrace_code__, globals())\n"
_SUFFIXES = (".json", ".html", ".svg", ".png")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run a PyTorch program under gradtrace.record() and save or view its trace",
        description="Run script.py as written (as `python script.py ARGS` would, on this machine, "
        "not confined) while gradtrace records every graph built, every backward and every module "
        "call; then write the trace with -o (.json, .html, .svg, .png) or open it in the viewer.",
    )
    p.add_argument("script", metavar="SCRIPT.py", help="the program to run")
    p.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        metavar="ARG",
        help="the program's sys.argv; the options above may also follow the script (after `--`: all the program's)",
    )
    _add_options(p)
    p.set_defaults(func=run)


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-o", "--output", metavar="FILE", help="write the trace here instead of opening the viewer"
    )
    add_server_options(p)


def _options_after_the_script(args: argparse.Namespace) -> list[str]:
    """Read this command's own options written after the script (`run train.py -o t.html`) into
    ``args``; the program's arguments are the rest, and everything after a `--`."""
    rest = list(args.args)
    after = rest.index("--") if "--" in rest else len(rest)
    options = argparse.ArgumentParser(add_help=False)
    _add_options(options)
    given, program = options.parse_known_args(rest[:after])
    defaults = vars(options.parse_args([]))
    for key, value in vars(given).items():
        if value != defaults[key]:
            setattr(args, key, value)
    return program + rest[after + 1 :]


def run(args: argparse.Namespace) -> int:
    argv = _options_after_the_script(args)
    path = Path(args.script)
    if args.output is not None and Path(args.output).suffix.lower() not in _SUFFIXES:
        raise UsageError(
            f"{args.output}: write the trace as {', '.join(_SUFFIXES)} (the program prints to stdout)"
        )
    if args.output is None:  # the viewer needs the server extra: said before the program runs, not after
        try:
            load_server("run")
        except UsageError as exc:
            raise UsageError(f"{exc}, or write the trace with -o trace.html (no server needed)") from exc
    try:
        source = read_input(args.script).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read {args.script}: {exc}") from exc
    try:
        code = compile(source, str(path), "exec")
    except (SyntaxError, ValueError) as exc:
        err(f"{args.script}: " + "".join(traceback.format_exception_only(exc)).strip())
        return EXIT_INVALID
    trace, failed = _record(code, path, argv)
    if trace is None:
        err(f"{args.script}: the program stopped before recording anything")
        return EXIT_INVALID
    if args.output is not None:
        trace.save(args.output)
        doc = trace.doc
        sys.stderr.write(f"wrote {args.output}: {len(doc.graph.nodes)} nodes, {len(doc.events)} events\n")
    else:
        open_in_viewer(trace.to_json_bytes(), path.with_suffix(".json").name, args.script, args)
    return EXIT_INVALID if failed else EXIT_OK


def _record(code: Any, path: Path, argv: list[str]) -> tuple[Any, bool]:
    """(the trace, whether the program raised); the program's exception is printed here."""
    import gradtrace

    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "__file__": str(path),
        "__builtins__": builtins,
        "__gradtrace_record__": gradtrace.record(title=path.name),
        "__gradtrace_code__": code,
    }
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(path), *argv]
    sys.path.insert(0, str(path.resolve().parent))
    try:
        exec(compile(_WRAPPER, "<gradtrace run>", "exec"), namespace)
    except SystemExit as exc:
        failed = exc.code not in (None, 0)
        return getattr(exc, "gradtrace_trace", None), failed
    except Exception as exc:
        _print_program_error(exc, str(path))
        return getattr(exc, "gradtrace_trace", None), True
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return namespace["__gradtrace_recording__"].trace, False


def _print_program_error(exc: BaseException, filename: str) -> None:
    """The traceback Python would print without gradtrace: from the program's first frame on,
    without the frames of gradtrace's capture (its torch-function mode sits between the
    program's line and the op that raised)."""
    ours = str(Path(__file__).resolve().parents[1])
    report = traceback.TracebackException.from_exception(exc)
    frames = list(report.stack)
    first = next((i for i, frame in enumerate(frames) if frame.filename == filename), 0)
    kept = [frame for frame in frames[first:] if not str(Path(frame.filename).resolve()).startswith(ours)]
    report.stack = traceback.StackSummary.from_list(kept)
    sys.stderr.write("".join(report.format()))
