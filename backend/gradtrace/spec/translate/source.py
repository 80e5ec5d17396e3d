"""The Python a translation reads: its bounds, and its syntax tree parsed within them."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..errors import SpecError
from ..program import parse_python
from .errors import SOURCE_PATH, refusal, unsupported
from .expressions import check_name


@dataclass(frozen=True)
class TranslateLimits:
    """Bounds on the Python a translation reads (checked before anything else)."""

    max_source_bytes: int = 100_000
    max_nodes: int = 20_000  # ast nodes
    max_depth: int = 40  # nesting of ast nodes
    max_literal_elements: int = 100_000  # numbers in tensor literals
    max_loop: int = 20  # iterations of one `for _ in range(n)`
    max_statements: int = 2_000  # statements after loops are unrolled
    # Modules built, counted before each is built: a class instance counts its whole tree, in
    # a class body and at the top level alike, so nested instances (F per class, D deep: F**D)
    # are refused from their count, never copied. The local library's own bound is 2,000.
    max_modules: int = 2_000
    max_int_bits: int = 64  # an integer literal, in any base (Python bounds decimal digits only)
    max_seconds: float = 2.0  # reading the tree, checked at each statement and module built


LIMITS = TranslateLimits()


def limit(node: ast.AST | None, message: str) -> SpecError:
    """A bound passed (413): the translation stops there."""
    return unsupported(node, message, "limit_exceeded")


def parse_source(source: str, limits: TranslateLimits = LIMITS) -> ast.Module:
    """ast.parse within the size, node-count and depth limits (SpecError otherwise).

    A dunder name anywhere refuses the source before anything reads it (every one is listed).
    """
    if not isinstance(source, str):
        raise unsupported(None, "the Python source must be a string")
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > limits.max_source_bytes:
        raise limit(None, f"the source is {size:,} bytes; the limit is {limits.max_source_bytes:,}")
    if "\x00" in source:
        raise unsupported(None, "the source holds a NUL character", "python_syntax")
    try:
        tree = parse_python(source)
    except SyntaxError as exc:
        line = exc.lineno
        col = exc.offset
        where = f"line {line}" + (f", column {col}" if col else "") + ": " if line else ""
        raise SpecError(
            "python_syntax", f"{where}invalid syntax ({exc.msg})", SOURCE_PATH, line, col
        ) from None
    except (RecursionError, MemoryError, ValueError, OverflowError):
        raise limit(None, "the source is nested too deeply") from None
    count = 0
    dunders: list[SpecError] = []
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > limits.max_nodes:
            raise limit(node, f"the source has more than {limits.max_nodes:,} syntax nodes")
        if depth > limits.max_depth:
            raise limit(node, f"the source is nested more than {limits.max_depth} levels deep")
        if isinstance(node, ast.Constant) and type(node.value) is int:
            bits = node.value.bit_length()
            if bits > limits.max_int_bits:
                raise limit(node, f"an integer of {bits:,} bits; the limit is {limits.max_int_bits}")
        name = (
            node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        )
        if name is not None and name != "__init__":
            try:
                check_name(node, name)  # no dunder anywhere: nothing reaches __class__, __import__, …
            except SpecError as exc:
                dunders.append(exc)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    if dunders:
        raise refusal(dunders)
    return tree


def docstring(stmt: ast.stmt) -> str | None:
    """The text of a docstring statement, else None."""
    if (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    ):
        return stmt.value.value
    return None
