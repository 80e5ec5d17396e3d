"""What runs after the first forward: ``backward``, ``torch.autograd.grad``, SGD ``step()``,
``zero_grad()`` / ``x.grad = None`` groups, and later forwards (a rerun of the first, or new lines)."""

from __future__ import annotations

import ast
from typing import Any

from .errors import unsupported
from .expressions import check_name, dotted, number
from .hooks import register
from .layers import has_parameters
from .state import Step, Translation


def optimizer(t: Translation, target: ast.expr, call: ast.Call, func: str) -> None:
    if func != "torch.optim.SGD" or not isinstance(target, ast.Name):
        raise unsupported(
            call, "the spec's optimizer is plain SGD: opt = torch.optim.SGD(model.parameters(), lr=0.1)"
        )
    lr = None
    for kw in call.keywords:
        value = number(kw.value)
        if kw.arg == "lr" and value is not None:
            lr = float(value)
        elif kw.arg in ("momentum", "weight_decay", "dampening") and value == 0:
            continue
        else:
            raise unsupported(kw, "torch.optim.SGD takes lr= here (no momentum or weight decay)")
    if len(call.args) == 2 and lr is None and number(call.args[1]) is not None:
        lr = float(number(call.args[1]))  # type: ignore[arg-type]
    elif len(call.args) != 1:
        raise unsupported(call, "torch.optim.SGD(params, lr=…)")
    if lr is None or lr <= 0:
        raise unsupported(call, "torch.optim.SGD needs a positive lr=")
    covered = _parameter_owners(t, call.args[0])
    missing = [m for m in modules_with_parameters(t) if m not in covered]
    if missing:
        raise unsupported(
            call.args[0], f"the spec's SGD step updates every parameter: include {', '.join(missing)}"
        )
    check_name(target, target.id)
    t.optimizers[target.id] = lr


def _parameter_owners(t: Translation, node: ast.expr) -> set[str]:
    """The top-level modules whose .parameters() an expression lists."""

    def owner(n: ast.expr) -> str:
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "parameters"
            and isinstance(n.func.value, ast.Name)
            and (n.func.value.id in t.modules or n.func.value.id in t.broken)
            and not n.args
        ):
            return n.func.value.id
        raise unsupported(
            n, "parameters are listed as model.parameters() or [*a.parameters(), *b.parameters()]"
        )

    if isinstance(node, ast.List | ast.Tuple):
        return {owner(e.value if isinstance(e, ast.Starred) else e) for e in node.elts}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _parameter_owners(t, node.left) | _parameter_owners(t, node.right)
    if isinstance(node, ast.Call) and dotted(node.func) == "list" and len(node.args) == 1:
        return {owner(node.args[0])}
    return {owner(node)}


def modules_with_parameters(t: Translation) -> list[str]:
    return [name for name, spec in t.modules.items() if has_parameters(spec)]


def add_step(t: Translation, spec: dict[str, Any], node: ast.AST, *, zeroing: bool = False) -> None:
    """``spec`` as the next step; ``zeroing``: it is the zero_grad step ``end_zero`` closes."""
    if not zeroing:
        end_zero(t)
    flush(t)
    if not zeroing:
        t.before_forward(node)
    if t.phase != "setup":
        t.phase = "steps"
    t.where[f"/steps/{len(t.steps)}"] = node
    t.steps.append(Step(spec, node))


def sgd_step(t: Translation, stmt: ast.stmt, call: ast.Call, lr: float) -> None:
    if call.args or call.keywords:
        raise unsupported(call, "step() takes no arguments")
    add_step(t, {"do": "sgd_step", "lr": lr}, stmt)


def backward(t: Translation, stmt: ast.stmt, call: ast.Call, receiver: ast.Name) -> None:
    t.saw_backward = True
    end_zero(t)
    flush(t)
    spec: dict[str, Any] = {"do": "backward", "of": t.read(receiver)}
    if call.args:
        raise unsupported(
            call.args[0], "backward() takes keywords only here (retain_graph=, create_graph=, inputs=)"
        )
    for kw in call.keywords:
        if (
            kw.arg in ("retain_graph", "create_graph")
            and isinstance(kw.value, ast.Constant)
            and isinstance(kw.value.value, bool)
        ):
            spec[kw.arg] = kw.value.value
        elif kw.arg == "inputs":
            spec["inputs"] = _tensor_refs(t, kw.value)
        else:
            raise unsupported(
                kw, "backward() takes retain_graph=True/False, create_graph=True/False and inputs=[…]"
            )
    flush(t)
    add_step(t, spec, stmt)


def _tensor_refs(t: Translation, node: ast.expr) -> list[str]:
    items = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
    refs = []
    for item in items:
        path = t.path_of(item)
        root = path.partition(".")[0]
        if root in t.modules:
            t.module_at(path.rpartition(".")[0], item)
            refs.append(path)
        elif isinstance(item, ast.Name):
            refs.append(t.read(item))
        else:
            raise unsupported(item, f"{path[:100]!r} is not a tensor of this program")
    return refs


