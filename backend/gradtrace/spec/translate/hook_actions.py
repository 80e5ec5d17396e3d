"""A hook's Python callable -> the spec's declarative action (scale / add / zero / clamp), and back.

A hook may return nothing (it only watches), or the value it sees changed by one action:
``lambda g: g * 2``, ``lambda m, gi, go: (gi[0] * 2,)``,
``lambda m, gi, go: tuple(None if g is None else g.clamp(min=-1) for g in gi)``, and for
``register_post_accumulate_grad_hook`` a ``def`` writing ``p.grad`` in place (``p.grad.mul_(2)``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from .errors import describe, unsupported
from .expressions import check_name, dotted, number
from .torch_names import HOOK_PARAMS

Action = dict[str, Any]
IsVar = Callable[[ast.expr], bool]
_SUPPORTED = (
    "return nothing, or the value changed by one of: v * c, v + c, v - c, torch.zeros_like(v), "
    "v.clamp(min=a, max=b)"
)
_INPLACE = {"mul_": "scale", "add_": "add", "zero_": "zero", "clamp_": "clamp"}


def _is_name(name: str) -> IsVar:
    return lambda node: isinstance(node, ast.Name) and node.id == name


def _is_item(name: str, index: int) -> IsVar:
    return lambda node: (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == name
        and number(node.slice) == index
    )


def _clamp(node: ast.Call, first: int) -> Action:
    bounds: dict[str, float] = {}
    for key, arg in zip(("min", "max"), node.args[first:], strict=False):
        value = number(arg)
        if value is None:
            raise unsupported(arg, f"clamp's {key} must be a number")
        bounds[key] = float(value)
    for kw in node.keywords:
        value = number(kw.value)
        if kw.arg not in ("min", "max") or value is None:
            raise unsupported(kw.value, "clamp takes min= and max= numbers")
        bounds[kw.arg] = float(value)
    if not bounds or len(node.args) - first > 2:
        raise unsupported(node, "clamp needs min and/or max")
    return {"op": "clamp", **bounds}


def action_of(node: ast.expr, is_var: IsVar, aliases: dict[str, str]) -> Action:
    """The action an expression applies to the hook's value (``is_var`` matches that value)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Add | ast.Sub):
        for var, const, flip in ((node.left, node.right, 1), (node.right, node.left, -1)):
            value = number(const)
            if is_var(var) and value is not None:
                if isinstance(node.op, ast.Mult):
                    return {"op": "scale", "by": float(value)}
                if isinstance(node.op, ast.Add):
                    return {"op": "add", "by": float(value)}
                if flip == 1:  # v - c; c - v is not an action
                    return {"op": "add", "by": float(-value)}
    if isinstance(node, ast.Call):
        name = dotted(node.func)
        canonical = None
        if name is not None:
            head, _, rest = name.partition(".")
            canonical = aliases.get(head, head) + ("." + rest if rest else "")
        if (
            canonical == "torch.zeros_like"
            and len(node.args) == 1
            and is_var(node.args[0])
            and not node.keywords
        ):
            return {"op": "zero"}
        if canonical == "torch.clamp" and node.args and is_var(node.args[0]):
            return _clamp(node, 1)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "clamp" and is_var(node.func.value):
            return _clamp(node, 0)
    raise unsupported(node, f"this hook result is not one of the spec's actions: {_SUPPORTED}")


def _params(fn: ast.Lambda | ast.FunctionDef, kind: str) -> list[str]:
    args = fn.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults or args.posonlyargs:
        raise unsupported(fn, "a hook takes plain positional parameters only")
    names = [a.arg for a in args.args]
    for a in args.args:
        check_name(a, a.arg)
    expected = HOOK_PARAMS[kind][0]
    if len(names) != len(expected):
        raise unsupported(
            fn, f"a {kind} hook takes {len(expected)} parameter(s) ({', '.join(expected)}), not {len(names)}"
        )
    return names


def _body_result(fn: ast.FunctionDef) -> ast.expr | ast.stmt | None:
    """The one statement that matters in a def hook: its return value, or an in-place write."""
    result: ast.expr | ast.stmt | None = None
    for i, stmt in enumerate(fn.body):
        if (
            i == 0
            and isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            continue  # docstring
        if isinstance(stmt, ast.Pass) or is_print(stmt):
            continue
        if result is not None:
            raise unsupported(stmt, f"a hook's body has one statement that changes something ({_SUPPORTED})")
        if isinstance(stmt, ast.Return):
            result = stmt.value
        elif isinstance(stmt, ast.Expr):
            result = stmt
        else:
            raise unsupported(stmt, f"{describe(stmt)} is not supported in a hook ({_SUPPORTED})")
    return result


def is_print(stmt: ast.stmt) -> bool:
    """`print(...)`: shown nowhere (the trace has the values), never run."""
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and isinstance(stmt.value.func, ast.Name)
        and stmt.value.func.id == "print"
    )


