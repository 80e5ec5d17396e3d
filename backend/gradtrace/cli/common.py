"""What every command shares: exit codes, the one usage error, reading a JSON input file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gradtrace.problem import Problem

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what other Unix tools report when the reader went away


class UsageError(Exception):
    """Bad command line or unreadable input: exit 2 with the message."""


def err(message: str) -> None:
    sys.stderr.write(f"gradtrace: {message}\n")


def _reject_constant(token: str) -> float:
    raise UsageError(f"non-finite number {token} is not valid JSON in a spec")


def read_json_file(path: str) -> Any:
    """Read JSON from a file ('-' is stdin), rejecting NaN/Infinity like the API does."""
    return parse_json(read_input(path), path)


def read_input(path: str) -> bytes:
    """The bytes of a file ('-' is stdin)."""
    try:
        return sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc


def parse_json(data: bytes, path: str) -> Any:
    """JSON in UTF-8 read from ``path``, rejecting NaN/Infinity like the API does."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc


def format_spec_error(source: str, exc: Problem) -> str:
    """``FILE: line L, column C: /json/path: code: message`` for a Problem (the spec's or the
    engine's), one line per problem when it carries several (``exc.errors``)."""
    lines = []
    for problem in exc.errors or (exc,):
        where = [source]
        if problem.line is not None:
            column = problem.column
            where.append(f"line {problem.line}" + (f", column {column}" if column is not None else ""))
        if problem.path:
            where.append(problem.path)
        lines.append(f"{': '.join(where)}: {problem.code}: {problem.message}")
    return "\n".join(lines)
