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
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from exc
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc


def format_spec_error(source: str, exc: Any) -> str:
    """``FILE: line L, column C: /json/path: code: message`` for a SpecError or TraceError."""
    where = [source]
    if getattr(exc, "line", None) is not None:
        where.append(f"line {exc.line}" + (f", column {exc.column}" if exc.column is not None else ""))
    if getattr(exc, "path", None):
        where.append(exc.path)
    return f"{': '.join(where)}: {getattr(exc, 'code', 'invalid_spec')}: {getattr(exc, 'message', exc)}"
