"""``gradtrace render SPEC.json -o out.svg|out.html|out.png|out.json``: a diagram, offline.

The input is a model spec (traced here with real PyTorch) or a trace JSON (drawn as it is).
The format follows the output's suffix. Exit codes are the CLI's: 0 written, 1 the spec is
invalid, PyTorch refused it, or the renderer failed, 2 usage (bad suffix, unreadable file).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gradtrace.render.diagram import PHASES, THEMES
from gradtrace.render.save import SUFFIXES

_EXIT_OK, _EXIT_INVALID, _EXIT_USAGE = 0, 1, 2


def add_render_parser(sub: Any) -> None:
    """Register the subcommand on the CLI's subparsers."""
    p = sub.add_parser(
        "render",
        help="draw a spec or trace as SVG (static or animated), standalone HTML or PNG",
        description="Trace a spec (or read a trace JSON) and draw it offline with the viewer's "
        "layout and styles. The format follows the output's suffix: .svg (add --animated for the "
        "looping forward/backward animation), .html (the interactive player in one file), .png, .json.",
    )
    p.add_argument("spec", metavar="SPEC.json", help="a model spec or a trace JSON ('-' reads stdin)")
    p.add_argument("-o", "--output", metavar="OUT", required=True, help=f"output file: {', '.join(SUFFIXES)}")
    p.add_argument("--animated", action="store_true", help="animate the SVG (CSS keyframes, looping)")
    p.add_argument("--phase", choices=PHASES, default="both", help="passes to draw (default both)")
    p.add_argument(
        "--theme", choices=THEMES, default=None, help="colours (default light; HTML follows the reader)"
    )
    p.add_argument("--no-values", action="store_true", help="leave out value and gradient chips")
    p.set_defaults(func=cmd_render)


def _is_trace(doc: Any) -> bool:
    return isinstance(doc, dict) and "graph" in doc and "events" in doc and "schema_version" in doc


def _load(path: str) -> Any:
    """A Trace for the input file: a trace JSON as it is, a spec traced with PyTorch."""
    from gradtrace import Trace, trace_spec
    from gradtrace.cli import read_spec_file

    doc = read_spec_file(path)
    if _is_trace(doc):
        return Trace.from_dict(doc)
    return trace_spec(doc)


def cmd_render(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from gradtrace.cli import _err, _format_spec_error
    from gradtrace.render import RenderError, render_bytes
    from gradtrace.spec import SpecError

    out = Path(args.output)
    suffix = out.suffix.lower()
    if suffix not in SUFFIXES:
        _err(f"cannot tell the format of {args.output!r}: the output must end in {', '.join(SUFFIXES)}")
        return _EXIT_USAGE
    if suffix == ".png" and args.animated:
        _err("a PNG is a still picture: write the animated diagram to a .svg file")
        return _EXIT_USAGE
    try:
        trace = _load(args.spec)
    except SpecError as exc:
        _err(_format_spec_error(args.spec, exc))
        return _EXIT_INVALID
    except ValidationError as exc:
        _err(f"{args.spec}: not a valid trace: {exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}")
        return _EXIT_INVALID
    except Exception as exc:  # the engine's TraceError (a limit) without importing torch up front
        if type(exc).__name__ != "TraceError":
            raise
        _err(_format_spec_error(args.spec, exc))
        return _EXIT_INVALID
    options = {
        "animated": args.animated,
        "phase": args.phase,
        "theme": args.theme,
        "values": not args.no_values,
    }
    try:
        data = render_bytes(trace, suffix, **options)
    except RenderError as exc:
        _err(f"cannot draw {args.output}: {exc}")
        return _EXIT_INVALID
    out.write_bytes(data)
    sys.stderr.write(f"wrote {args.output} ({len(data):,} bytes)\n")
    return _EXIT_OK