def grad_step(t: Translation, stmt: ast.Assign, call: ast.Call) -> None:
    t.saw_backward = True
    target = stmt.targets[0]
    if not isinstance(target, ast.Tuple | ast.List) or not all(isinstance(e, ast.Name) for e in target.elts):
        raise unsupported(
            target,
            "unpack torch.autograd.grad's results into names: gx, gw = torch.autograd.grad(loss, [x, w])",
        )
    if len(call.args) != 2:
        raise unsupported(call, "torch.autograd.grad(outputs, inputs, …) takes two positional arguments")
    flush(t)
    end_zero(t)
    outs = call.args[0]
    of: Any = (
        [_read_name(t, o) for o in outs.elts]
        if isinstance(outs, ast.List | ast.Tuple)
        else _read_name(t, outs)
    )
    spec: dict[str, Any] = {"do": "grad", "of": of, "inputs": _tensor_refs(t, call.args[1])}
    for kw in call.keywords:
        if (
            kw.arg in ("retain_graph", "create_graph", "allow_unused")
            and isinstance(kw.value, ast.Constant)
            and isinstance(kw.value.value, bool)
        ):
            spec[kw.arg] = kw.value.value
        else:
            raise unsupported(
                kw, "torch.autograd.grad takes retain_graph=, create_graph= and allow_unused= (True/False)"
            )
    flush(t)
    end_zero(t)
    spec["as"] = [t.fresh(e.id, e) for e in target.elts if isinstance(e, ast.Name)]
    t.before_forward(stmt)
    add_step(t, spec, stmt)


def _read_name(t: Translation, node: ast.expr) -> str:
    if not isinstance(node, ast.Name):
        raise unsupported(node, "name the output tensor (assign it first)")
    return t.read(node)


def zero_grad(t: Translation, stmt: ast.stmt, call: ast.Call, owner: str) -> None:
    set_to_none = True
    for kw in call.keywords:
        if (
            kw.arg == "set_to_none"
            and isinstance(kw.value, ast.Constant)
            and isinstance(kw.value.value, bool)
        ):
            set_to_none = kw.value.value
        else:
            raise unsupported(kw, "zero_grad() takes set_to_none=True/False")
    if call.args:
        raise unsupported(call, "zero_grad() takes set_to_none= only")
    covered = set(t.modules) if owner in t.optimizers else {owner}
    flush(t)
    if t.zero is None:
        t.zero = {"set_to_none": set_to_none, "covered": set(), "node": stmt}
    elif t.zero["set_to_none"] != set_to_none:
        raise unsupported(stmt, "one zero_grad step has one set_to_none")
    t.zero["covered"] |= covered


def clear_grad(t: Translation, stmt: ast.Assign, target: ast.Attribute) -> None:
    if not (
        isinstance(stmt.value, ast.Constant)
        and stmt.value.value is None
        and isinstance(target.value, ast.Name)
    ):
        raise unsupported(stmt, "only `x.grad = None` (as part of zeroing the gradients) is supported")
    if target.value.id not in t.inputs:
        raise unsupported(
            target, "only an input's .grad is set to None here; zero a model with model.zero_grad()"
        )
    flush(t)
    if t.zero is None:
        t.zero = {"set_to_none": True, "covered": set(), "node": stmt}
    elif not t.zero["set_to_none"]:
        raise unsupported(
            stmt, "with zero_grad(set_to_none=False), the spec zeroes input gradients too; set_to_none=True"
        )
    t.zero["covered"].add(target.value.id)


def end_zero(t: Translation) -> None:
    """Close a zero_grad group: the spec clears every leaf, so the source must too."""
    zero, t.zero = t.zero, None
    if zero is None:
        return
    needed = modules_with_parameters(t) + [
        n for n, s in t.inputs.items() if s.get("requires_grad") and zero["set_to_none"]
    ]
    missing = [n for n in needed if n not in zero["covered"]]
    if missing:
        hints = [f"{n}.grad = None" if n in t.inputs else f"{n}.zero_grad()" for n in missing]
        raise unsupported(
            zero["node"], f"the spec's zero_grad clears every leaf's .grad; add {', '.join(hints)} here"
        )
    spec = {"do": "zero_grad"} if zero["set_to_none"] else {"do": "zero_grad", "set_to_none": False}
    add_step(t, spec, zero["node"], zeroing=True)


def flush(t: Translation) -> None:
    """Close a forward written after the steps began: a rerun of the first, or new lines."""
    block, t.block = t.block, []
    if not block:
        return
    dumps = [ast.dump(s) for s in block]
    if dumps == t.first_forward:
        t.where[f"/steps/{len(t.steps)}"] = block[0]
        t.steps.append(Step({"do": "forward"}, block[0]))
        return
    assigns = [s for s in block if isinstance(s, ast.Assign)]
    if [ast.dump(s) for s in assigns] == [d for d in t.first_forward if d.startswith("Assign(")]:
        raise unsupported(
            block[0],
            "this forward repeats the first one but not its hooks/retain_grad lines: the spec "
            "registers them again on every forward, so repeat them here exactly as there",
        )
    index = len(t.steps)
    lines: list[str] = []
    t.steps.append(Step({"do": "forward", "program": lines}, block[0]))
    t.where[f"/steps/{index}"] = block[0]
    saved_phase, t.phase = t.phase, "block"
    try:
        for stmt in block:
            if isinstance(stmt, ast.Assign):
                t.forward_line(stmt, f"/steps/{index}/program", lines)
            else:
                assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                register(t, stmt, stmt.value)
    finally:
        t.phase = saved_phase
