"""``gradtrace validate`` (no torch) and ``gradtrace trace`` (real PyTorch): commands on a spec."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gradtrace.cli.common import EXIT_INVALID, EXIT_OK, err, format_spec_error, read_json_file


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "trace",
        help="trace a spec with real PyTorch and print the trace JSON",
        description="Build the model a spec describes, run its forward and steps with "
        "every hook recorded, and write the trace (the format the viewer reads).",
    )
    p.add_argument("spec", metavar="SPEC.json", help="the model spec ('-' reads stdin)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the trace here instead of stdout")
    p.add_argument("--pretty", action="store_true", help="indent the JSON")
    p.set_defaults(func=run_trace)

    p = sub.add_parser(
        "validate",
        help="check a spec without running it",
        description="Parse and check a spec (names, program, declared shapes, limits) "
        "without importing torch. Exit 0 if valid, 1 with the reason if not.",
    )
    p.add_argument("spec", metavar="SPEC.json", help="the model spec ('-' reads stdin)")
    p.add_argument("--normalized", action="store_true", help="print the normalised spec")
    p.set_defaults(func=run_validate)


def run_validate(args: argparse.Namespace) -> int:
    from gradtrace.spec import SpecError, SpecLimits, check_declared, parse_spec

    doc = read_json_file(args.spec)
    try:
        spec = parse_spec(doc)
        check_declared(spec, SpecLimits())
    except SpecError as exc:
        err(format_spec_error(args.spec, exc))
        return EXIT_INVALID
    if args.normalized:
        sys.stdout.write(json.dumps(spec.normalized(), indent=2) + "\n")
    else:
        sys.stdout.write(f"{args.spec}: valid spec\n")
    return EXIT_OK


def run_trace(args: argparse.Namespace) -> int:
    from gradtrace.problem import Problem
    from gradtrace.spec import SpecLimits, check_declared, parse_spec

    doc = read_json_file(args.spec)
    limits = SpecLimits()
    try:
        spec = parse_spec(doc)
        check_declared(spec, limits)  # before importing torch: a bad spec fails fast
        from gradtrace.engine import run_spec  # torch: only now

        trace = run_spec(spec, limits)  # limits (meta dry run), then a dict in TraceDoc's shape
    except Problem as exc:  # the spec's or the engine's: the same report
        err(format_spec_error(args.spec, exc))
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
