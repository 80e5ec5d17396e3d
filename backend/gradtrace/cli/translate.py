"""``gradtrace translate``: PyTorch source -> spec JSON, or spec JSON -> PyTorch source (no torch)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gradtrace.cli.common import EXIT_INVALID, EXIT_OK, UsageError, err, parse_json, read_input


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "translate",
        help="PyTorch source to a spec, or a spec to PyTorch source",
        description="model.py -> the spec it describes (read with Python's ast, never run); "
        "spec.json -> the plain PyTorch program computing the same gradients. The direction "
        "follows the file's extension (.py or .json); for stdin ('-') give --from.",
    )
    p.add_argument("file", metavar="FILE", help="model.py or spec.json ('-' reads stdin)")
    p.add_argument("--from", dest="source", choices=("python", "spec"), help="what FILE holds")
    p.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(func=run_translate)


def run_translate(args: argparse.Namespace) -> int:
    from gradtrace.spec import SpecError
    from gradtrace.spec.translate import python_to_spec, spec_to_python

    kind = args.source or {".py": "python", ".json": "spec"}.get(Path(args.file).suffix)
    if kind is None:
        raise UsageError(f"{args.file}: name a .py or .json file, or say --from python|spec")
    data = read_input(args.file)
    try:
        if kind == "python":
            try:
                source = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UsageError(f"cannot read {args.file}: {exc}") from exc
            text = json.dumps(python_to_spec(source), indent=2) + "\n"
        else:
            text = spec_to_python(parse_json(data, args.file))
    except SpecError as exc:
        for problem in exc.errors or (exc,):  # every refused line, in source order
            err(f"{args.file}: {problem.code}: {problem.message}")
        return EXIT_INVALID
    if args.output and args.output != "-":
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return EXIT_OK
