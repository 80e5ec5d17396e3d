"""The safe program language: parse forward lines with `ast` against a whitelist into a small IR.

Never eval/exec, never getattr on a user string: every callable is looked up by name in the
vocabulary, every other construct is rejected with "forward line L, column C: …".
"""

from __future__ import annotations

import ast
import math
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from .errors import SpecError, did_you_mean
from .ir import (  # noqa: F401 (re-exported: the IR is part of this module's interface)
    ELLIPSIS,
    BinOp,
    Call,
    CalleeInfo,
    Const,
    EllipsisType,
    Expr,
    Index,
    IndexItem,
    IntTuple,
    MethodCall,
    Name,
    Neg,
    Program,
    Slice,
    Statement,
    TensorList,
    TupleExpr,
)
from .price import CostlyArithmetic, bounded_arithmetic
from .vocabulary import (
    FUNCTIONS,
    METHODS,
    MODULE_CALL_KWARGS,
    OPERATOR_OF_AST,
    OPERATORS,
    STRING_KWARGS,
    Signature,
)

# CPython 3.11's ast.parse is not thread-safe (python/cpython#106905): two specs checked at
# once in the API's threads failed with "SystemError: AST constructor recursion depth
# mismatch" (seen under load in tests/reliability). Parsing a line takes microseconds.
_AST_PARSE = threading.Lock()


def parse_python(source: str) -> ast.Module:
    """``ast.parse(source)`` under the one lock every parse of this package shares."""
    with _AST_PARSE:
        return ast.parse(source, mode="exec")


MAX_EXPRESSION_NODES = 200  # ast nodes per line: bounds recursion in the interpreter


