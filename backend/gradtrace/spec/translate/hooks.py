"""Registrations on modules and tensors: hooks (``m.register_forward_hook(fn)``, ``x.register_hook``,
…) with the spec's action read from their callable, and ``x.retain_grad()``."""

from __future__ import annotations

import ast
from typing import Any

from ..program import parse_python
from ..vocabulary import MODULE_RETURNS
from .errors import unsupported
from .hook_actions import hook_action
from .state import Translation
from .torch_names import MODULE_HOOK_METHODS, TENSOR_HOOK_METHODS

HOOK_METHODS = {**MODULE_HOOK_METHODS, **TENSOR_HOOK_METHODS}


def register(t: Translation, stmt: ast.stmt, call: ast.Call) -> None:
    """A hook registration or `x.retain_grad()` (the caller has checked it is one of them)."""
    assert isinstance(call.func, ast.Attribute)
    if call.func.attr == "retain_grad":
        return _retain_grad(t, stmt, call)
    method = call.func.attr
    if len(call.args) != 1 or call.keywords:
        raise unsupported(call, f"{method}() takes the hook callable only")
    fn_node = call.args[0]
    if isinstance(fn_node, ast.Name) and fn_node.id in t.broken_defs:
        return None  # a function refused where it was defined
    if isinstance(fn_node, ast.Name) and fn_node.id in t.functions:
        fn: ast.Lambda | ast.FunctionDef = t.functions[fn_node.id]
    elif isinstance(fn_node, ast.Lambda):
        fn = fn_node
    else:
        raise unsupported(fn_node, "a hook is a lambda or a function defined above with def")
    path = t.path_of(call.func.value)
    if path.partition(".")[0] in t.broken:
        return None  # on something refused earlier: reported there
    if method in MODULE_HOOK_METHODS:
        kind = MODULE_HOOK_METHODS[method]
        if t.phase != "setup":
            raise unsupported(
                stmt, "register module hooks before the forward (the spec registers them first)"
            )
        spec = t.module_at(path, call.func.value)
        arity, returns = _call_shape(spec)
        action = hook_action(fn, kind, arity, returns, t.aliases)
        hook: dict[str, Any] = {"type": kind, "module": path}
    else:
        kind = TENSOR_HOOK_METHODS[method]
        ref = _tensor(t, stmt, call.func.value, path)
        if ref is None:
            return None
        action = hook_action(fn, kind, 1, 1, t.aliases)
        hook = {"type": kind, "tensor": ref}
    if action is not None:
        hook["action"] = action
    t.where[f"/hooks/{len(t.hooks)}"] = stmt
    t.hooks.append(hook)
    return None


def _tensor(t: Translation, stmt: ast.stmt, node: ast.expr, path: str) -> str | None:
    """The spec name of a hooked tensor; None when a later forward re-registers a hook it has."""
    root = path.partition(".")[0]
    if root in t.modules:
        t.module_at(path.rpartition(".")[0], node)
        ref = path
    elif "." not in path and path in t.versions:
        ref = t.versions[path]
    else:
        raise unsupported(node, f"{path[:100]!r} is not an input, a parameter or a tensor of the forward")
    leaf = ref in t.inputs or root in t.modules
    if leaf and t.phase != "setup":
        raise unsupported(stmt, "register hooks on inputs and parameters before the forward")
    if not leaf:
        if t.phase == "setup":
            raise unsupported(stmt, f"{path!r} is not defined yet")
        t.note_forward_extra(stmt)
        if ref in t.intermediate_hooks and t.phase == "steps":
            return None
        t.intermediate_hooks.add(ref)
    return ref


def _retain_grad(t: Translation, stmt: ast.stmt, call: ast.Call) -> None:
    assert isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
    name = t.read(call.func.value)
    t.note_forward_extra(stmt)
    if name not in t.retain_grad:
        t.where[f"/retain_grad/{len(t.retain_grad)}"] = stmt
        t.retain_grad.append(name)


def is_registration(call: ast.Call) -> bool:
    """A hook registration, or `name.retain_grad()`."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return False
    if func.attr == "retain_grad":
        return isinstance(func.value, ast.Name) and not call.args and not call.keywords
    return func.attr in HOOK_METHODS


def _call_shape(spec: dict[str, Any]) -> tuple[int, int]:
    """(positional inputs, returned values) of a module's call."""
    if spec["type"] == "Module":
        last = parse_python(spec["forward"][-1]).body[0]
        value = getattr(last, "value", None)
        return len(spec["args"]), len(value.elts) if isinstance(value, ast.Tuple) else 1
    if spec["type"] == "MultiheadAttention":
        return 3, MODULE_RETURNS["MultiheadAttention"]
    return 1, 1
