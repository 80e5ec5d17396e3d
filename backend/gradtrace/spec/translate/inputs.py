"""What a program feeds the model: input tensors, weights copied in under ``torch.no_grad()``, and
the random generator's seed (the spec draws inputs first, then parameters, as engine/build.py)."""

from __future__ import annotations

import ast
import math
from typing import Any

from .errors import unsupported
from .expressions import check_name, number
from .source import limit
from .state import Translation
from .torch_names import DTYPES

INPUT_MAKERS = {"tensor", "randn", "rand", "zeros", "ones", "randint", "arange"}


def is_input(t: Translation, value: ast.Call, func: str | None) -> bool:
    """`torch.randn(…)`, `torch.tensor(…)`, … or one of them reshaped / made to require grad."""
    return func is not None and func.startswith("torch.") and func[6:] in INPUT_MAKERS or _chain(t, value)


def _chain(t: Translation, value: ast.Call) -> bool:
    """`torch.arange(n).reshape(…)` or `torch.randn(…).requires_grad_()`."""
    func = value.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr in ("reshape", "requires_grad_", "view")
        and isinstance(func.value, ast.Call)
        and (t.canonical(func.value.func) or "").removeprefix("torch.") in INPUT_MAKERS
    )


def read_input(t: Translation, stmt: ast.Assign, target: ast.Name, value: ast.Call) -> None:
    name = target.id
    if name in t.inputs or name in t.modules:
        raise unsupported(target, f"{name!r} is already defined")
    spec: dict[str, Any] = {}
    reshape: ast.Call | None = None
    if _chain(t, value):
        assert isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Call)
        if value.func.attr == "requires_grad_":
            if value.args or value.keywords:
                raise unsupported(value, "requires_grad_() takes no arguments here")
            spec["requires_grad"] = True
        else:
            reshape = value
        value = value.func.value
    maker = (t.canonical(value.func) or "").removeprefix("torch.")
    kwargs = {}
    for kw in value.keywords:
        if kw.arg not in ("requires_grad", "dtype"):
            raise unsupported(kw, f"torch.{maker}() takes requires_grad= and dtype= here")
        kwargs[kw.arg] = kw.value
    if "requires_grad" in kwargs:
        flag = kwargs["requires_grad"]
        if not (isinstance(flag, ast.Constant) and isinstance(flag.value, bool)):
            raise unsupported(flag, "requires_grad= must be True or False")
        spec["requires_grad"] = flag.value
    dtype = dtype_of(t, kwargs["dtype"]) if "dtype" in kwargs else None
    if maker == "tensor":
        if len(value.args) != 1:
            raise unsupported(value, "torch.tensor() takes one literal, e.g. torch.tensor([[1.0, 2.0]])")
        literal, integral = read_literal(t, value.args[0])
        spec["value"] = literal
        if dtype is None and integral:
            dtype = "int64"
    else:
        dtype = _drawn(t, stmt, value, maker, reshape, spec, dtype)
    if dtype is not None and dtype != t.dtype:
        spec["dtype"] = dtype
    if spec.get("requires_grad") and (dtype == "int64"):
        raise unsupported(stmt, "only floating point tensors can require grad (write 1.0, not 1)")
    check_name(target, name)
    t.inputs[name] = spec
    t.taken.add(name)
    t.versions[name] = name
    t.where[f"/inputs/{name}"] = stmt


def _drawn(
    t: Translation,
    stmt: ast.Assign,
    value: ast.Call,
    maker: str,
    reshape: ast.Call | None,
    spec: dict[str, Any],
    dtype: str | None,
) -> str | None:
    """A tensor made from a shape (randn, zeros, randint, arange(n).reshape, …): its dtype."""
    args = value.args
    if maker == "randint":
        if len(args) == 3 and number(args[0]) == 0:
            args = args[1:]
        if len(args) != 2 or not isinstance(number(args[0]), int):
            raise unsupported(value, "write torch.randint(high, shape) or torch.randint(0, high, shape)")
        spec["high"] = number(args[0])
        args = args[1:]
        dtype = dtype or "int64"
    if maker == "arange":
        if len(args) != 1 or reshape is None:
            raise unsupported(value, "write torch.arange(n).reshape(shape)")
        n = number(args[0])
        if not isinstance(n, int | float) or n != int(n):
            raise unsupported(args[0], "torch.arange(n) takes a whole number n")
        if dtype is None and isinstance(n, int):
            dtype = "int64"
        shape = _shape(reshape, list(reshape.args))
        if math.prod(shape) != int(n):
            raise unsupported(reshape, f"arange({int(n)}) cannot be reshaped to {shape}")
    else:
        if reshape is not None:
            raise unsupported(reshape, "only torch.arange(n) is reshaped here; give the shape directly")
        shape = _shape(value, list(args))
    spec["shape"] = shape
    spec["init"] = maker
    if maker in ("randn", "rand", "randint"):
        if t.params_drawn is not None:
            raise unsupported(
                stmt,
                f"this input is drawn after parameters were drawn (line {getattr(t.params_drawn, 'lineno', '?')}); "
                "the spec draws every random input first, then the parameters: move it above "
                "that line, or give its values with torch.tensor([...])",
            )
        t.draws_since_seed = True
    return dtype