# ---- parser -----------------------------------------------------------------------------------
def signed_number(node: ast.expr) -> tuple[int | float, ast.Constant] | None:
    """(its value, the number's constant) of a number literal with an optional leading ``-``
    or ``+`` (``-2`` is a minus applied to 2 in Python's tree); None for anything else. The one
    constant folder of the spec's parser and the translator."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        sign = -1 if isinstance(node.op, ast.USub) else 1
        node = node.operand
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        return sign * node.value, node
    return None


@dataclass
class _LineParser:
    program_path: str
    label: str
    index: int
    modules: Mapping[str, CalleeInfo]
    uses: list[str] = field(default_factory=list)
    columns: dict[str, int] = field(default_factory=dict)  # name -> 1-based column of first use
    # The value of each number-only sub-expression (``9 ** 9``), by the id of its IR node:
    # the run computes it in Python, so its size is bounded here (spec/price.py).
    numbers: dict[int, int | float] = field(default_factory=dict)

    def fail(self, node: ast.AST | None, message: str, code: str = "program_syntax") -> SpecError:
        column = getattr(node, "col_offset", None)
        column = None if column is None else column + 1
        where = f"{self.label} line {self.index + 1}" + (f", column {column}" if column else "")
        return SpecError(
            code, f"{where}: {message}", f"{self.program_path}/{self.index}", self.index + 1, column
        )

    # expressions
    def expr(self, node: ast.expr) -> Expr:
        if isinstance(node, ast.Name):
            if node.id not in self.uses:
                self.uses.append(node.id)
                self.columns[node.id] = node.col_offset + 1
            return Name(node.id)
        if isinstance(node, ast.Constant):
            return Const(self.number(node))
        if isinstance(node, ast.BinOp):
            op = OPERATOR_OF_AST.get(type(node.op))
            if op is None:
                raise self.fail(
                    node, f"operator {type(node.op).__name__} is not allowed (use {' '.join(OPERATORS)})"
                )
            return self.arithmetic(node, BinOp(op, self.expr(node.left), self.expr(node.right)))
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                folded = self.const_number(node)
                if folded is not None:
                    return Const(folded)
                neg = Neg(self.expr(node.operand))
                value = self.number_of(neg.operand)
                if value is not None:
                    self.numbers[id(neg)] = -value
                return neg
            if isinstance(node.op, ast.UAdd):
                return self.expr(node.operand)
            raise self.fail(node, f"unary operator {type(node.op).__name__} is not allowed")
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Subscript):
            return Index(self.expr(node.value), self.index_items(node.slice))
        if isinstance(node, ast.Attribute):
            raise self.fail(
                node,
                f"attribute access `.{node.attr}` is not allowed (only calls of whitelisted tensor methods, e.g. `.sum()`)",
            )
        if isinstance(node, ast.List | ast.Tuple):
            ints = self.int_tuple(node)
            if ints is None:
                raise self.fail(
                    node,
                    "a list or tuple here must hold int constants (a shape); lists of tensors only as the first argument of cat/stack",
                )
            return ints
        raise self.fail(node, f"{describe_node(node)} is not allowed")

    def number_of(self, expr: Expr) -> int | float | None:
        """The value of a number-only expression (a constant, or arithmetic of them); else None."""
        if isinstance(expr, Const):
            value = expr.value
            return value if isinstance(value, int | float) and not isinstance(value, bool) else None
        return self.numbers.get(id(expr))

    def arithmetic(self, node: ast.BinOp, expr: BinOp) -> BinOp:
        """Arithmetic of two numbers runs in Python: refuse it when its result would be huge."""
        left, right = self.number_of(expr.left), self.number_of(expr.right)
        if left is not None and right is not None:
            try:
                value = bounded_arithmetic(expr.op, left, right)
            except CostlyArithmetic as exc:
                raise self.fail(node, str(exc), "too_costly") from None
            if value is not None:
                self.numbers[id(expr)] = value
        return expr

    def number(self, node: ast.Constant) -> int | float:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(node, f"constant {describe_node(node)} is not allowed here (only numbers)")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(node, "non-finite number constant")
        return value

    def const_number(self, node: ast.expr) -> int | float | None:
        """A number constant, with a leading minus folded in; None if it is not one."""
        found = signed_number(node)
        if found is None:
            return None
        self.number(found[1])  # refuses what a spec may not hold (a non-finite number)
        return found[0]

    def int_tuple(self, node: ast.List | ast.Tuple) -> IntTuple | None:
        values = [self.const_number(item) for item in node.elts]
        if any(not isinstance(v, int) for v in values):
            return None
        return IntTuple(tuple(values))  # type: ignore[arg-type]

    def kwarg(
        self, callee: str, node: ast.keyword, allowed: frozenset[str] | None
    ) -> tuple[str, Const | IntTuple]:
        """``allowed`` None: a module whose spec has an error, so its keywords are not known."""
        if node.arg is None:
            raise self.fail(node.value, "`**kwargs` is not allowed")
        if allowed is not None and node.arg not in allowed:
            names = ", ".join(sorted(allowed)) or "none"
            raise self.fail(node, f"{callee}() takes no keyword argument {node.arg!r} (accepted: {names})")
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            choices = STRING_KWARGS.get(node.arg)
            if choices is None or value.value not in choices:
                hint = f": one of {', '.join(sorted(choices))}" if choices else ""
                raise self.fail(value, f"{node.arg}= does not take this string{hint}")
            return node.arg, Const(value.value)
        if isinstance(value, ast.Constant) and (value.value is None or isinstance(value.value, bool)):
            return node.arg, Const(value.value)
        number = self.const_number(value)
        if number is not None:
            return node.arg, Const(number)
        if isinstance(value, ast.List | ast.Tuple):
            ints = self.int_tuple(value)
            if ints is not None:
                return node.arg, ints
        raise self.fail(value, f"keyword argument {node.arg}= must be a constant")

    def call(self, node: ast.Call) -> Expr:
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                raise self.fail(arg, "`*args` is not allowed")
        if isinstance(node.func, ast.Attribute):
            method = node.func.attr
            sig = METHODS.get(method)
            if sig is None:
                raise self.fail(
                    node.func,
                    f"tensor method .{method}() is not in the whitelist{did_you_mean(method, METHODS)}",
                    "unknown_function",
                )
            self.check_arity(node, f".{method}", sig)
            obj = self.expr(node.func.value)
            args = tuple(self.arg(a) for a in node.args)
            kwargs = tuple(self.kwarg(f".{method}", k, sig.kwargs) for k in node.keywords)
            return MethodCall(obj, method, args, kwargs)
        if not isinstance(node.func, ast.Name):
            raise self.fail(
                node.func,
                f"calling {describe_node(node.func)} is not allowed: only named modules, whitelisted functions and tensor methods can be called",
            )
        name = node.func.id
        module = self.modules.get(name)
        if module is not None:
            allowed = MODULE_CALL_KWARGS.get(module.type, frozenset()) if module.arity is not None else None
            if module.arity is not None and len(node.args) != module.arity:
                raise self.fail(
                    node,
                    f"module {name} ({module.type}) takes {module.arity} positional argument(s), got {len(node.args)}",
                )
            args = tuple(self.arg(a) for a in node.args)
            kwargs = tuple(self.kwarg(name, k, allowed) for k in node.keywords)
            return Call("module", name, args, kwargs)
        sig = FUNCTIONS.get(name)
        if sig is None:
            raise self.fail(
                node.func,
                f"{name!r} is not a module of this program or a whitelisted function"
                + did_you_mean(name, [*self.modules, *FUNCTIONS]),
                "unknown_function",
            )
        self.check_arity(node, name, sig)
        if sig.list_arg:
            first = node.args[0]
            if not isinstance(first, ast.List | ast.Tuple | ast.Name | ast.Call):
                self.expr(first)  # raises its own, more precise error (a comprehension, …)
            if not isinstance(first, ast.List | ast.Tuple) or not first.elts:
                raise self.fail(
                    first, f"{name}() takes a non-empty list of tensors, e.g. {name}([a, b], dim=0)"
                )
            args = (TensorList(tuple(self.expr(e) for e in first.elts)),)
        else:
            args = tuple(self.arg(a) for a in node.args)
        kwargs = tuple(self.kwarg(name, k, sig.kwargs) for k in node.keywords)
        return Call("function", name, args, kwargs)

    def arg(self, node: ast.expr) -> Expr:
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return Const(node.value)
        return self.expr(node)

    def check_arity(self, node: ast.Call, name: str, sig: Signature) -> None:
        n = len(node.args)
        if not sig.min_args <= n <= sig.max_args:
            want = str(sig.min_args) if sig.min_args == sig.max_args else f"{sig.min_args} to {sig.max_args}"
            raise self.fail(node, f"{name}() takes {want} positional argument(s), got {n}")

    def index_items(self, node: ast.expr) -> tuple[IndexItem, ...]:
        parts = node.elts if isinstance(node, ast.Tuple) else [node]
        items: list[IndexItem] = []
        for part in parts:
            if isinstance(part, ast.Slice):
                bounds: list[int | None] = []
                for bound in (part.lower, part.upper, part.step):
                    if bound is None:
                        bounds.append(None)
                        continue
                    value = self.const_number(bound)
                    if not isinstance(value, int):
                        raise self.fail(part, "slice bounds must be int constants")
                    bounds.append(value)
                items.append(Slice(*bounds))
            elif isinstance(part, ast.Constant) and part.value is None:
                items.append(None)
            elif isinstance(part, ast.Constant) and part.value is Ellipsis:
                items.append(ELLIPSIS)
            else:
                value = self.const_number(part)
                if not isinstance(value, int):
                    raise self.fail(
                        part, "subscripts must be int constants or slices of them, e.g. out[0] or h[:, -1]"
                    )
                items.append(value)
        return tuple(items)


def describe_node(node: ast.AST) -> str:
    """A construct's name for a message ("a lambda", "a comprehension", "an f-string", …)."""
    names = {
        ast.Lambda: "a lambda",
        ast.ListComp: "a comprehension",
        ast.DictComp: "a comprehension",
        ast.SetComp: "a comprehension",
        ast.GeneratorExp: "a generator expression",
        ast.Compare: "a comparison",
        ast.BoolOp: "and/or",
        ast.IfExp: "a conditional expression",
        ast.Dict: "a dict",
        ast.Set: "a set",
        ast.JoinedStr: "an f-string",
        ast.Await: "await",
        ast.NamedExpr: "the := operator",
        ast.Starred: "`*` unpacking",
    }
    if isinstance(node, ast.Constant):
        return f"of type {type(node.value).__name__}"
    return names.get(type(node), f"`{type(node).__name__}`")


