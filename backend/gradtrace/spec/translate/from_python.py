"""PyTorch source -> a model spec, by reading its syntax tree (never by running it).

The subset, top to bottom: imports of torch / torch.nn / torch.nn.functional / torch.optim; an
optional module docstring (its first line is the title, the rest the description); classes
``class Net(nn.Module)`` whose ``__init__`` assigns ``self.name = nn.Layer(literals)`` (and
``nn.Sequential`` of them, and instances of earlier classes) and whose ``forward`` is
assignments ending in ``return``; ``torch.set_default_dtype``; ``torch.manual_seed(n)``; inputs
(``torch.tensor([...])``, ``torch.randn(shape)``, ``rand``, ``zeros``, ``ones``, ``randint``,
``arange(n).reshape(shape)``, with ``requires_grad=True``/``dtype=``); layers and model
instances; ``with torch.no_grad():`` blocks copying literal values into parameters; hook
registrations (module hooks, ``register_hook``, ``register_post_accumulate_grad_hook``) whose
callables return nothing or one of the spec's actions; ``x.retain_grad()``; the forward
(assignments); then ``loss.backward(...)``, ``torch.autograd.grad(...)``, optimizer
``step()``/``zero_grad()``, ``M.zero_grad()``, ``x.grad = None``, further forwards, and
``for _ in range(n):`` loops of these. ``print(...)`` lines are skipped.

This module reads the statements in order and hands each to its reader: classes.py (model
classes), layers.py (layer constructions), inputs.py (tensors, weights, the seed), hooks.py
(registrations), steps.py (backward, grad, optimizer, later forwards). A refused statement is
noted and reading goes on, so one answer lists every refused line (a passed bound stops it).

Random numbers match plain PyTorch: the spec draws inputs first and then parameters in
construction order from one generator seeded like ``torch.manual_seed(seed)`` (see
engine/build.py), so a source that draws in another order is refused, with the line to move.
"""

from __future__ import annotations

import ast
from typing import Any

from ..errors import SpecError
from ..parse import parse_spec
from . import inputs, steps
from .classes import read_class
from .errors import describe, refusal, unsupported
from .expressions import check_name, dotted, number
from .hook_actions import is_print
from .hooks import is_registration, register
from .layers import read_module
from .source import LIMITS, TranslateLimits, docstring, limit, parse_source
from .state import Translation

__all__ = ["LIMITS", "TranslateLimits", "python_to_spec"]

_IMPORTS = {
    "torch": "torch",
    "torch.nn": "torch.nn",
    "torch.nn.functional": "torch.nn.functional",
    "torch.optim": "torch.optim",
}


def python_to_spec(source: str, limits: TranslateLimits = LIMITS) -> dict[str, Any]:
    """The normalised spec of a PyTorch program; SpecError (4xx) listing every line it cannot read.

    The source is parsed with ``ast`` and never run. Errors the spec validator finds in what
    was read (an unknown name, a shape) are reported at the Python line they came from.
    """
    tree = parse_source(source, limits)
    t = Translation(limits)
    try:
        doc = _read(t, tree)
    except RecursionError:
        raise limit(None, "the source is nested too deeply") from None
    try:
        spec = parse_spec(doc)
    except SpecError as exc:
        raise refusal([t.remap(e) for e in (exc.errors or (exc,))]) from None
    return spec.normalized()


def _read(t: Translation, tree: ast.Module) -> dict[str, Any]:
    t.source_names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    body = list(tree.body)
    if body and docstring(body[0]) is not None:
        title, _, rest = (docstring(body.pop(0)) or "").strip("\n").partition("\n\n")
        t.title = title.strip() or None
        t.description = rest.strip() or None
    t.read_each(body, _dispatch)
    try:
        steps.flush(t)
    except SpecError as exc:
        t.refuse(exc, None)
    if not t.forward and not t.errors:
        t.refuse(unsupported(None, "no forward: assign at least one tensor computed from the inputs"), None)
    if not t.steps and not t.saw_backward:
        t.refuse(
            unsupported(None, "nothing runs backward: add loss.backward() or torch.autograd.grad(...)"), None
        )
    if t.errors:
        raise refusal(t.errors)
    return t.document()


