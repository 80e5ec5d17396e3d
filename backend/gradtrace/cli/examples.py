"""``gradtrace examples [ID]``: list the built-in examples, or print one's spec."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gradtrace.cli.common import EXIT_OK, EXIT_USAGE, err


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "examples",
        help="list the built-in examples, or print one",
        description="Without ID: list the examples. With ID: print that example's spec.",
    )
    p.add_argument("id", nargs="?", help="an example id from the list")
    p.add_argument("--json", action="store_true", help="list as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from gradtrace.examples import get_example, list_examples

    if args.id:
        try:
            spec = get_example(args.id)
        except KeyError:
            known = ", ".join(e["id"] for e in list_examples())
            err(f"no example {args.id!r}; known: {known}")
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