def _count_nodes(tree: ast.AST) -> int:
    return sum(1 for _ in ast.walk(tree))


def parse_program(
    lines: list[str],
    path: str,
    modules: Mapping[str, CalleeInfo],
    owner: str | None = None,
    args: tuple[str, ...] = (),
    label: str | None = None,
    problems: list[SpecError] | None = None,
) -> Program:
    """Compile program lines. A Module program (owner set) must end in `return <expr>`.

    Without ``problems`` the first refused line raises. With it, each refused line's SpecError
    is appended there and the line is left out (lines are independent until names are
    resolved); the Program records what the refused lines seem to assign.
    """
    statements: list[Statement] = []
    label = label or (f"module {owner}, forward" if owner else "forward")
    returns: int | None = 1
    failed_lines: list[int] = []
    failed_targets: list[str] | None = []
    for index, source in enumerate(lines):
        try:
            stmt = _parse_line(source, index, len(lines), path, label, modules, owner)
        except SpecError as exc:
            if problems is None:
                raise
            problems.append(exc)
            failed_lines.append(index)
            guessed = assigned_names(source)
            if guessed is None or failed_targets is None:
                failed_targets = None
            else:
                failed_targets.extend(guessed)
            if index == len(lines) - 1:
                returns = None  # a refused `return`: how many values it gives is unknown
            continue
        if stmt.is_return and isinstance(stmt.value, TupleExpr):
            returns = len(stmt.value.items)
        statements.append(stmt)
    last_refused = len(lines) - 1 in failed_lines
    if owner is not None and not last_refused and (not statements or not statements[-1].is_return):
        n = len(lines)
        error = SpecError(
            "missing_return",
            f"{label} line {n}: a Module program must end with `return <expr>`",
            f"{path}/{n - 1}",
            n,
            None,
        )
        if problems is None:
            raise error
        problems.append(error)
        failed_lines.append(n - 1)
    return Program(
        tuple(statements),
        path,
        owner,
        args,
        returns,
        label,
        tuple(failed_lines),
        None if failed_targets is None else tuple(failed_targets),
    )


