"""What every command shares: exit codes, the one usage error, reading a JSON input file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

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


def format_spec_error(source: str, exc: Any) -> str:
    """``FILE: line L, column C: /json/path: code: message`` for a SpecError or TraceError, one
    line per problem when the error carries several (``exc.errors``)."""
    lines = []
    for problem in getattr(exc, "errors", None) or [exc]:
        where = [source]
        line = getattr(problem, "line", None)
        if line is not None:
            column = getattr(problem, "column", None)
            where.append(f"line {line}" + (f", column {column}" if column is not None else ""))
        if getattr(problem, "path", None):
            where.append(problem.path)
        code = getattr(problem, "code", "invalid_spec")
        lines.append(f"{': '.join(where)}: {code}: {getattr(problem, 'message', problem)}")
    return "\n".join(lines)
