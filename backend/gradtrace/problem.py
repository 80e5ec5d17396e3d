"""Problem: the one error type, from the spec validator, the engine or a worker to the HTTP envelope.

A Problem is raised where the failure is found and travels unchanged: pickled back from a
worker process, caught once by the API's handler and written as ``{"error": {...}}``. It
carries everything the envelope says (``code``, ``message``, ``path``, ``line``, ``column``)
and the HTTP ``status`` that fits it; ``errors`` lists every problem found when a validator
reports several at once (the first is the Problem itself). This module imports nothing of
gradtrace: every layer may raise one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# Codes that mean "too big": answered 413, every other spec or engine code 422.
TOO_LARGE_CODES = frozenset(
    {"limit_exceeded", "too_many_nodes", "too_large", "memory_limit", "too_deep", "too_costly"}
)
MAX_LISTED_ERRORS = 20


# What only the server should see in an error text: a C++ stack trace (torch's c10 errors carry
# one, with the load address of every library), absolute file paths, memory addresses.
_NATIVE_TRACE = re.compile(r"\s*(?:Exception raised from |frame #\d+: |\(most recent call first\)).*", re.S)
_FILE_PATH = re.compile(r"(?<![\w.])(?:[A-Za-z]:)?(?:[/\\][\w.@+~-]+){2,}[/\\]?")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{5,}\b")


def public_text(text: str, fallback: str = "error") -> str:
    """An error text from a library (PyTorch, Node) as a client may see it: its first line,
    with C++ frames, file paths and memory addresses removed. ``fallback`` if nothing is left."""
    text = _NATIVE_TRACE.sub("", text).strip()
    first = text.split("\n", 1)[0].strip()
    first = _ADDRESS.sub("<address>", _FILE_PATH.sub("<path>", first))
    return first or fallback


def default_status(code: str) -> int:
    return 413 if code in TOO_LARGE_CODES else 422


class Problem(Exception):
    """A request that cannot be answered as asked: ``str(p) == p.message``.

    ``path`` is a JSON Pointer into the request (``/forward/2``; ``None`` when no field is to
    blame); ``line``/``column`` are 1-based positions inside a program line when known;
    ``status`` defaults from the code (413 for limits, else 422). ``exception`` names the
    Python/torch exception class behind a forward or build error; ``headers`` are HTTP headers
    the answer needs (``Retry-After``, ``Allow``). Messages never echo raw input beyond short
    names and the program line the user wrote.
    """

    def __init__(
        self,
        code: str,
        message: str,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        status: int | None = None,
        *,
        exception: str | None = None,
        errors: Iterable[Problem] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.path = path
        self.line = line
        self.column = column
        self.status = status if status is not None else default_status(code)
        self.exception = exception
        self.errors: tuple[Problem, ...] = tuple(errors)[:MAX_LISTED_ERRORS]
        self.headers: dict[str, str] = dict(headers or {})

    def __reduce__(self) -> tuple[Any, ...]:
        # Exception pickles only ``args``; keep every field across the worker boundary. The
        # class is rebuilt through Problem's own constructor, so subclasses pickle too.
        return (_rebuild, (type(self), self._fields()))

    def _fields(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "status": self.status,
            "exception": self.exception,
            "errors": self.errors,
            "headers": self.headers,
        }

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r}, path={self.path!r}, status={self.status})"

    def with_errors(self, errors: Iterable[Problem]) -> Problem:
        """This problem (the first) with the full list of what was found attached.

        The list holds a copy of this problem without a list of its own, so it stays a tree
        (pickle cannot rebuild an object that contains itself through its constructor).
        """
        alone = _rebuild(type(self), {**self._fields(), "errors": ()})
        self.errors = tuple(alone if e is self else e for e in errors)[:MAX_LISTED_ERRORS]
        return self

    def item(self) -> dict[str, Any]:
        """One problem as JSON: code, message, path, and line/column when known."""
        out: dict[str, Any] = {"code": self.code, "message": self.message, "path": self.path or None}
        if self.line is not None:
            out["line"] = self.line
        if self.column is not None:
            out["column"] = self.column
        return out

    def to_dict(self) -> dict[str, Any]:
        """The body of the error envelope: the first problem's fields, then ``errors`` (all of them)."""
        out = self.item()
        if self.errors:
            out["errors"] = [e.item() for e in self.errors]
        return out


def _rebuild(cls: type[Problem], fields: dict[str, Any]) -> Problem:
    problem = Problem.__new__(cls)
    Problem.__init__(problem, **fields)
    return problem