# `a = …` or `a, b = …` at the start of a line that did not compile: the names it assigns.
_ASSIGNED = re.compile(r"\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*,?\s*=(?!=)")


def assigned_names(source: str) -> tuple[str, ...] | None:
    """The names a refused line seems to assign; () for a `return`; None when it cannot be told."""
    if re.match(r"\s*return\b", source):
        return ()
    found = _ASSIGNED.match(source)
    return tuple(n.strip() for n in found.group(1).split(",")) if found else None


def _parse_line(
    source: str,
    index: int,
    count: int,
    path: str,
    label: str,
    modules: Mapping[str, CalleeInfo],
    owner: str | None,
) -> Statement:
    """One program line as a Statement; a refused line raises SpecError naming line and column."""
    parser = _LineParser(path, label, index, modules)
    try:
        tree = parse_python(source)
    except SyntaxError as exc:
        col = exc.offset if exc.offset else None
        msg = (
            f"{label} line {index + 1}" + (f", column {col}" if col else "") + f": invalid syntax ({exc.msg})"
        )
        raise SpecError("program_syntax", msg, f"{path}/{index}", index + 1, col) from None
    except (RecursionError, MemoryError, ValueError):
        raise SpecError(
            "program_syntax",
            f"{label} line {index + 1}: expression too complex",
            f"{path}/{index}",
            index + 1,
        ) from None
    if len(tree.body) != 1:
        raise parser.fail(tree.body[1] if tree.body else None, "one statement per line")
    if _count_nodes(tree) > MAX_EXPRESSION_NODES:
        raise parser.fail(
            tree.body[0],
            f"expression too large (more than {MAX_EXPRESSION_NODES} parts); split it over several lines",
        )
    stmt = tree.body[0]
    if isinstance(stmt, ast.Return):
        if owner is None:
            raise parser.fail(
                stmt,
                "`return` is not allowed in the top-level program (it has no caller); assign instead",
                "return_not_allowed",
            )
        if index != count - 1:
            raise parser.fail(stmt, "`return` must be the last line", "return_not_last")
        if stmt.value is None:
            raise parser.fail(stmt, "`return` needs a value")
        if isinstance(stmt.value, ast.Tuple):
            value: Expr = TupleExpr(tuple(parser.expr(e) for e in stmt.value.elts))
        else:
            value = parser.expr(stmt.value)
        targets: tuple[str, ...] = ()
    else:
        if not isinstance(stmt, ast.Assign):
            hint = (
                " (write `x = x + 1` as a new name, e.g. `x2 = x + 1`)"
                if isinstance(stmt, ast.AugAssign)
                else ""
            )
            raise parser.fail(
                stmt, f"a statement must be an assignment `name = expr`, not {_statement_kind(stmt)}{hint}"
            )
        if len(stmt.targets) != 1:
            raise parser.fail(stmt, "chained assignment `a = b = …` is not allowed")
        targets = _targets(parser, stmt.targets[0])
        value = parser.expr(stmt.value)
        _check_unpacking(parser, stmt, targets, value, modules)
    return Statement(
        targets,
        value,
        isinstance(stmt, ast.Return),
        index,
        source,
        stmt.col_offset + 1,
        tuple(parser.uses),
        tuple(parser.columns[u] for u in parser.uses),
    )


