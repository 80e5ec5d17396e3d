"""Python expressions of a forward -> the spec's program expressions, by rebuilding the AST.

Only what the spec's program language has is rebuilt (names, numbers, + - * / ** @, calls of the
model's modules, torch/F functions and tensor methods of the vocabulary, subscripts); anything
else is refused here, at its line and column, before the spec validator sees the line.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from ..program import signed_number
from ..vocabulary import FUNCTIONS, METHODS, OPERATOR_OF_AST
from .errors import describe, unsupported
from .torch_names import F_NAMES, FUNCTION_KEYWORDS, METHOD_KEYWORDS, TORCH_NAMES

FUNCTIONAL = "torch.nn.functional"


def dotted(node: ast.expr) -> str | None:
    """`a.b.c` as "a.b.c" (names and attributes only), else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def check_name(node: ast.AST, name: str) -> None:
    if name.startswith("__") or name.endswith("__"):
        raise unsupported(node, f"dunder names such as {name[:40]!r} are not supported")


@dataclass
class ExprContext:
    """What names mean where an expression is translated."""

    aliases: dict[str, str]  # imported name -> "torch" | "torch.nn" | "torch.nn.functional" | …
    modules: set[str]  # names callable as modules here (top-level modules, or a class's children)
    rename: Callable[[ast.Name], str]  # a tensor name as read -> its spec name
    self_name: str | None = None  # "self" inside a class's forward
    extra_calls: dict[str, str] = field(default_factory=dict)
    broken: frozenset[str] = frozenset()  # names whose refused definition was already reported

    def canonical(self, name: str) -> str:
        head, _, rest = name.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return name
        return base + ("." + rest if rest else "")


def convert(node: ast.expr, ctx: ExprContext) -> ast.expr:
    """The spec's form of one Python expression (a new tree; the input is not changed)."""
    if isinstance(node, ast.Name):
        check_name(node, node.id)
        if node.id in ctx.aliases:
            raise unsupported(node, f"{node.id!r} is a module of torch; call one of its functions")
        if node.id in ctx.broken:
            return ast.Name(node.id, ast.Load())
        if node.id in ctx.modules:
            raise unsupported(node, f"module {node.id!r} can only be called, e.g. {node.id}(x)")
        return ast.Name(ctx.rename(node), ast.Load())
    if isinstance(node, ast.Constant):
        if isinstance(node.value, int | float | bool | str) or node.value is None or node.value is Ellipsis:
            return ast.Constant(node.value)
        raise unsupported(node, f"{describe(node)} is not supported (numbers only)")
    if isinstance(node, ast.BinOp):
        if not isinstance(node.op, tuple(OPERATOR_OF_AST)):
            raise unsupported(node, f"operator {type(node.op).__name__} is not supported (use + - * / ** @)")
        return ast.BinOp(convert(node.left, ctx), node.op, convert(node.right, ctx))
    if isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, ast.USub | ast.UAdd):
            raise unsupported(node, f"unary operator {type(node.op).__name__} is not supported (only -x)")
        return ast.UnaryOp(node.op, convert(node.operand, ctx))
    if isinstance(node, ast.Call):
        return _call(node, ctx)
    if isinstance(node, ast.Subscript):
        return ast.Subscript(convert(node.value, ctx), _index(node.slice, ctx), ast.Load())
    if isinstance(node, ast.List | ast.Tuple):
        elts = [convert(e, ctx) for e in node.elts]
        return ast.List(elts, ast.Load()) if isinstance(node, ast.List) else ast.Tuple(elts, ast.Load())
    if isinstance(node, ast.Attribute):
        check_name(node, node.attr)
        hint = (
            "sizes must be written as numbers (e.g. x.view(-1, 16) or x.flatten(1))"
            if node.attr in ("shape", "size")
            else "only calls of torch/F functions, the model's layers and tensor methods such as .sum()"
        )
        raise unsupported(node, f"attribute access `.{node.attr}` is not supported here: {hint}")
    raise unsupported(node, f"{describe(node)} is not supported in a forward")


def _index(node: ast.expr, ctx: ExprContext) -> ast.expr:
    if isinstance(node, ast.Slice):
        parts = [None if b is None else convert(b, ctx) for b in (node.lower, node.upper, node.step)]
        return ast.Slice(*parts)
    if isinstance(node, ast.Tuple):
        return ast.Tuple([_index(e, ctx) for e in node.elts], ast.Load())
    return convert(node, ctx)