def _dispatch(t: Translation, stmt: ast.stmt) -> None:
    if is_print(stmt) or isinstance(stmt, ast.Pass):
        return None
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return _import(t, stmt)
    if isinstance(stmt, ast.ClassDef):
        composite = read_class(t, stmt)
        if composite is None:
            t.broken_defs.add(stmt.name)
        else:
            t.classes[stmt.name] = composite
        return None
    if isinstance(stmt, ast.FunctionDef):
        check_name(stmt, stmt.name)
        if stmt.decorator_list:
            raise unsupported(stmt.decorator_list[0], "decorators are not supported")
        t.functions[stmt.name] = stmt  # a hook, read where it is registered
        return None
    if isinstance(stmt, ast.For):
        return _loop(t, stmt)
    if isinstance(stmt, ast.With):
        return inputs.set_weights(t, stmt)
    if isinstance(stmt, ast.Assign):
        return _assign(t, stmt)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return _call_statement(t, stmt, stmt.value)
    raise unsupported(
        stmt,
        f"{describe(stmt)} is not supported at the top level: write imports, classes, "
        "inputs, layers, hooks, the forward as assignments, and backward/optimizer calls",
    )


def _import(t: Translation, stmt: ast.Import | ast.ImportFrom) -> None:
    if isinstance(stmt, ast.Import):
        pairs = [(a.name, a.asname or a.name.partition(".")[0], a.asname is None) for a in stmt.names]
    else:
        if stmt.level or stmt.module is None:
            raise unsupported(stmt, "relative imports are not supported")
        pairs = [(f"{stmt.module}.{a.name}", a.asname or a.name, False) for a in stmt.names]
    for full, bound, plain in pairs:
        if full not in _IMPORTS:
            raise unsupported(
                stmt,
                f"import of {full[:60]!r} is not supported: import torch, torch.nn (as nn), "
                "torch.nn.functional (as F) or torch.optim",
            )
        check_name(stmt, bound)
        t.aliases[bound] = "torch" if plain else _IMPORTS[full]


def _loop(t: Translation, stmt: ast.For) -> None:
    n = None
    if (
        isinstance(stmt.iter, ast.Call)
        and dotted(stmt.iter.func) == "range"
        and len(stmt.iter.args) == 1
        and not stmt.iter.keywords
    ):
        n = number(stmt.iter.args[0])
    if not isinstance(n, int) or not isinstance(stmt.target, ast.Name) or stmt.orelse:
        raise unsupported(stmt, "only `for _ in range(n):` loops with a number n are supported")
    if n > t.limits.max_loop or n < 0:
        raise limit(stmt, f"a loop of {n} iterations; the limit is {t.limits.max_loop}")
    if any(isinstance(x, ast.Name) and x.id == stmt.target.id for s in stmt.body for x in ast.walk(s)):
        raise unsupported(stmt.target, "the loop variable cannot be used in the loop (the spec has no loops)")
    for _ in range(n):
        t.read_each(stmt.body, _dispatch)


def _assign(t: Translation, stmt: ast.Assign) -> None:
    if len(stmt.targets) != 1:
        raise unsupported(stmt, "chained assignment `a = b = …` is not supported")
    target, value = stmt.targets[0], stmt.value
    if isinstance(target, ast.Attribute) and target.attr == "grad":
        return steps.clear_grad(t, stmt, target)
    if isinstance(value, ast.Call):
        func = t.canonical(value.func)
        if func == "torch.autograd.grad":
            return steps.grad_step(t, stmt, value)
        if func is not None and func.startswith("torch.optim."):
            return steps.optimizer(t, target, value, func)
        if isinstance(target, ast.Name) and t.phase == "setup" and _make(t, stmt, target, value, func):
            return None
        if isinstance(value.func, ast.Attribute) and is_registration(value):
            return _call_statement(t, stmt, value)  # handle = m.register_…_hook(fn)
    if t.phase == "setup" and _plain_value(value):
        raise unsupported(
            value,
            f"{describe(value)} is not supported here: a spec holds tensors, layers, hooks and steps, "
            "not other Python values (such as a device name)",
        )
    if t.phase == "steps":
        steps.end_zero(t)
        t.block.append(stmt)
        return None
    previous, t.phase = t.phase, "forward"
    try:
        inputs.check_dropout_seed(t, stmt)
        t.forward_line(stmt, "/forward", t.forward)
    except SpecError:
        if not t.forward:
            t.phase = previous  # a refused line does not end the set-up
            t.forward_refused = True
        raise
    t.first_forward.append(ast.dump(stmt))
    return None


