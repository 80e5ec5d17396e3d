"""``class Net(nn.Module)`` -> a composite module: the layers of its ``__init__``, its ``forward``.

Each refused line of a class is noted and reading goes on; a class with any refused line is
itself marked broken (its uses are not reported again), never half-translated.
"""

from __future__ import annotations

import ast
from typing import Any

from ..errors import SpecError
from .errors import unsupported
from .expressions import ExprContext, check_name, convert
from .hook_actions import is_print
from .layers import read_module
from .source import docstring
from .state import Composite, Translation


def read_class(t: Translation, cls: ast.ClassDef) -> Composite | None:
    """The class's translation, or None when a line of it was refused (noted in ``t.errors``)."""
    before = len(t.errors)
    methods = _methods(t, cls)
    where: dict[str, ast.AST] = {}
    modules: dict[str, dict[str, Any]] = {}
    broken: set[str] = set()
    draws = dropout = False
    built = t.built  # what this class's tree counts is what its __init__ builds
    init = methods.get("__init__")
    if init is not None:
        self_name = _self_param(init, 0)
        for i, stmt in enumerate(init.body):
            if i == 0 and docstring(stmt) is not None or _is_super_init(stmt):
                continue
            try:
                name = _child(stmt, self_name)
                if name in modules:
                    raise unsupported(stmt, f"self.{name} is assigned twice")
                assert isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)
                spec, d, p = read_module(t, stmt.value, f"/modules/{name}", where)
            except SpecError as exc:
                t.refuse(exc, None)
                if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Attribute):
                    broken.add(stmt.targets[0].attr)
                continue
            modules[name] = spec
            draws, dropout = draws or d, dropout or p
    args, lines = _forward(t, methods["forward"], modules, broken, where)
    if len(t.errors) > before:
        return None
    return Composite(cls, modules, args, lines, where, draws, dropout, t.built - built)


def _methods(t: Translation, cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    check_name(cls, cls.name)
    if cls.decorator_list:
        raise unsupported(cls.decorator_list[0], "decorators are not supported")
    if cls.keywords or len(cls.bases) != 1 or t.canonical(cls.bases[0]) != "torch.nn.Module":
        raise unsupported(cls, "a model class derives from nn.Module only: class Net(nn.Module)")
    methods: dict[str, ast.FunctionDef] = {}
    for i, stmt in enumerate(cls.body):
        if i == 0 and docstring(stmt) is not None:
            continue
        if (
            not isinstance(stmt, ast.FunctionDef)
            or stmt.name not in ("__init__", "forward")
            or stmt.decorator_list
        ):
            t.refuse(
                unsupported(stmt, "a model class has an __init__ and a forward method, nothing else"), None
            )
            continue
        methods[stmt.name] = stmt
    if "forward" not in methods:
        raise unsupported(cls, f"class {cls.name} has no forward method")
    return methods


def _child(stmt: ast.stmt, self_name: str) -> str:
    """The name of the layer a `self.name = nn.Layer(…)` line assigns."""
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Attribute)
        and isinstance(stmt.targets[0].value, ast.Name)
        and stmt.targets[0].value.id == self_name
        and isinstance(stmt.value, ast.Call)
    ):
        name = stmt.targets[0].attr
        check_name(stmt.targets[0], name)
        return name
    raise unsupported(stmt, "__init__ holds super().__init__() and `self.name = nn.Layer(…)` lines only")


def _forward(
    t: Translation,
    fwd: ast.FunctionDef,
    modules: dict[str, dict[str, Any]],
    broken: set[str],
    where: dict[str, ast.AST],
) -> tuple[list[str], list[str]]:
    """(parameter names, program lines) of the forward; each refused line noted."""
    self_name = _self_param(fwd, 1)
    args = [a.arg for a in fwd.args.args[1:]]
    saved = (t.versions, t.taken, t.broken)
    t.versions, t.taken, t.broken = {}, set(modules), set()
    lines: list[str] = []
    try:
        for a in fwd.args.args[1:]:
            t.fresh(a.arg, a)
        ctx = ExprContext(t.aliases, set(modules) | broken, t.read, self_name=self_name)
        body = [
            s for i, s in enumerate(fwd.body) if not (i == 0 and docstring(s) is not None) and not is_print(s)
        ]
        for i, stmt in enumerate(body):
            try:
                lines.append(_forward_line(t, stmt, ctx, last=i == len(body) - 1))
                where[f"/forward/{len(lines) - 1}"] = stmt
            except SpecError as exc:
                t.refuse(exc, stmt)
                ctx.broken = frozenset(t.broken)
    finally:
        t.versions, t.taken, t.broken = saved
    if not lines or not lines[-1].startswith("return"):
        if not (body and isinstance(body[-1], ast.Return)):
            t.refuse(unsupported(fwd, "forward must end with `return <expression>`"), None)
    return args, lines


def _forward_line(t: Translation, stmt: ast.stmt, ctx: ExprContext, last: bool) -> str:
    if isinstance(stmt, ast.Return) and last and stmt.value is not None:
        return ast.unparse(ast.Return(convert(stmt.value, ctx)))
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        value = convert(stmt.value, ctx)
        new_target = t.assigned(stmt.targets[0])
        return ast.unparse(ast.Assign([new_target], value, lineno=0))
    raise unsupported(stmt, "forward is assignments ending in `return <expression>`")


def _self_param(fn: ast.FunctionDef, min_extra: int) -> str:
    args = fn.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults or args.posonlyargs or not args.args:
        raise unsupported(
            fn, f"{fn.name}(self{', x' if min_extra else ''}) takes plain positional parameters"
        )
    if fn.name == "__init__" and len(args.args) != 1:
        raise unsupported(fn, "__init__ takes self only: write layer sizes as numbers")
    if min_extra and len(args.args) < 2:
        raise unsupported(fn, "forward takes the input tensors after self")
    for a in args.args:
        check_name(a, a.arg)
    return args.args[0].arg


def _is_super_init(stmt: ast.stmt) -> bool:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    func = stmt.value.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "__init__"
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "super"
        and not stmt.value.args
    )