def _keywords(node: ast.Call, ctx: ExprContext) -> list[ast.keyword]:
    out = []
    for kw in node.keywords:
        if kw.arg is None:
            raise unsupported(kw.value, "`**kwargs` is not supported")
        check_name(kw, kw.arg)
        out.append(ast.keyword(kw.arg, convert(kw.value, ctx)))
    return out


def _positional(node: ast.Call, ctx: ExprContext, max_args: int, names: tuple[str, ...]) -> tuple[list, list]:
    """Arguments, with those beyond what the spec takes positionally moved to their keywords."""
    for arg in node.args:
        if isinstance(arg, ast.Starred):
            raise unsupported(arg, "`*args` is not supported")
    args = [convert(a, ctx) for a in node.args]
    keywords = _keywords(node, ctx)
    extra = args[max_args:]
    if extra and len(extra) <= len(names):
        args = args[:max_args]
        keywords = [ast.keyword(names[i], value) for i, value in enumerate(extra)] + keywords
    return args, keywords


def _call(node: ast.Call, ctx: ExprContext) -> ast.expr:
    func = node.func
    if isinstance(func, ast.Name):
        check_name(func, func.id)
        if func.id in ctx.modules or func.id in ctx.broken:
            args, keywords = _positional(node, ctx, len(node.args), ())
            return ast.Call(ast.Name(func.id, ast.Load()), args, keywords)
        raise unsupported(
            func,
            f"calling {func.id!r} is not supported: call a layer of the model, a torch/F function "
            "the spec knows (e.g. F.relu, torch.tanh) or a tensor method",
            "unknown_function",
        )
    if isinstance(func, ast.Call):
        _call(func, ctx)  # its own, more precise error (getattr(x, "sum")(), …)
    if not isinstance(func, ast.Attribute):
        raise unsupported(func, f"calling {describe(func)} is not supported")
    check_name(func, func.attr)
    name = dotted(func)
    if name is not None:
        head, _, rest = name.partition(".")
        if ctx.self_name is not None and head == ctx.self_name:
            if rest not in ctx.modules:
                raise unsupported(
                    func,
                    f"self.{rest[:40]} is not a layer assigned in __init__ (layers: {', '.join(sorted(ctx.modules)) or 'none'})",
                )
            args, keywords = _positional(node, ctx, len(node.args), ())
            return ast.Call(ast.Name(rest, ast.Load()), args, keywords)
        canonical = ctx.canonical(name)
        home, _, fn = canonical.rpartition(".")
        if home in ("torch", FUNCTIONAL) and head in ctx.aliases:
            known = TORCH_NAMES if home == "torch" else F_NAMES
            if fn not in known:
                where = "torch" if home == "torch" else "F"
                raise unsupported(
                    func,
                    f"{where}.{fn[:40]} is not supported: the spec knows {', '.join(sorted(known))}",
                    "unknown_function",
                )
            sig = FUNCTIONS[fn]
            args, keywords = _positional(node, ctx, sig.max_args, FUNCTION_KEYWORDS.get(fn, ()))
            if sig.list_arg and args and isinstance(args[0], ast.Tuple):
                args[0] = ast.List(args[0].elts, ast.Load())
            return ast.Call(ast.Name(fn, ast.Load()), args, keywords)
        if head in ctx.aliases:
            raise unsupported(func, f"{name[:60]} is not supported in a forward", "unknown_function")
    method = func.attr
    method_sig = METHODS.get(method)
    if method_sig is None:
        at_name = ast.Name(
            method, lineno=func.end_lineno or func.lineno, col_offset=(func.end_col_offset or 0) - len(method)
        )
        raise unsupported(
            at_name,  # the method's own name, not the start of the expression it is called on
            f"tensor method .{method[:40]}() is not supported: the spec knows {', '.join(sorted(METHODS))}",
            "unknown_function",
        )
    receiver = convert(func.value, ctx)
    args, keywords = _positional(node, ctx, method_sig.max_args, METHOD_KEYWORDS.get(method, ()))
    return ast.Call(ast.Attribute(receiver, method, ast.Load()), args, keywords)


def number(node: ast.expr) -> int | float | None:
    """A number constant (a leading minus folded in), or None."""
    found = signed_number(node)
    return None if found is None else found[0]
