"""The Problem a translation raises: where in the Python source, and what is supported instead.

A translation reads on past a line it refuses, so one answer lists every refused line
(``refusal``): the first by position is the error itself, all of them its ``errors``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from ..errors import SpecError
from ..program import describe_node

SOURCE_PATH = "/python"


def unsupported(node: ast.AST | None, message: str, code: str = "unsupported_python") -> SpecError:
    """A SpecError (422; 413 for limit codes) at ``node``'s 1-based line and column."""
    line = getattr(node, "lineno", None)
    col = getattr(node, "col_offset", None)
    column = None if col is None else col + 1
    where = "" if line is None else f"line {line}" + (f", column {column}" if column else "") + ": "
    return SpecError(code, where + message, SOURCE_PATH, line, column)


def refusal(errors: Iterable[SpecError]) -> SpecError:
    """One SpecError for every refused line: each once, in source order (unplaced ones last)."""
    unique: dict[tuple[object, ...], SpecError] = {}
    for err in errors:
        unique.setdefault((err.line, err.column, err.code, err.message), err)
    ordered = sorted(unique.values(), key=lambda e: (e.line is None, e.line or 0, e.column or 0))
    first = ordered[0]
    if len(ordered) == 1:
        return first
    listed = first.with_errors(ordered)
    assert isinstance(listed, SpecError)
    return listed


_STATEMENTS = {
    ast.If: "an if",
    ast.While: "a while loop",
    ast.Try: "a try",
    ast.With: "a with block",
    ast.Global: "global",
    ast.Nonlocal: "nonlocal",
    ast.Delete: "del",
    ast.AugAssign: "an augmented assignment",
    ast.AnnAssign: "an annotated assignment",
    ast.AsyncFunctionDef: "an async def",
    ast.Raise: "raise",
    ast.Assert: "assert",
    ast.Attribute: "an attribute",
}


def describe(node: ast.AST) -> str:
    """A short name for a construct, for messages ("a lambda", "a comprehension", "an if", …)."""
    name = _STATEMENTS.get(type(node))
    if name is not None:
        return name
    if isinstance(node, ast.Constant):
        return f"a constant of type {type(node.value).__name__}"
    return describe_node(node)
