"""SpecError: the one exception a bad model spec raises, pointing at the offending field/line."""

from __future__ import annotations

from dataclasses import dataclass


class SpecError(Exception):
    """A spec that cannot be accepted (HTTP 422 material).

    ``code`` is machine-readable (``invalid_spec``, ``program_syntax``, ``undefined_name``,
    ``name_conflict``, ``limit_exceeded``, ``forward_error``, …); ``path`` is a JSON Pointer
    into the spec (``/forward/2``); ``line``/``column`` are 1-based positions inside that
    program line when known. ``str(e) == e.message``; the message never echoes raw input
    beyond short names and the program line the user wrote.
    """

    def __init__(
        self,
        code: str,
        message: str,
        path: str = "",
        line: int | None = None,
        column: int | None = None,
        exception: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.path = path
        self.line = line
        self.column = column
        # For forward_error: the class name of the torch exception behind it ("RuntimeError").
        self.exception = exception
        self.details: list[dict[str, object]] = []  # parse_spec: every validation error, first 20

    def __reduce__(self):  # picklable across worker processes despite the keyword-rich __init__
        state = {"details": self.details}
        return (
            SpecError,
            (self.code, self.message, self.path, self.line, self.column, self.exception),
            state,
        )

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, object]:
        """The error as JSON for an HTTP body."""
        return {
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "column": self.column,
        }


@dataclass(frozen=True)
class SpecWarning:
    """Something harmless but probably unintended (an unused tensor)."""

    code: str
    message: str
    path: str


MAX_POINTER_PART = 100
MAX_POINTER = 1000


def pointer(*parts: object) -> str:
    """JSON Pointer from path parts: pointer("modules", "f1", "forward", 0) -> /modules/f1/forward/0."""
    out = []
    for part in parts:
        text = str(part)
        if len(text) > MAX_POINTER_PART:  # a huge key must not be echoed whole
            text = text[:MAX_POINTER_PART] + "…"
        text = text.replace("~", "~0").replace("/", "~1")
        out.append("/" + text)
    joined = "".join(out)
    return joined if len(joined) <= MAX_POINTER else joined[:MAX_POINTER] + "…"  # absurdly deep documents
