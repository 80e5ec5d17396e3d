"""The IR of compiled programs: frozen dataclasses the parser emits and the interpreter runs.

Torch-free. A Program is a tuple of Statements; each Statement assigns (or returns) one Expr.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class Name:
    id: str


@dataclass(frozen=True)
class Const:
    value: int | float | bool | str | None


@dataclass(frozen=True)
class IntTuple:
    """A tuple/list of int constants: a shape or a dims argument."""

    values: tuple[int, ...]


@dataclass(frozen=True)
class TensorList:
    """A list of tensor expressions, the first argument of cat/stack."""

    items: tuple[Expr, ...]


@dataclass(frozen=True)
class TupleExpr:
    """`return a, b` in a Module program."""

    items: tuple[Expr, ...]


@dataclass(frozen=True)
class BinOp:
    op: str  # one of + - * / ** @
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Neg:
    operand: Expr


@dataclass(frozen=True)
class Call:
    """A call of a named module (kind "module") or a whitelisted function (kind "function")."""

    kind: str
    callee: str
    args: tuple[Expr, ...]
    kwargs: tuple[tuple[str, Const | IntTuple], ...] = ()


@dataclass(frozen=True)
class MethodCall:
    obj: Expr
    method: str
    args: tuple[Expr, ...]
    kwargs: tuple[tuple[str, Const | IntTuple], ...] = ()


@dataclass(frozen=True)
class Slice:
    start: int | None
    stop: int | None
    step: int | None


IndexItem = Union[int, Slice, None, "EllipsisType"]


class EllipsisType:
    """`...` inside a subscript."""

    def __repr__(self) -> str:
        return "..."


ELLIPSIS = EllipsisType()


@dataclass(frozen=True)
class Index:
    obj: Expr
    items: tuple[IndexItem, ...]


Expr = Name | Const | IntTuple | TensorList | TupleExpr | BinOp | Neg | Call | MethodCall | Index


@dataclass(frozen=True)
class Statement:
    targets: tuple[str, ...]  # () for `return`
    value: Expr
    is_return: bool
    index: int  # 0-based position in the program's lines
    source: str
    column: int  # 1-based column of the statement
    uses: tuple[str, ...]  # tensor names read, in order of first use
    use_columns: tuple[int, ...] = ()  # 1-based column of each name's first use

    def column_of(self, name: str) -> int:
        for used, column in zip(self.uses, self.use_columns, strict=False):
            if used == name:
                return column
        return self.column


@dataclass(frozen=True)
class Program:
    """A compiled program. ``path`` is the JSON Pointer of its list of lines ("/forward")."""

    statements: tuple[Statement, ...]
    path: str
    owner: str | None = None  # module path for a Module's program; None at top level
    args: tuple[str, ...] = ()
    returns: int | None = 1  # values a Module program returns (None: its `return` line was refused)
    title: str = (
        "forward"  # how messages name the program: "forward", "module f1, forward", "step 2 (forward)"
    )
    # Lines refused while the parser collected every error: they have no statement. What they seem
    # to assign counts as defined, so later lines are not blamed for it (None: a line whose names
    # cannot be read, so no later use is called undefined).
    failed_lines: tuple[int, ...] = ()
    failed_targets: tuple[str, ...] | None = ()

    def label(self) -> str:
        return self.title

    def where(self, index: int, column: int | None = None) -> str:
        text = f"{self.label()} line {index + 1}"
        return text if column is None else f"{text}, column {column}"

    @property
    def assigned(self) -> tuple[str, ...]:
        return tuple(t for s in self.statements for t in s.targets)


@dataclass(frozen=True)
class CalleeInfo:
    """What the parser needs to know about a module it may call (None: unknown, because the
    module's own spec or program has an error; calls to it are then not checked)."""

    type: str
    arity: int | None
    returns: int | None = 1