def dtype_of(t: Translation, node: ast.expr) -> str:
    name = t.canonical(node) or ""
    dtype = DTYPES.get(name.removeprefix("torch."))
    if not name.startswith("torch.") or dtype is None:
        raise unsupported(node, "dtype= takes torch.float32, torch.float64 or torch.int64")
    return dtype


def _shape(node: ast.AST, args: list[ast.expr]) -> list[int]:
    if len(args) == 1 and isinstance(args[0], ast.Tuple | ast.List):
        args = list(args[0].elts)
    dims = [number(a) for a in args]
    if not args or any(not isinstance(d, int) or d < 0 for d in dims):
        raise unsupported(node, "a shape is written as whole numbers, e.g. torch.randn(2, 3)")
    return dims  # type: ignore[return-value]


def read_literal(t: Translation, node: ast.expr) -> tuple[Any, bool]:
    """A nested list of numbers (and whether all are ints), within the literal limit."""
    integral = True

    def walk(n: ast.expr) -> Any:
        nonlocal integral
        if isinstance(n, ast.List | ast.Tuple):
            return [walk(e) for e in n.elts]
        value = number(n)
        if value is None:
            raise unsupported(n, "a tensor literal holds numbers only")
        t.literal_count += 1
        if t.literal_count > t.limits.max_literal_elements:
            raise limit(n, f"more than {t.limits.max_literal_elements:,} numbers in tensor literals")
        integral = integral and isinstance(value, int)
        return value

    return walk(node), integral


def set_weights(t: Translation, stmt: ast.With) -> None:
    """`with torch.no_grad():` lines copying literals into parameters (each refused line noted)."""
    if (
        len(stmt.items) != 1
        or stmt.items[0].optional_vars is not None
        or not isinstance(stmt.items[0].context_expr, ast.Call)
        or t.canonical(stmt.items[0].context_expr.func) != "torch.no_grad"
    ):
        raise unsupported(stmt, "only `with torch.no_grad():` blocks setting weights are supported")
    if t.phase != "setup":
        raise unsupported(
            stmt, "set weights before the forward (the spec sets them when it builds the model)"
        )
    t.read_each(stmt.body, _copy)


def _copy(t: Translation, inner: ast.stmt) -> None:
    call = inner.value if isinstance(inner, ast.Expr) else None
    if not (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "copy_"
        and len(call.args) == 1
        and not call.keywords
        and isinstance(call.args[0], ast.Call)
        and t.canonical(call.args[0].func) == "torch.tensor"
        and len(call.args[0].args) == 1
    ):
        raise unsupported(
            inner, "inside torch.no_grad(): model.layer.weight.copy_(torch.tensor([...])) lines only"
        )
    path = t.path_of(call.func.value)
    module_path, _, param = path.rpartition(".")
    spec = t.module_at(module_path, call.func.value)
    literal, _ = read_literal(t, call.args[0].args[0])
    spec.setdefault("init", {})[param] = literal


def manual_seed(t: Translation, stmt: ast.stmt, call: ast.Call) -> None:
    seed = number(call.args[0]) if len(call.args) == 1 and not call.keywords else None
    if not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise unsupported(call, "torch.manual_seed takes one whole number (0 to 2**63-1)")
    if t.seed is None and not t.draws_since_seed and t.phase == "setup":
        t.seed = seed
        return
    if t.phase == "setup" and seed == t.seed:
        t.draws_since_seed = False  # reseeded for dropout, as the spec's trace does
        return
    raise unsupported(
        stmt,
        "torch.manual_seed is supported once, before anything random is drawn (and again with "
        "the same seed right before the forward when the model uses dropout)",
    )


def check_dropout_seed(t: Translation, stmt: ast.stmt) -> None:
    if t.phase == "forward" and t.first_forward:
        return
    if t.dropout is not None and t.draws_since_seed:
        raise unsupported(
            stmt,
            "dropout draws from torch's global RNG, which the spec seeds afresh before the forward: "
            f"add torch.manual_seed({t.seed or 0}) right before the forward",
        )
