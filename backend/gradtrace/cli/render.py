"""``gradtrace render SPEC.json|TRACE.json -o out.svg|out.html|out.png|out.json``: a diagram, offline.

A model spec is traced here with real PyTorch; a saved trace is drawn as it is, without
importing torch or validating it in Python (the renderer checks what it draws). The format
follows the output's suffix.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import msgspec

from gradtrace.cli.common import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    err,
    format_spec_error,
    parse_json,
    read_input,
)
from gradtrace.render.options import DIRECTIONS, MAX_DEPTH, PHASES, THEMES, DrawOptions
from gradtrace.render.save import SUFFIXES


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "render",
        help="draw a spec or trace as SVG (static or animated), standalone HTML or PNG",
        description="Trace a spec (or read a trace JSON) and draw it offline with the viewer's "
        "layout and styles. The format follows the output's suffix: .svg (add --animated for the "
        "looping forward/backward animation), .html (the interactive player in one file), .png "
        "(needs Chromium), .json.",
    )
    p.add_argument("spec", metavar="SPEC.json", help="a model spec or a trace JSON ('-' reads stdin)")
    p.add_argument("-o", "--output", metavar="OUT", required=True, help=f"output file: {', '.join(SUFFIXES)}")
    p.add_argument("--animated", action="store_true", help="animate the SVG (CSS keyframes, looping)")
    p.add_argument("--phase", choices=PHASES, default="both", help="passes to draw (default both)")
    p.add_argument(
        "--theme", choices=THEMES, default=None, help="colours (default light; HTML follows the reader)"
    )
    p.add_argument("--no-values", action="store_true", help="leave out value and gradient chips")
    p.add_argument(
        "--depth",
        type=_depth,
        default=None,
        metavar="N",
        help="SVG/PNG: draw every module N deep as one box (1: the model's children); "
        "default: fold repeated blocks and collapse as deep as fits, as the viewer does",
    )
    p.add_argument(
        "--direction", choices=DIRECTIONS, default="down", help="SVG/PNG: data flows down (default) or right"
    )
    p.set_defaults(func=run)


def _depth(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_DEPTH:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_DEPTH} (got {text!r})")
    return int(text)


def is_trace(doc: Any) -> bool:
    return isinstance(doc, dict) and "graph" in doc and "events" in doc and "schema_version" in doc


class _TraceKeys(msgspec.Struct):
    """The keys that tell a trace from a spec, their values left unread."""

    graph: msgspec.Raw = msgspec.Raw()  # (empty: the key is not there)
    events: msgspec.Raw = msgspec.Raw()
    schema_version: msgspec.Raw = msgspec.Raw()


def is_trace_json(data: bytes) -> bool:
    """``is_trace`` of JSON bytes without building the document: a saved trace goes to the
    renderer as the bytes it is (a trace of many megabytes is not parsed into objects and
    written out again only to be read once more). Not JSON, or not an object: not a trace
    (the spec path says what is wrong)."""
    try:
        keys = msgspec.json.decode(data, type=_TraceKeys)
    except msgspec.MsgspecError:
        return False
    return all(len(raw) > 0 for raw in (keys.graph, keys.events, keys.schema_version))


def _traced(source: str, doc: Any) -> Any:
    """The spec traced with PyTorch (imported only now); None after reporting an invalid spec."""
    from gradtrace import trace_spec
    from gradtrace.problem import Problem

    try:
        return trace_spec(doc)
    except Problem as exc:  # the spec's or the engine's: the same report
        err(format_spec_error(source, exc))
        return None


def run(args: argparse.Namespace) -> int:
    from gradtrace.render import RenderError, render_bytes

    out = Path(args.output)
    suffix = out.suffix.lower()
    if suffix not in SUFFIXES:
        err(f"cannot tell the format of {args.output!r}: the output must end in {', '.join(SUFFIXES)}")
        return EXIT_USAGE
    if suffix == ".png" and args.animated:
        err("a PNG is a still picture: write the animated diagram to a .svg file")
        return EXIT_USAGE
    data = read_input(args.spec)
    if is_trace_json(data):
        trace: Any = data
    else:
        # (is_trace again: json reads some JSON msgspec refuses, a lone surrogate escape "\\ud800")
        doc = parse_json(data, args.spec)
        trace = doc if is_trace(doc) else _traced(args.spec, doc)
    if trace is None:
        return EXIT_INVALID
    options = DrawOptions(
        animated=args.animated,
        phase=args.phase,
        theme=args.theme,
        values=not args.no_values,
        depth=args.depth,
        direction=args.direction,
    )
    try:
        data = render_bytes(trace, suffix, options)
    except RenderError as exc:
        err(f"cannot draw {args.output}: {exc}")
        return EXIT_INVALID
    out.write_bytes(data)
    sys.stderr.write(f"wrote {args.output} ({len(data):,} bytes)\n")
    return EXIT_OK
