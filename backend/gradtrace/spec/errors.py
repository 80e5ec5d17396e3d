"""SpecError: the Problem a bad model spec raises, pointing at the offending field/line."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass

from gradtrace.problem import Problem


class SpecError(Problem):
    """A spec that cannot be accepted: a Problem raised by the validator or the engine (422, 413 for limits).

    ``code`` is machine-readable (``invalid_spec``, ``program_syntax``, ``undefined_name``,
    ``name_conflict``, ``limit_exceeded``, ``forward_error``, …); ``path`` is a JSON Pointer
    into the spec (``/forward/2``, ``""`` for the whole document); ``line``/``column`` are
    1-based positions inside that program line when known; ``exception`` names the torch
    exception class behind a ``forward_error`` ("RuntimeError"). Only the constructor's
    argument order is its own (``exception`` sixth); everything else is Problem's.
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
        super().__init__(code, message, path, line, column, exception=exception)


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


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'Linear'?"`` for the valid name nearest to ``word``, or ``""`` if none is near.

    A name that differs only in case wins over a closer spelling (``linear`` -> ``Linear``).
    """
    names = [c for c in dict.fromkeys(candidates) if c != word]
    folded = [c for c in names if c.lower() == word.lower()]
    # Dotted paths share suffixes (".weight"): only a near twin of the whole path is a suggestion.
    cutoff = 0.8 if "." in word else 0.6
    near = folded or difflib.get_close_matches(word, names, n=1, cutoff=cutoff)
    return f"; did you mean {near[0]!r}?" if near else ""
