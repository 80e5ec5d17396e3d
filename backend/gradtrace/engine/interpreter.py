"""Execute compiled programs (gradtrace.spec.program IR) with torch.

The IR was checked at parse time; here every name is looked up in the program's namespace,
every callable in the registries of engine/functions.py. Torch errors become
SpecError(code="forward_error") naming the program line (and module, inside a Module).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from gradtrace.problem import public_text
from gradtrace.spec.errors import SpecError
from gradtrace.spec.ir import (
    ELLIPSIS,
    BinOp,
    Call,
    Const,
    Expr,
    Index,
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

from .functions import FUNCTION_IMPLS, METHOD_IMPLS, OPERATORS

Tensor = torch.Tensor
OnAssign = Callable[[str, Tensor], None]
MAX_ERROR_TEXT = 2000


def source_text(expr: Expr) -> str:
    """An expression written back as program text (for labels: ``d * 5``, ``exp(-x)``)."""
    if isinstance(expr, Name):
        return expr.id
    if isinstance(expr, Const):
        return repr(expr.value)
    if isinstance(expr, IntTuple):
        return repr(expr.values)
    if isinstance(expr, BinOp):
        return f"{source_text(expr.left)} {expr.op} {source_text(expr.right)}"
    if isinstance(expr, Neg):
        return f"-{source_text(expr.operand)}"
    if isinstance(expr, Call | MethodCall):
        args = [source_text(a) for a in expr.args] + [f"{k}={source_text(v)}" for k, v in expr.kwargs]
        head = expr.callee if isinstance(expr, Call) else f"{source_text(expr.obj)}.{expr.method}"
        return f"{head}({', '.join(args)})"
    return "…"


def _evaluate(
    expr: Expr, env: Mapping[str, Any], modules: Mapping[str, nn.Module], label: OnAssign | None = None
) -> Any:
    if isinstance(expr, Name):
        if expr.id not in env:  # only if a caller's env lacks an input the spec declared
            raise NameError(f"{expr.id!r} has no value in this run")
        return env[expr.id]
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, IntTuple):
        return expr.values
    if isinstance(expr, BinOp):
        left, right = _operand(expr.left, env, modules, label), _operand(expr.right, env, modules, label)
        return OPERATORS[expr.op](left, right)
    if isinstance(expr, Neg):
        return -_operand(expr.operand, env, modules, label)
    if isinstance(expr, Call):
        args = [_operand(a, env, modules, label) for a in expr.args]
        kwargs = {k: _evaluate(v, env, modules) for k, v in expr.kwargs}
        fn = modules[expr.callee] if expr.kind == "module" else FUNCTION_IMPLS[expr.callee]
        return fn(*args, **kwargs)
    if isinstance(expr, MethodCall):
        obj = _operand(expr.obj, env, modules, label)
        if not isinstance(obj, Tensor):
            raise TypeError(f".{expr.method}() needs a tensor, got {type(obj).__name__}")
        args = [_operand(a, env, modules, label) for a in expr.args]
        kwargs = {k: _evaluate(v, env, modules) for k, v in expr.kwargs}
        return METHOD_IMPLS[expr.method](obj, *args, **kwargs)
    if isinstance(expr, Index):
        obj = _operand(expr.obj, env, modules, label)
        key = tuple(_index_item(item) for item in expr.items)
        return obj[key[0]] if len(key) == 1 else obj[key]
    if isinstance(expr, TensorList):
        return [_operand(item, env, modules, label) for item in expr.items]
    if isinstance(expr, TupleExpr):
        return tuple(_operand(item, env, modules, label) for item in expr.items)
    raise TypeError(f"unknown IR node {type(expr).__name__}")  # unreachable: the parser emits only these


def _operand(
    expr: Expr, env: Mapping[str, Any], modules: Mapping[str, nn.Module], label: OnAssign | None
) -> Any:
    """A sub-expression's value. A tensor the program computed outside autograd (no grad_fn,
    no grad: e.g. ``d * 5`` of a detached ``d``) enters the graph as a constant leaf: it is
    labelled with its source text, since no name of the program is its own."""
    value = _evaluate(expr, env, modules, label)
    if (
        label is not None
        and not isinstance(expr, Name)
        and isinstance(value, Tensor)
        and value.grad_fn is None
        and not value.requires_grad
    ):
        label(source_text(expr), value)
    return value


def _index_item(item: Any) -> Any:
    if isinstance(item, Slice):
        return slice(item.start, item.stop, item.step)
    if item is ELLIPSIS:
        return Ellipsis
    return item


def _forward_error(program: Program, stmt: Statement, exc: BaseException) -> SpecError:
    text = public_text(str(exc), type(exc).__name__)  # torch's first line, no paths or frames
    if len(text) > MAX_ERROR_TEXT:
        text = text[:MAX_ERROR_TEXT] + "…"
    message = f"{program.where(stmt.index)} (`{stmt.source}`): {text}"
    return SpecError(
        "forward_error", message, f"{program.path}/{stmt.index}", stmt.index + 1, None, type(exc).__name__
    )


def _bind(stmt: Statement, value: Any, env: dict[str, Any], on_assign: OnAssign | None) -> None:
    if len(stmt.targets) == 1:
        pairs = [(stmt.targets[0], value)]
    else:
        if not isinstance(value, tuple | list) or len(value) != len(stmt.targets):
            got = f"{len(value)} values" if isinstance(value, tuple | list) else "one tensor"
            raise ValueError(f"cannot unpack {got} into {len(stmt.targets)} names")
        pairs = list(zip(stmt.targets, value, strict=True))
    for name, item in pairs:
        env[name] = item
        if on_assign is not None and isinstance(item, Tensor):
            on_assign(name, item)


def _execute(
    program: Program,
    env: dict[str, Any],
    modules: Mapping[str, nn.Module],
    on_assign: OnAssign | None,
    on_constant: OnAssign | None = None,
) -> Any:
    for stmt in program.statements:
        try:
            value = _evaluate(stmt.value, env, modules, on_constant)
            if stmt.is_return:
                return value
            _bind(stmt, value, env, on_assign)
        except SpecError:
            raise  # from inside a nested Module: it already names its own line
        except Exception as exc:  # torch's own errors: shape mismatches, dtype clashes, in-place errors
            raise _forward_error(program, stmt, exc) from exc
    return None


def run_program(
    program: Program,
    env: dict[str, Any],
    modules: Mapping[str, nn.Module],
    on_assign: OnAssign | None = None,
    on_constant: OnAssign | None = None,
) -> dict[str, Any]:
    """Run top-level statements in `env` (updated in place and returned).

    on_assign(name, tensor) is called after each assignment of a tensor (a tuple result, e.g.
    MultiheadAttention's, is stored without a call; its items are reported when unpacked).
    on_constant(text, tensor) labels an operand computed without autograd (see _operand).
    """
    _execute(program, env, modules, on_assign, on_constant)
    return env


class ProgramModule(nn.Module):
    """A spec `Module`: a real nn.Module whose forward runs its compiled program on its children.

    Module hooks (forward, full backward, …) work on it exactly as on hand-written modules.
    """

    spec_type = "Module"

    def __init__(self, program: Program) -> None:
        super().__init__()
        self.program = program
        # Set by a recorder that wants the names assigned inside this module's program:
        # called as on_assign(local_name, tensor) on every call of forward.
        self.on_assign: OnAssign | None = None

    def forward(self, *args: Any) -> Any:
        env = dict(zip(self.program.args, args, strict=True))
        return _execute(self.program, env, dict(self.named_children()), self.on_assign)

    def extra_repr(self) -> str:
        return f"args={list(self.program.args)}"