def _plain_value(value: ast.expr) -> bool:
    """A string, f-string or conditional: set-up values (`device = "cuda" if … else "cpu"`),
    never a tensor of the forward."""
    if isinstance(value, ast.Constant):
        return value.value is None or isinstance(value.value, str | bytes | bool)
    return isinstance(value, ast.IfExp | ast.JoinedStr)


def _make(t: Translation, stmt: ast.Assign, target: ast.Name, value: ast.Call, func: str | None) -> bool:
    """Inputs, layers and model instances; False if `value` is none of them."""
    if inputs.is_input(t, value, func):
        inputs.read_input(t, stmt, target, value)
        return True
    if isinstance(value.func, ast.Name) and value.func.id in t.broken_defs:
        t.recover(stmt)  # an instance of a refused class: that class's lines were reported
        return True
    if not (
        func is not None
        and func.startswith("torch.nn.")
        and not func.startswith("torch.nn.functional.")
        or (isinstance(value.func, ast.Name) and value.func.id in t.classes)
    ):
        return False
    name = target.id
    check_name(target, name)
    if name in t.modules or name in t.inputs:
        raise unsupported(target, f"{name!r} is already defined")
    spec, draws, dropout = read_module(t, value, f"/modules/{name}", t.where)
    t.modules[name] = spec
    t.taken.add(name)
    if dropout:
        t.dropout = t.dropout or value
    if draws:
        t.draws_since_seed = True
        t.params_drawn = t.params_drawn or stmt
    return True


def _call_statement(t: Translation, stmt: ast.stmt, call: ast.Call) -> None:
    func = t.canonical(call.func)
    if func == "torch.manual_seed":
        return inputs.manual_seed(t, stmt, call)
    if func == "torch.set_default_dtype":
        return _default_dtype(t, stmt, call)
    if not isinstance(call.func, ast.Attribute):
        name = repr(call.func.id[:40]) if isinstance(call.func, ast.Name) else describe(call.func)
        raise unsupported(call, f"{name} cannot be called as a statement here")
    method = call.func.attr
    check_name(call.func, method)
    receiver = call.func.value
    if is_registration(call):
        return register(t, stmt, call)
    if method == "backward" and isinstance(receiver, ast.Name):
        return steps.backward(t, stmt, call, receiver)
    if method == "step" and isinstance(receiver, ast.Name) and receiver.id in t.optimizers:
        return steps.sgd_step(t, stmt, call, t.optimizers[receiver.id])
    if (
        method == "zero_grad"
        and isinstance(receiver, ast.Name)
        and (receiver.id in t.optimizers or receiver.id in t.modules)
    ):
        return steps.zero_grad(t, stmt, call, receiver.id)
    if (
        method == "requires_grad_"
        and isinstance(receiver, ast.Name)
        and receiver.id in t.inputs
        and t.phase == "setup"
    ):
        t.inputs[receiver.id]["requires_grad"] = True
        return None
    if isinstance(receiver, ast.Name) and receiver.id in t.broken:
        return None  # a method of something refused earlier: reported there
    raise unsupported(
        stmt,
        f".{method[:40]}() is not supported as a statement: the spec runs hooks, retain_grad(), "
        "backward(), optimizer step()/zero_grad() and model.zero_grad()",
    )


def _default_dtype(t: Translation, stmt: ast.stmt, call: ast.Call) -> None:
    if t.inputs or t.modules or len(call.args) != 1:
        raise unsupported(stmt, "torch.set_default_dtype(torch.float64) goes before any tensor or layer")
    dtype = inputs.dtype_of(t, call.args[0])
    if dtype == "int64":
        raise unsupported(call.args[0], "the default dtype is torch.float32 or torch.float64")
    t.dtype = dtype
