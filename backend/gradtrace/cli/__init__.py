"""The ``gradtrace`` command: one module per command group, each registering its subcommands.

Exit codes a script can rely on:
  0    success
  1    the spec is invalid, PyTorch refused to build/run it, or a drawing failed (message on stderr)
  2    usage error: unknown option, missing or unreadable file, not JSON
  141  the reader of the output went away (``gradtrace examples | head``), like other Unix tools

Importing this package does no work: each command imports what it needs when it runs.
To add a command: a module with ``add_parser(sub)`` whose function returns an exit code.
"""

from __future__ import annotations

import argparse
import os
import sys

from gradtrace.cli import examples, render, run, serve, specs, translate, view
from gradtrace.cli.common import EXIT_BROKEN_PIPE, EXIT_USAGE, UsageError, err

__all__ = ["main"]

_EPILOG = """\
examples:
  gradtrace serve --port 8000              run the viewer and API at http://127.0.0.1:8000/
  gradtrace examples                       list the built-in examples (id, title)
  gradtrace examples full-backward-hook > s.json   write one example's spec to a file
  gradtrace validate s.json                check a spec without running it (exit 1 if invalid)
  gradtrace trace s.json -o trace.json     trace a spec with real PyTorch, write the trace JSON
  gradtrace view trace.json                open a saved trace in the viewer (prints its URL)
  gradtrace run train.py -o trace.html     run a PyTorch program as written, save what autograd did
  gradtrace render s.json -o d.svg --animated   draw it (.svg, .html player, .png), offline

exit codes: 0 success, 1 invalid spec or PyTorch refused it, 2 usage error or unreadable file.
"""


class _Version(argparse.Action):
    """``--version``: gradtrace.__version__, read only when asked."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print gradtrace's version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from gradtrace import __version__

        sys.stdout.write(f"gradtrace {__version__}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gradtrace",
        description="See what PyTorch autograd really does: the graph as it is built, the backward "
        "pass in the engine's real order, every hook, the real numbers.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    serve.add_parser(sub)
    view.add_parser(sub)
    specs.add_parsers(sub)
    examples.add_parser(sub)
    render.add_parser(sub)
    translate.add_parser(sub)
    run.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # here, not at exit: a closed pipe is answered below, not by a traceback
        return code
    except UsageError as exc:
        err(str(exc))
        return EXIT_USAGE
    except BrokenPipeError:
        # Python would try to flush stdout again at exit and print another error: point it nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        return 130