def hook_action(
    fn: ast.Lambda | ast.FunctionDef, kind: str, arity: int, returns: int, aliases: dict[str, str]
) -> Action | None:
    """The spec action of hook callable ``fn`` of kind ``kind`` (None: it only watches)."""
    params = _params(fn, kind)
    var = params[HOOK_PARAMS[kind][1]]
    if isinstance(fn, ast.Lambda):
        result: ast.expr | ast.stmt | None = fn.body
    else:
        if fn.decorator_list:
            raise unsupported(fn.decorator_list[0], "decorators are not supported")
        result = _body_result(fn)
    if result is None or (isinstance(result, ast.Constant) and result.value is None):
        return None
    if kind == "post_accumulate_grad":
        return _inplace_grad(result, var)
    if isinstance(result, ast.stmt):
        raise unsupported(result, f"this hook must return its result ({_SUPPORTED})")
    if kind == "tensor" or (kind == "forward" and returns == 1):
        return action_of(result, _is_name(var), aliases)
    count = returns if kind == "forward" else arity
    return _tuple_action(result, var, count, kind == "forward_pre", aliases)


def _tuple_action(node: ast.expr, var: str, count: int, single_ok: bool, aliases: dict[str, str]) -> Action:
    if isinstance(node, ast.Tuple):
        if len(node.elts) != count:
            raise unsupported(node, f"this hook's value holds {count} item(s); return a tuple of {count}")
        actions = [action_of(e, _is_item(var, i), aliases) for i, e in enumerate(node.elts)]
        if any(a != actions[0] for a in actions):
            raise unsupported(node, "the spec applies one action to every item: use the same one for each")
        return actions[0]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "tuple"
        and len(node.args) == 1
        and isinstance(node.args[0], ast.GeneratorExp)
    ):
        gen = node.args[0]
        comp = gen.generators[0]
        if (
            len(gen.generators) == 1
            and not comp.ifs
            and not comp.is_async
            and isinstance(comp.target, ast.Name)
            and isinstance(comp.iter, ast.Name)
            and comp.iter.id == var
        ):
            item = comp.target.id
            elt = gen.elt
            if (
                isinstance(elt, ast.IfExp)
                and isinstance(elt.test, ast.Compare)
                and _is_name(item)(elt.test.left)
                and len(elt.test.ops) == 1
                and isinstance(elt.test.ops[0], ast.Is)
                and isinstance(elt.test.comparators[0], ast.Constant)
                and elt.test.comparators[0].value is None
                and isinstance(elt.body, ast.Constant)
                and elt.body.value is None
            ):
                elt = elt.orelse
            return action_of(elt, _is_name(item), aliases)
    if single_ok and count == 1:
        return action_of(node, _is_item(var, 0), aliases)
    raise unsupported(
        node,
        f"return a tuple with the action applied to each item, e.g. ({var}[0] * 2,) or "
        f"tuple(None if g is None else g * 2 for g in {var})",
    )


def _inplace_grad(result: ast.expr | ast.stmt, var: str) -> Action:
    node = result.value if isinstance(result, ast.Expr) else result
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _INPLACE
        and isinstance(node.func.value, ast.Attribute)
        and node.func.value.attr == "grad"
        and _is_name(var)(node.func.value.value)
        and isinstance(result, ast.Expr)
    ):
        op = _INPLACE[node.func.attr]
        if op == "clamp":
            return _clamp(node, 0)
        if op == "zero":
            if node.args or node.keywords:
                raise unsupported(node, "zero_() takes no arguments")
            return {"op": "zero"}
        value = number(node.args[0]) if len(node.args) == 1 and not node.keywords else None
        if value is None:
            raise unsupported(node, f"{node.func.attr}() takes one number here")
        return {"op": op, "by": float(value)}
    raise unsupported(
        result,
        f"a post-accumulate-grad hook returns nothing; to change the gradient write it in place: "
        f"{var}.grad.mul_(c), {var}.grad.add_(c), {var}.grad.zero_() or {var}.grad.clamp_(min=a, max=b)",
    )


def action_python(action: Action, var: str, in_place: bool = False) -> str:
    """Python applying ``action`` to ``var`` (what the engine computes); ``in_place``: the
    statement a post-accumulate-grad hook runs on ``var.grad`` instead."""
    bounds = ", ".join(f"{k}={action[k]!r}" for k in ("min", "max") if action.get(k) is not None)
    by = action.get("by")
    if in_place:
        grad = f"{var}.grad"
        forms = {
            "scale": f"mul_({by!r})",
            "add": f"add_({by!r})",
            "zero": "zero_()",
            "clamp": f"clamp_({bounds})",
        }
        return f"{grad}.{forms[action['op']]}"
    return {
        "scale": f"{var} * {by!r}",
        "add": f"{var} + {by!r}",
        "zero": f"torch.zeros_like({var})",
        "clamp": f"{var}.clamp({bounds})",
    }[action["op"]]
