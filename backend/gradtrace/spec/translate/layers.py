"""Layer constructions -> module specs: ``nn.Linear(2, 3)``, ``nn.Sequential(…)``, ``Net()``."""

from __future__ import annotations

import ast
import copy
from typing import Any

from .errors import describe, unsupported
from .expressions import check_name, dotted, number
from .source import limit
from .state import Translation
from .torch_names import DRAWING_LAYERS, LAYER_POSITIONAL


def read_module(
    t: Translation, call: ast.Call, pointer: str, where: dict[str, ast.AST]
) -> tuple[dict[str, Any], bool, bool]:
    """One layer / Sequential / class instance: (spec, draws from the RNG, uses dropout)."""
    where[pointer] = call
    if isinstance(call.func, ast.Name) and call.func.id in t.classes:
        return _instance(t, call, pointer, where)
    func = t.canonical(call.func) or ""
    kind = func.removeprefix("torch.nn.")
    if not func.startswith("torch.nn.") or (kind not in LAYER_POSITIONAL and kind != "Sequential"):
        raise unsupported(
            call,
            f"{(dotted(call.func) or describe(call.func))[:60]} is not a layer the spec knows: "
            f"nn.{', nn.'.join(sorted([*LAYER_POSITIONAL, 'Sequential']))}, or a class defined above",
        )
    if kind == "Sequential":
        return _sequential(t, call, pointer, where)
    return _layer(t, call, kind)


def _instance(
    t: Translation, call: ast.Call, pointer: str, where: dict[str, ast.AST]
) -> tuple[dict[str, Any], bool, bool]:
    assert isinstance(call.func, ast.Name)
    if call.args or call.keywords:
        raise unsupported(
            call, "model classes take no constructor arguments here: write sizes as numbers in __init__"
        )
    comp = t.classes[call.func.id]
    t.build(call, comp.size)
    for ptr, node in comp.where.items():
        where[pointer + ptr] = node
    spec = {
        "type": "Module",
        "args": comp.args,
        "modules": copy.deepcopy(comp.modules),
        "forward": comp.forward,
    }
    return spec, comp.draws, comp.dropout


def _sequential(
    t: Translation, call: ast.Call, pointer: str, where: dict[str, ast.AST]
) -> tuple[dict[str, Any], bool, bool]:
    if call.keywords or not call.args:
        raise unsupported(call, "nn.Sequential takes layers as positional arguments")
    t.build(call, 1)
    layers, draws, dropout = [], False, False
    for i, arg in enumerate(call.args):
        if not isinstance(arg, ast.Call):
            raise unsupported(arg, "nn.Sequential takes layers constructed in place, e.g. nn.Linear(2, 3)")
        child, d, p = read_module(t, arg, f"{pointer}/layers/{i}", where)
        layers.append(child)
        draws, dropout = draws or d, dropout or p
    return {"type": "Sequential", "layers": layers}, draws, dropout


def _layer(t: Translation, call: ast.Call, kind: str) -> tuple[dict[str, Any], bool, bool]:
    names = LAYER_POSITIONAL[kind]
    if len(call.args) > len(names):
        raise unsupported(
            call, f"nn.{kind} takes at most {len(names)} positional argument(s) here ({', '.join(names)})"
        )
    t.build(call, 1)
    layer: dict[str, Any] = {"type": kind}
    for key, arg in zip(names, call.args, strict=False):
        layer[key] = layer_arg(arg)
    for kw in call.keywords:
        if kw.arg is None:
            raise unsupported(kw.value, "`**kwargs` is not supported")
        check_name(kw, kw.arg)
        val = layer_arg(kw.value)
        if (kind, kw.arg) in (("MultiheadAttention", "dropout"), ("ReLU", "inplace")) and not val:
            continue  # the default, written out
        if kw.arg in ("type", "init"):
            raise unsupported(kw, f"nn.{kind} takes no argument {kw.arg!r}")
        layer[kw.arg] = val
    dropout = kind == "Dropout" and layer.get("p", 0.5) != 0
    return layer, kind in DRAWING_LAYERS, dropout


def layer_arg(node: ast.expr) -> Any:
    value = _size(node)
    if value is not None:
        return value
    if isinstance(node, ast.Constant) and isinstance(node.value, bool | str):
        return node.value
    if isinstance(node, ast.Tuple | ast.List):
        items = [number(e) for e in node.elts]
        if all(isinstance(i, int) for i in items) and len(items) <= 8:
            return items
    raise unsupported(
        node, "layer arguments are written as numbers, True/False, strings or tuples of numbers"
    )


def has_parameters(spec: dict[str, Any]) -> bool:
    kind = spec.get("type")
    if kind == "Sequential":
        return any(has_parameters(layer) for layer in spec["layers"])
    if kind == "Module":
        return any(has_parameters(child) for child in spec["modules"].values())
    if kind == "LayerNorm":
        return spec.get("elementwise_affine", True) is not False
    if kind == "BatchNorm1d":
        return spec.get("affine", True) is not False
    return kind in DRAWING_LAYERS


_SIZE_OPS = {
    ast.Add: int.__add__,
    ast.Sub: int.__sub__,
    ast.Mult: int.__mul__,
    ast.FloorDiv: int.__floordiv__,
}


def _size(node: ast.expr, depth: int = 0) -> int | float | None:
    """A number, or whole-number arithmetic of numbers (`2 * 4 * 4`), folded; else None."""
    value = number(node)
    if value is not None or depth > 8 or not isinstance(node, ast.BinOp):
        return value
    op = _SIZE_OPS.get(type(node.op))
    left, right = _size(node.left, depth + 1), _size(node.right, depth + 1)
    if (
        op is None
        or not isinstance(left, int)
        or not isinstance(right, int)
        or (right == 0 and op is int.__floordiv__)
    ):
        return None
    result = op(left, right)
    if abs(result) > 2**31:
        raise limit(node, "a layer size over 2**31")
    return result