def _statement_kind(stmt: ast.stmt) -> str:
    kinds = {
        ast.Expr: "a bare expression",
        ast.AugAssign: "an augmented assignment",
        ast.Import: "an import",
        ast.ImportFrom: "an import",
        ast.AnnAssign: "an annotated assignment",
        ast.If: "an if",
        ast.For: "a for loop",
        ast.While: "a while loop",
        ast.FunctionDef: "a def",
        ast.ClassDef: "a class",
        ast.With: "a with block",
        ast.Delete: "del",
        ast.Try: "a try",
    }
    return kinds.get(type(stmt), f"`{type(stmt).__name__}`")


def _targets(parser: _LineParser, target: ast.expr) -> tuple[str, ...]:
    if isinstance(target, ast.Name):
        return (target.id,)
    if (
        isinstance(target, ast.Tuple)
        and all(isinstance(t, ast.Name) for t in target.elts)
        and len(target.elts) >= 2
    ):
        names = tuple(t.id for t in target.elts)  # type: ignore[attr-defined]
        if len(set(names)) != len(names):
            raise parser.fail(target, "the same name twice on the left of `=`", "name_conflict")
        return names
    raise parser.fail(
        target, "the left of `=` must be a name or names `a, b` (no subscripts, attributes or starred)"
    )


def _check_unpacking(
    parser: _LineParser,
    stmt: ast.Assign,
    targets: tuple[str, ...],
    value: Expr,
    modules: Mapping[str, CalleeInfo],
) -> None:
    """Catch `a, b = f(x)` against a single-output call before running anything."""
    produced: int | None = None
    if isinstance(value, Call):
        produced = modules[value.callee].returns if value.kind == "module" else 1
    elif isinstance(value, BinOp | Neg | MethodCall | Const):
        produced = 1
    if produced is None:
        return  # not a call, or a module whose error left its outputs unknown
    if produced == 1 and len(targets) > 1:
        raise parser.fail(stmt, f"cannot unpack one tensor into {len(targets)} names")
    if produced > 1 and len(targets) not in (1, produced):
        raise parser.fail(stmt, f"{value.callee} returns {produced} values, not {len(targets)}")  # type: ignore[union-attr]
