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

Random numbers match plain PyTorch: the spec draws inputs first and then parameters in
construction order from one generator seeded like ``torch.manual_seed(seed)`` (see
engine/build.py), so a source that draws in another order is refused, with the line to move.
"""

from __future__ import annotations

import ast
import copy
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecError
from ..models import DEFAULT_TITLE
from ..parse import parse_spec
from ..program import _AST_PARSE
from ..vocabulary import MODULE_RETURNS
from .errors import describe, unsupported
from .expressions import ExprContext, check_name, convert, dotted, number
from .hook_actions import hook_action, is_print
from .torch_names import (
    DRAWING_LAYERS,
    DTYPES,
    LAYER_POSITIONAL,
    MODULE_HOOK_METHODS,
    TENSOR_HOOK_METHODS,
)


@dataclass(frozen=True)
class TranslateLimits:
    """Bounds on the Python a translation reads (checked before anything else)."""

    max_source_bytes: int = 100_000
    max_nodes: int = 20_000  # ast nodes
    max_depth: int = 40  # nesting of ast nodes
    max_literal_elements: int = 100_000  # numbers in tensor literals
    max_loop: int = 20  # iterations of one `for _ in range(n)`
    max_statements: int = 2_000  # statements after loops are unrolled
    # Modules built, counted before each is built: a class instance counts its whole tree, in
    # a class body and at the top level alike, so nested instances (F per class, D deep: F**D)
    # are refused from their count, never copied. The local library's own bound is 2,000.
    max_modules: int = 2_000
    max_int_bits: int = 64  # an integer literal, in any base (Python bounds decimal digits only)
    max_seconds: float = 2.0  # reading the tree, checked at each statement and module built


LIMITS = TranslateLimits()
_IMPORTS = {
    "torch": "torch",
    "torch.nn": "torch.nn",
    "torch.nn.functional": "torch.nn.functional",
    "torch.optim": "torch.optim",
}
_INPUT_MAKERS = {"tensor", "randn", "rand", "zeros", "ones", "randint", "arange"}


def _limit(node: ast.AST | None, message: str) -> SpecError:
    return unsupported(node, message, "limit_exceeded")


def parse_source(source: str, limits: TranslateLimits = LIMITS) -> ast.Module:
    """ast.parse within the size, node-count and depth limits (SpecError otherwise)."""
    if not isinstance(source, str):
        raise unsupported(None, "the Python source must be a string")
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > limits.max_source_bytes:
        raise _limit(None, f"the source is {size:,} bytes; the limit is {limits.max_source_bytes:,}")
    if "\x00" in source:
        raise unsupported(None, "the source holds a NUL character", "python_syntax")
    try:
        with _AST_PARSE:
            tree = ast.parse(source, mode="exec")
    except SyntaxError as exc:
        line = exc.lineno
        col = exc.offset
        where = f"line {line}" + (f", column {col}" if col else "") + ": " if line else ""
        raise SpecError("python_syntax", f"{where}invalid syntax ({exc.msg})", "/python", line, col) from None
    except (RecursionError, MemoryError, ValueError, OverflowError):
        raise _limit(None, "the source is nested too deeply") from None
    count = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > limits.max_nodes:
            raise _limit(node, f"the source has more than {limits.max_nodes:,} syntax nodes")
        if depth > limits.max_depth:
            raise _limit(node, f"the source is nested more than {limits.max_depth} levels deep")
        if isinstance(node, ast.Constant) and type(node.value) is int:
            bits = node.value.bit_length()
            if bits > limits.max_int_bits:
                raise _limit(node, f"an integer of {bits:,} bits; the limit is {limits.max_int_bits}")
        name = (
            node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        )
        if name is not None and name != "__init__":
            check_name(node, name)  # no dunder anywhere: nothing reaches __class__, __import__, …
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree


@dataclass
class _Composite:
    """A class's translation: its children, arguments and forward lines (with their lines)."""

    node: ast.ClassDef
    modules: dict[str, dict[str, Any]]
    args: list[str]
    forward: list[str]
    where: dict[str, ast.AST]  # pointer relative to the module -> source node
    draws: bool
    dropout: bool
    size: int  # modules in one instance's tree (its layers, nested instances' trees)


@dataclass
class _Step:
    spec: dict[str, Any]
    node: ast.AST


@dataclass
class _Translator:
    limits: TranslateLimits
    aliases: dict[str, str] = field(default_factory=dict)
    classes: dict[str, _Composite] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    title: str | None = None
    description: str | None = None
    seed: int | None = None
    seed_node: ast.AST | None = None
    dtype: str = "float32"
    modules: dict[str, dict[str, Any]] = field(default_factory=dict)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    forward: list[str] = field(default_factory=list)
    hooks: list[dict[str, Any]] = field(default_factory=list)
    retain_grad: list[str] = field(default_factory=list)
    steps: list[_Step] = field(default_factory=list)
    where: dict[str, ast.AST] = field(default_factory=dict)  # spec pointer -> source node
    phase: str = "setup"  # setup -> forward -> steps
    draws_since_seed: bool = False
    params_drawn: ast.AST | None = None  # the first construction that drew from the RNG
    dropout: ast.AST | None = None
    literal_count: int = 0
    statements: int = 0
    built: int = 0  # modules built so far (see TranslateLimits.max_modules)
    started: float = field(default_factory=time.monotonic)
    versions: dict[str, str] = field(default_factory=dict)  # python name -> current spec name
    taken: set[str] = field(default_factory=set)  # every spec name given out
    source_names: set[str] = field(default_factory=set)
    first_forward: list[str] = field(default_factory=list)  # ast.dump of the first forward's lines
    block: list[ast.stmt] = field(default_factory=list)  # a later forward being collected
    zero: dict[str, Any] | None = None  # a zero_grad group being collected
    optimizers: dict[str, float] = field(default_factory=dict)
    intermediate_hooks: set[str] = field(default_factory=set)

    # ---- entry ---------------------------------------------------------------------------
    def run(self, tree: ast.Module) -> dict[str, Any]:
        self.source_names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        body = list(tree.body)
        if body and _docstring(body[0]) is not None:
            self._docstring(body.pop(0))
        for stmt in body:
            self.statement(stmt)
        self.flush()
        if not self.forward:
            raise unsupported(None, "no forward: assign at least one tensor computed from the inputs")
        if not self.steps:
            raise unsupported(None, "nothing runs backward: add loss.backward() or torch.autograd.grad(...)")
        return self.document()

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"spec_version": 1, "title": self.title or DEFAULT_TITLE}
        if self.description:
            doc["description"] = self.description
        doc.update(seed=self.seed or 0, dtype=self.dtype, modules=self.modules, inputs=self.inputs)
        doc["forward"] = self.forward
        if self.hooks:
            doc["hooks"] = self.hooks
        if self.retain_grad:
            doc["retain_grad"] = self.retain_grad
        doc["steps"] = [s.spec for s in self.steps]
        return doc

    def _docstring(self, stmt: ast.stmt) -> None:
        text = _docstring(stmt) or ""
        title, _, rest = text.strip("\n").partition("\n\n")
        self.title = title.strip() or None
        self.description = rest.strip() or None

    def count(self, node: ast.AST) -> None:
        self.statements += 1
        if self.statements > self.limits.max_statements:
            raise _limit(node, f"more than {self.limits.max_statements:,} statements run (loops unrolled)")
        self.in_time(node)

    def in_time(self, node: ast.AST) -> None:
        if time.monotonic() - self.started > self.limits.max_seconds:
            raise _limit(node, f"reading the source took over {self.limits.max_seconds:g} s; simplify it")

    def build(self, node: ast.AST, modules: int) -> None:
        """Count ``modules`` about to be built, refusing before building past the limit."""
        self.built += modules
        if self.built > self.limits.max_modules:
            raise _limit(
                node,
                f"this builds {self.built:,} modules so far (each instance of a class counts its "
                f"whole tree); the limit is {self.limits.max_modules:,}",
            )
        self.in_time(node)

    # ---- statements ----------------------------------------------------------------------
    def statement(self, stmt: ast.stmt) -> None:
        self.count(stmt)
        if is_print(stmt):
            return
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            return self.import_(stmt)
        if isinstance(stmt, ast.ClassDef):
            self.classes[stmt.name] = self.class_(stmt)
            return None
        if isinstance(stmt, ast.FunctionDef):
            check_name(stmt, stmt.name)
            if stmt.decorator_list:
                raise unsupported(stmt.decorator_list[0], "decorators are not supported")
            self.functions[stmt.name] = stmt  # a hook, read where it is registered
            return None
        if isinstance(stmt, ast.For):
            return self.loop(stmt)
        if isinstance(stmt, ast.With):
            return self.no_grad(stmt)
        if isinstance(stmt, ast.Assign):
            return self.assign(stmt)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            return self.call_statement(stmt, stmt.value)
        if isinstance(stmt, ast.Pass):
            return None
        raise unsupported(
            stmt,
            f"{describe(stmt)} is not supported at the top level: write imports, classes, "
            "inputs, layers, hooks, the forward as assignments, and backward/optimizer calls",
        )

    def import_(self, stmt: ast.Import | ast.ImportFrom) -> None:
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
            self.aliases[bound] = "torch" if plain else _IMPORTS[full]

    def loop(self, stmt: ast.For) -> None:
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
        if n > self.limits.max_loop or n < 0:
            raise _limit(stmt, f"a loop of {n} iterations; the limit is {self.limits.max_loop}")
        if any(isinstance(x, ast.Name) and x.id == stmt.target.id for s in stmt.body for x in ast.walk(s)):
            raise unsupported(
                stmt.target, "the loop variable cannot be used in the loop (the spec has no loops)"
            )
        for _ in range(n):
            for inner in stmt.body:
                self.statement(inner)

    # ---- names ---------------------------------------------------------------------------
    def fresh(self, name: str, node: ast.AST) -> str:
        """The spec name for a Python name being assigned (a reassignment gets a new one)."""
        check_name(node, name)
        if name in self.aliases or name in self.modules or name in self.classes:
            raise unsupported(node, f"{name!r} already names an import, a layer or a class")
        if name not in self.taken:
            self.taken.add(name)
            self.versions[name] = name
            return name
        k = 2
        while f"{name}_{k}" in self.taken or f"{name}_{k}" in self.source_names:
            k += 1
        new = f"{name}_{k}"
        self.taken.add(new)
        self.versions[name] = new
        return new

    def read(self, node: ast.Name) -> str:
        name = self.versions.get(node.id)
        if name is None:
            raise unsupported(node, f"{node.id[:64]!r} is not defined before this line", "undefined_name")
        return name

    def expr_context(self) -> ExprContext:
        return ExprContext(self.aliases, set(self.modules), self.read)

    def canonical(self, node: ast.expr) -> str | None:
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head not in self.aliases:
            return None
        return self.aliases[head] + ("." + rest if rest else "")

    # ---- assignments ---------------------------------------------------------------------
    def assign(self, stmt: ast.Assign) -> None:
        if len(stmt.targets) != 1:
            raise unsupported(stmt, "chained assignment `a = b = …` is not supported")
        target, value = stmt.targets[0], stmt.value
        if isinstance(target, ast.Attribute) and target.attr == "grad":
            return self.clear_grad(stmt, target)
        if isinstance(value, ast.Call):
            func = self.canonical(value.func)
            if func == "torch.autograd.grad":
                return self.grad_step(stmt, value)
            if (
                isinstance(target, ast.Name)
                and self.phase == "setup"
                or func
                and func.startswith("torch.optim.")
            ):
                made = self.make(stmt, target, value, func)
                if made:
                    return None
            if isinstance(value.func, ast.Attribute) and value.func.attr in {
                **MODULE_HOOK_METHODS,
                **TENSOR_HOOK_METHODS,
            }:
                return self.call_statement(stmt, value)  # handle = m.register_…_hook(fn)
        if self.phase == "steps":
            self.end_zero()
            self.block.append(stmt)
            return None
        self.phase = "forward"
        self.check_dropout_seed(stmt)
        self.forward_line(stmt, "/forward", self.forward)
        self.first_forward.append(ast.dump(stmt))
        return None

    def forward_line(self, stmt: ast.Assign, pointer: str, lines: list[str]) -> None:
        value = convert(stmt.value, self.expr_context())
        new_target = self.assigned(stmt.targets[0])
        self.where[f"{pointer}/{len(lines)}"] = stmt
        lines.append(ast.unparse(ast.Assign([new_target], value, lineno=0)))

    def assigned(self, target: ast.expr) -> ast.expr:
        """The spec's assignment target: fresh names for a name or a tuple of names."""
        if isinstance(target, ast.Name):
            return ast.Name(self.fresh(target.id, target), ast.Store())
        if isinstance(target, ast.Tuple) and all(isinstance(t, ast.Name) for t in target.elts):
            names = [t.id for t in target.elts if isinstance(t, ast.Name)]
            return ast.Tuple(
                [ast.Name(self.fresh(n, t), ast.Store()) for n, t in zip(names, target.elts, strict=True)],
                ast.Store(),
            )
        raise unsupported(target, "assign to a name or names `a, b` (no subscripts or attributes)")

    def make(self, stmt: ast.Assign, target: ast.expr, value: ast.Call, func: str | None) -> bool:
        """Inputs, layers, model instances and optimizers; False if `value` is none of them."""
        if func is not None and func.startswith("torch.optim."):
            self.optimizer(stmt, target, value, func)
            return True
        assert isinstance(target, ast.Name)
        if (
            func is not None
            and func.startswith("torch.")
            and func[6:] in _INPUT_MAKERS
            or self.input_chain(value)
        ):
            self.input(stmt, target, value)
            return True
        if (
            func is not None
            and func.startswith("torch.nn.")
            and not func.startswith("torch.nn.functional.")
            or (isinstance(value.func, ast.Name) and value.func.id in self.classes)
        ):
            name = target.id
            check_name(target, name)
            if name in self.modules or name in self.inputs:
                raise unsupported(target, f"{name!r} is already defined")
            spec, draws, dropout = self.module(value, f"/modules/{name}", self.where)
            self.modules[name] = spec
            self.taken.add(name)
            if dropout:
                self.dropout = self.dropout or value
            if draws:
                self.draws_since_seed = True
                self.params_drawn = self.params_drawn or stmt
            return True
        return False

    def input_chain(self, value: ast.Call) -> bool:
        """`torch.arange(n).reshape(…)` or `torch.randn(…).requires_grad_()`."""
        func = value.func
        return (
            isinstance(func, ast.Attribute)
            and func.attr in ("reshape", "requires_grad_", "view")
            and isinstance(func.value, ast.Call)
            and (self.canonical(func.value.func) or "").removeprefix("torch.") in _INPUT_MAKERS
        )

    # ---- inputs --------------------------------------------------------------------------
    def input(self, stmt: ast.Assign, target: ast.Name, value: ast.Call) -> None:
        name = target.id
        if name in self.inputs or name in self.modules:
            raise unsupported(target, f"{name!r} is already defined")
        spec: dict[str, Any] = {}
        reshape: ast.Call | None = None
        if self.input_chain(value):
            assert isinstance(value.func, ast.Attribute)
            if value.func.attr == "requires_grad_":
                if value.args or value.keywords:
                    raise unsupported(value, "requires_grad_() takes no arguments here")
                spec["requires_grad"] = True
            else:
                reshape = value
            value = value.func.value  # type: ignore[assignment]
        maker = (self.canonical(value.func) or "").removeprefix("torch.")
        args = value.args
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
        dtype = self.dtype_of(kwargs["dtype"]) if "dtype" in kwargs else None
        if maker == "tensor":
            if len(args) != 1:
                raise unsupported(value, "torch.tensor() takes one literal, e.g. torch.tensor([[1.0, 2.0]])")
            literal, integral = self.literal(args[0])
            spec["value"] = literal
            if dtype is None and integral:
                dtype = "int64"
        else:
            if maker in ("randint",):
                if len(args) == 3 and number(args[0]) == 0:
                    args = args[1:]
                if len(args) != 2 or not isinstance(number(args[0]), int):
                    raise unsupported(
                        value, "write torch.randint(high, shape) or torch.randint(0, high, shape)"
                    )
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
                shape = self.shape(reshape, list(reshape.args))
                import math

                if math.prod(shape) != int(n):
                    raise unsupported(reshape, f"arange({int(n)}) cannot be reshaped to {shape}")
            else:
                if reshape is not None:
                    raise unsupported(
                        reshape, "only torch.arange(n) is reshaped here; give the shape directly"
                    )
                shape = self.shape(value, list(args))
            spec["shape"] = shape
            spec["init"] = maker
            if maker in ("randn", "rand", "randint"):
                if self.params_drawn is not None:
                    raise unsupported(
                        stmt,
                        f"this input is drawn after parameters were drawn (line {self.params_drawn.lineno}); "  # type: ignore[attr-defined]
                        "the spec draws every random input first, then the parameters: move it above "
                        "that line, or give its values with torch.tensor([...])",
                    )
                self.draws_since_seed = True
        if dtype is not None and dtype != self.dtype:
            spec["dtype"] = dtype
        if spec.get("requires_grad") and (dtype == "int64"):
            raise unsupported(stmt, "only floating point tensors can require grad (write 1.0, not 1)")
        check_name(target, name)
        self.inputs[name] = spec
        self.taken.add(name)
        self.versions[name] = name
        self.where[f"/inputs/{name}"] = stmt

    def dtype_of(self, node: ast.expr) -> str:
        name = self.canonical(node) or ""
        dtype = DTYPES.get(name.removeprefix("torch."))
        if not name.startswith("torch.") or dtype is None:
            raise unsupported(node, "dtype= takes torch.float32, torch.float64 or torch.int64")
        return dtype

    def shape(self, node: ast.AST, args: list[ast.expr]) -> list[int]:
        if len(args) == 1 and isinstance(args[0], ast.Tuple | ast.List):
            args = list(args[0].elts)
        dims = [number(a) for a in args]
        if not args or any(not isinstance(d, int) or d < 0 for d in dims):
            raise unsupported(node, "a shape is written as whole numbers, e.g. torch.randn(2, 3)")
        return dims  # type: ignore[return-value]

    def literal(self, node: ast.expr) -> tuple[Any, bool]:
        """A nested list of numbers (and whether all are ints), within the literal limit."""
        integral = True

        def walk(n: ast.expr) -> Any:
            nonlocal integral
            if isinstance(n, ast.List | ast.Tuple):
                return [walk(e) for e in n.elts]
            value = number(n)
            if value is None:
                raise unsupported(n, "a tensor literal holds numbers only")
            self.literal_count += 1
            if self.literal_count > self.limits.max_literal_elements:
                raise _limit(n, f"more than {self.limits.max_literal_elements:,} numbers in tensor literals")
            integral = integral and isinstance(value, int)
            return value

        return walk(node), integral

    # ---- modules -------------------------------------------------------------------------
    def module(
        self, call: ast.Call, pointer: str, where: dict[str, ast.AST]
    ) -> tuple[dict[str, Any], bool, bool]:
        """One layer / Sequential / class instance: (spec, draws from the RNG, uses dropout)."""
        where[pointer] = call
        if isinstance(call.func, ast.Name) and call.func.id in self.classes:
            if call.args or call.keywords:
                raise unsupported(
                    call,
                    "model classes take no constructor arguments here: write sizes as numbers in __init__",
                )
            comp = self.classes[call.func.id]
            self.build(call, comp.size)
            for ptr, node in comp.where.items():
                where[pointer + ptr] = node
            spec = {
                "type": "Module",
                "args": comp.args,
                "modules": copy.deepcopy(comp.modules),
                "forward": comp.forward,
            }
            return spec, comp.draws, comp.dropout
        func = self.canonical(call.func) or ""
        kind = func.removeprefix("torch.nn.")
        if not func.startswith("torch.nn.") or (kind not in LAYER_POSITIONAL and kind != "Sequential"):
            raise unsupported(
                call,
                f"{(dotted(call.func) or describe(call.func))[:60]} is not a layer the spec knows: "
                f"nn.{', nn.'.join(sorted([*LAYER_POSITIONAL, 'Sequential']))}, or a class defined above",
            )
        if kind == "Sequential":
            if call.keywords or not call.args:
                raise unsupported(call, "nn.Sequential takes layers as positional arguments")
            self.build(call, 1)
            layers, draws, dropout = [], False, False
            for i, arg in enumerate(call.args):
                if not isinstance(arg, ast.Call):
                    raise unsupported(
                        arg, "nn.Sequential takes layers constructed in place, e.g. nn.Linear(2, 3)"
                    )
                child, d, p = self.module(arg, f"{pointer}/layers/{i}", where)
                layers.append(child)
                draws, dropout = draws or d, dropout or p
            return {"type": "Sequential", "layers": layers}, draws, dropout
        names = LAYER_POSITIONAL[kind]
        if len(call.args) > len(names):
            raise unsupported(
                call, f"nn.{kind} takes at most {len(names)} positional argument(s) here ({', '.join(names)})"
            )
        self.build(call, 1)
        layer: dict[str, Any] = {"type": kind}
        for key, arg in zip(names, call.args, strict=False):
            layer[key] = self.layer_arg(arg)
        for kw in call.keywords:
            if kw.arg is None:
                raise unsupported(kw.value, "`**kwargs` is not supported")
            check_name(kw, kw.arg)
            val = self.layer_arg(kw.value)
            if (kind, kw.arg) in (("MultiheadAttention", "dropout"), ("ReLU", "inplace")) and not val:
                continue  # the default, written out
            if kw.arg in ("type", "init"):
                raise unsupported(kw, f"nn.{kind} takes no argument {kw.arg!r}")
            layer[kw.arg] = val
        dropout = kind == "Dropout" and layer.get("p", 0.5) != 0
        return layer, kind in DRAWING_LAYERS, dropout

    def layer_arg(self, node: ast.expr) -> Any:
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

    def class_(self, cls: ast.ClassDef) -> _Composite:
        check_name(cls, cls.name)
        if cls.decorator_list:
            raise unsupported(cls.decorator_list[0], "decorators are not supported")
        if cls.keywords or len(cls.bases) != 1 or self.canonical(cls.bases[0]) != "torch.nn.Module":
            raise unsupported(cls, "a model class derives from nn.Module only: class Net(nn.Module)")
        methods: dict[str, ast.FunctionDef] = {}
        for i, stmt in enumerate(cls.body):
            if i == 0 and _docstring(stmt) is not None:
                continue
            if (
                not isinstance(stmt, ast.FunctionDef)
                or stmt.name not in ("__init__", "forward")
                or stmt.decorator_list
            ):
                raise unsupported(stmt, "a model class has an __init__ and a forward method, nothing else")
            methods[stmt.name] = stmt
        if "forward" not in methods:
            raise unsupported(cls, f"class {cls.name} has no forward method")
        where: dict[str, ast.AST] = {}
        modules: dict[str, dict[str, Any]] = {}
        draws = dropout = False
        built = self.built  # what this class's tree counts is what its __init__ builds
        init = methods.get("__init__")
        if init is not None:
            self_name = _self_param(init, 0)
            for i, stmt in enumerate(init.body):
                if i == 0 and _docstring(stmt) is not None or _is_super_init(stmt):
                    continue
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
                    if name in modules:
                        raise unsupported(stmt, f"self.{name} is assigned twice")
                    spec, d, p = self.module(stmt.value, f"/modules/{name}", where)
                    modules[name] = spec
                    draws, dropout = draws or d, dropout or p
                    continue
                raise unsupported(
                    stmt, "__init__ holds super().__init__() and `self.name = nn.Layer(…)` lines only"
                )
        fwd = methods["forward"]
        self_name = _self_param(fwd, 1)
        args = [a.arg for a in fwd.args.args[1:]]
        saved = (self.versions, self.taken)
        self.versions, self.taken = {}, set(modules)
        try:
            for a in fwd.args.args[1:]:
                self.fresh(a.arg, a)
            ctx = ExprContext(self.aliases, set(modules), self.read, self_name=self_name)
            lines: list[str] = []
            body = [
                s
                for i, s in enumerate(fwd.body)
                if not (i == 0 and _docstring(s) is not None) and not is_print(s)
            ]
            for i, stmt in enumerate(body):
                where[f"/forward/{len(lines)}"] = stmt
                if isinstance(stmt, ast.Return) and i == len(body) - 1 and stmt.value is not None:
                    lines.append(ast.unparse(ast.Return(convert(stmt.value, ctx))))
                elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                    value = convert(stmt.value, ctx)
                    new_target = self.assigned(stmt.targets[0])
                    lines.append(ast.unparse(ast.Assign([new_target], value, lineno=0)))
                else:
                    raise unsupported(stmt, "forward is assignments ending in `return <expression>`")
        finally:
            self.versions, self.taken = saved
        if not lines or not lines[-1].startswith("return"):
            raise unsupported(fwd, "forward must end with `return <expression>`")
        return _Composite(cls, modules, args, lines, where, draws, dropout, self.built - built)

    def optimizer(self, stmt: ast.Assign, target: ast.expr, call: ast.Call, func: str) -> None:
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
        covered = self.parameter_owners(call.args[0])
        missing = [m for m in self.modules_with_parameters() if m not in covered]
        if missing:
            raise unsupported(
                call.args[0], f"the spec's SGD step updates every parameter: include {', '.join(missing)}"
            )
        check_name(target, target.id)
        self.optimizers[target.id] = lr

    def parameter_owners(self, node: ast.expr) -> set[str]:
        """The top-level modules whose .parameters() an expression lists."""

        def owner(n: ast.expr) -> str:
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr == "parameters"
                and isinstance(n.func.value, ast.Name)
                and n.func.value.id in self.modules
                and not n.args
            ):
                return n.func.value.id
            raise unsupported(
                n, "parameters are listed as model.parameters() or [*a.parameters(), *b.parameters()]"
            )

        if isinstance(node, ast.List | ast.Tuple):
            return {owner(e.value if isinstance(e, ast.Starred) else e) for e in node.elts}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.parameter_owners(node.left) | self.parameter_owners(node.right)
        if isinstance(node, ast.Call) and dotted(node.func) == "list" and len(node.args) == 1:
            return {owner(node.args[0])}
        return {owner(node)}

    def modules_with_parameters(self) -> list[str]:
        return [name for name, spec in self.modules.items() if _has_parameters(spec)]

    # ---- weights -------------------------------------------------------------------------
    def no_grad(self, stmt: ast.With) -> None:
        if (
            len(stmt.items) != 1
            or stmt.items[0].optional_vars is not None
            or not isinstance(stmt.items[0].context_expr, ast.Call)
            or self.canonical(stmt.items[0].context_expr.func) != "torch.no_grad"
        ):
            raise unsupported(stmt, "only `with torch.no_grad():` blocks setting weights are supported")
        if self.phase != "setup":
            raise unsupported(
                stmt, "set weights before the forward (the spec sets them when it builds the model)"
            )
        for inner in stmt.body:
            self.count(inner)
            call = inner.value if isinstance(inner, ast.Expr) else None
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "copy_"
                and len(call.args) == 1
                and not call.keywords
                and isinstance(call.args[0], ast.Call)
                and self.canonical(call.args[0].func) == "torch.tensor"
                and len(call.args[0].args) == 1
            ):
                path = self.path_of(call.func.value)
                module_path, _, param = path.rpartition(".")
                spec = self.module_at(module_path, call.func.value)
                literal, _ = self.literal(call.args[0].args[0])
                spec.setdefault("init", {})[param] = literal
                continue
            raise unsupported(
                inner, "inside torch.no_grad(): model.layer.weight.copy_(torch.tensor([...])) lines only"
            )

    def path_of(self, node: ast.expr) -> str:
        """`model.fc1.weight` / `seq[0].bias` -> "model.fc1.weight" / "seq.0.bias"."""
        parts: list[str] = []
        while True:
            if isinstance(node, ast.Attribute):
                check_name(node, node.attr)
                parts.append(node.attr)
                node = node.value
            elif isinstance(node, ast.Subscript) and isinstance(number(node.slice), int):
                parts.append(str(number(node.slice)))
                node = node.value
            elif isinstance(node, ast.Name):
                check_name(node, node.id)
                parts.append(node.id)
                return ".".join(reversed(parts))
            else:
                raise unsupported(node, "name a layer or parameter as model.layer.weight or seq[0]")

    def module_at(self, path: str, node: ast.AST) -> dict[str, Any]:
        parts = path.split(".")
        spec = self.modules.get(parts[0])
        for part in parts[1:]:
            if spec is None:
                break
            if spec["type"] == "Sequential" and part.isdigit() and int(part) < len(spec["layers"]):
                spec = spec["layers"][int(part)]
            else:
                spec = spec.get("modules", {}).get(part)
        if spec is None:
            raise unsupported(node, f"{path[:100]!r} is not a layer of this model")
        return spec

    # ---- calls as statements -------------------------------------------------------------
    def call_statement(self, stmt: ast.stmt, call: ast.Call) -> None:
        func = self.canonical(call.func)
        if func == "torch.manual_seed":
            return self.manual_seed(stmt, call)
        if func == "torch.set_default_dtype":
            if self.inputs or self.modules or len(call.args) != 1:
                raise unsupported(
                    stmt, "torch.set_default_dtype(torch.float64) goes before any tensor or layer"
                )
            dtype = self.dtype_of(call.args[0])
            if dtype == "int64":
                raise unsupported(call.args[0], "the default dtype is torch.float32 or torch.float64")
            self.dtype = dtype
            return None
        if not isinstance(call.func, ast.Attribute):
            raise unsupported(
                call,
                f"{describe(call.func) if not isinstance(call.func, ast.Name) else repr(call.func.id[:40])} cannot be called as a statement here",
            )
        method = call.func.attr
        check_name(call.func, method)
        receiver = call.func.value
        if method in MODULE_HOOK_METHODS or method in TENSOR_HOOK_METHODS:
            return self.hook(stmt, call, method)
        if method == "retain_grad" and isinstance(receiver, ast.Name) and not call.args and not call.keywords:
            name = self.read(receiver)
            self.note_forward_extra(stmt)
            if name not in self.retain_grad:
                self.where[f"/retain_grad/{len(self.retain_grad)}"] = stmt
                self.retain_grad.append(name)
            return None
        if method == "backward" and isinstance(receiver, ast.Name):
            return self.backward(stmt, call, receiver)
        if method == "step" and isinstance(receiver, ast.Name) and receiver.id in self.optimizers:
            if call.args or call.keywords:
                raise unsupported(call, "step() takes no arguments")
            self.add_step({"do": "sgd_step", "lr": self.optimizers[receiver.id]}, stmt)
            return None
        if (
            method == "zero_grad"
            and isinstance(receiver, ast.Name)
            and (receiver.id in self.optimizers or receiver.id in self.modules)
        ):
            return self.zero_grad(stmt, call, receiver.id)
        if (
            method == "requires_grad_"
            and isinstance(receiver, ast.Name)
            and receiver.id in self.inputs
            and self.phase == "setup"
        ):
            self.inputs[receiver.id]["requires_grad"] = True
            return None
        raise unsupported(
            stmt,
            f".{method[:40]}() is not supported as a statement: the spec runs hooks, retain_grad(), "
            "backward(), optimizer step()/zero_grad() and model.zero_grad()",
        )

    def manual_seed(self, stmt: ast.stmt, call: ast.Call) -> None:
        seed = number(call.args[0]) if len(call.args) == 1 and not call.keywords else None
        if not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise unsupported(call, "torch.manual_seed takes one whole number (0 to 2**63-1)")
        if self.seed is None and not self.draws_since_seed and self.phase == "setup":
            self.seed, self.seed_node = seed, stmt
            return
        if self.phase == "setup" and seed == self.seed:
            self.draws_since_seed = False  # reseeded for dropout, as the spec's trace does
            return
        raise unsupported(
            stmt,
            "torch.manual_seed is supported once, before anything random is drawn (and again with "
            "the same seed right before the forward when the model uses dropout)",
        )

    def check_dropout_seed(self, stmt: ast.stmt) -> None:
        if self.phase == "forward" and self.first_forward:
            return
        if self.dropout is not None and self.draws_since_seed:
            raise unsupported(
                stmt,
                "dropout draws from torch's global RNG, which the spec seeds afresh before the forward: "
                f"add torch.manual_seed({self.seed or 0}) right before the forward",
            )

    # ---- hooks ---------------------------------------------------------------------------
    def hook(self, stmt: ast.stmt, call: ast.Call, method: str) -> None:
        assert isinstance(call.func, ast.Attribute)
        if len(call.args) != 1 or call.keywords:
            raise unsupported(call, f"{method}() takes the hook callable only")
        fn_node = call.args[0]
        if isinstance(fn_node, ast.Name) and fn_node.id in self.functions:
            fn: ast.Lambda | ast.FunctionDef = self.functions[fn_node.id]
        elif isinstance(fn_node, ast.Lambda):
            fn = fn_node
        else:
            raise unsupported(fn_node, "a hook is a lambda or a function defined above with def")
        path = self.path_of(call.func.value)
        if method in MODULE_HOOK_METHODS:
            kind = MODULE_HOOK_METHODS[method]
            if self.phase != "setup":
                raise unsupported(
                    stmt, "register module hooks before the forward (the spec registers them first)"
                )
            spec = self.module_at(path, call.func.value)
            arity, returns = self.module_call_shape(spec)
            action = hook_action(fn, kind, arity, returns, self.aliases)
            hook: dict[str, Any] = {"type": kind, "module": path}
        else:
            kind = TENSOR_HOOK_METHODS[method]
            root = path.partition(".")[0]
            if root in self.modules:
                self.module_at(path.rpartition(".")[0], call.func.value)
                ref = path
            elif "." not in path and path in self.versions:
                ref = self.versions[path]
            else:
                raise unsupported(
                    call.func.value, f"{path[:100]!r} is not an input, a parameter or a tensor of the forward"
                )
            leaf = ref in self.inputs or root in self.modules
            if leaf and self.phase != "setup":
                raise unsupported(stmt, "register hooks on inputs and parameters before the forward")
            if not leaf:
                if self.phase == "setup":
                    raise unsupported(stmt, f"{path!r} is not defined yet")
                self.note_forward_extra(stmt)
                if ref in self.intermediate_hooks and self.phase == "steps":
                    return None
                self.intermediate_hooks.add(ref)
            action = hook_action(fn, kind, 1, 1, self.aliases)
            hook = {"type": kind, "tensor": ref}
        if action is not None:
            hook["action"] = action
        self.where[f"/hooks/{len(self.hooks)}"] = stmt
        self.hooks.append(hook)

    def module_call_shape(self, spec: dict[str, Any]) -> tuple[int, int]:
        """(positional inputs, returned values) of a module's call."""
        if spec["type"] == "Module":
            last = spec["forward"][-1]
            tree = ast.parse(last)
            value = tree.body[0].value
            return len(spec["args"]), len(value.elts) if isinstance(value, ast.Tuple) else 1
        if spec["type"] == "MultiheadAttention":
            return 3, MODULE_RETURNS["MultiheadAttention"]
        return 1, 1

    def note_forward_extra(self, stmt: ast.stmt) -> None:
        """A registration that belongs to a forward (retain_grad, a hook on an intermediate)."""
        if self.phase == "forward":
            self.first_forward.append(ast.dump(stmt))
        elif self.phase == "steps":
            self.block.append(stmt)

    # ---- steps ---------------------------------------------------------------------------
    def add_step(self, spec: dict[str, Any], node: ast.AST) -> None:
        if spec["do"] != "zero_grad":
            self.end_zero()
        self.flush()
        if self.phase == "setup" and spec["do"] != "zero_grad":
            raise unsupported(node, "this runs before any forward: compute the loss first")
        if self.phase != "setup":
            self.phase = "steps"
        self.where[f"/steps/{len(self.steps)}"] = node
        self.steps.append(_Step(spec, node))

    def backward(self, stmt: ast.stmt, call: ast.Call, receiver: ast.Name) -> None:
        self.end_zero()
        self.flush()
        spec: dict[str, Any] = {"do": "backward", "of": self.read(receiver)}
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
                spec["inputs"] = self.tensor_refs(kw.value)
            else:
                raise unsupported(
                    kw, "backward() takes retain_graph=True/False, create_graph=True/False and inputs=[…]"
                )
        self.flush()
        self.add_step(spec, stmt)

    def tensor_refs(self, node: ast.expr) -> list[str]:
        items = node.elts if isinstance(node, ast.List | ast.Tuple) else [node]
        refs = []
        for item in items:
            path = self.path_of(item)
            root = path.partition(".")[0]
            if root in self.modules:
                self.module_at(path.rpartition(".")[0], item)
                refs.append(path)
            elif isinstance(item, ast.Name):
                refs.append(self.read(item))
            else:
                raise unsupported(item, f"{path[:100]!r} is not a tensor of this program")
        return refs

    def grad_step(self, stmt: ast.Assign, call: ast.Call) -> None:
        target = stmt.targets[0]
        if not isinstance(target, ast.Tuple | ast.List) or not all(
            isinstance(t, ast.Name) for t in target.elts
        ):
            raise unsupported(
                target,
                "unpack torch.autograd.grad's results into names: gx, gw = torch.autograd.grad(loss, [x, w])",
            )
        if len(call.args) != 2:
            raise unsupported(call, "torch.autograd.grad(outputs, inputs, …) takes two positional arguments")
        self.flush()
        self.end_zero()
        outs = call.args[0]
        of: Any = (
            [self.read_name(o) for o in outs.elts]
            if isinstance(outs, ast.List | ast.Tuple)
            else self.read_name(outs)
        )
        spec: dict[str, Any] = {"do": "grad", "of": of, "inputs": self.tensor_refs(call.args[1])}
        for kw in call.keywords:
            if (
                kw.arg in ("retain_graph", "create_graph", "allow_unused")
                and isinstance(kw.value, ast.Constant)
                and isinstance(kw.value.value, bool)
            ):
                spec[kw.arg] = kw.value.value
            else:
                raise unsupported(
                    kw,
                    "torch.autograd.grad takes retain_graph=, create_graph= and allow_unused= (True/False)",
                )
        self.flush()
        self.end_zero()
        spec["as"] = [self.fresh(t.id, t) for t in target.elts]  # type: ignore[attr-defined]
        if self.phase == "setup":
            raise unsupported(stmt, "this runs before any forward: compute the loss first")
        self.add_step(spec, stmt)

    def read_name(self, node: ast.expr) -> str:
        if not isinstance(node, ast.Name):
            raise unsupported(node, "name the output tensor (assign it first)")
        return self.read(node)

    def zero_grad(self, stmt: ast.stmt, call: ast.Call, owner: str) -> None:
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
        covered = set(self.modules) if owner in self.optimizers else {owner}
        self.flush()
        if self.zero is None:
            self.zero = {"set_to_none": set_to_none, "covered": set(), "node": stmt}
        elif self.zero["set_to_none"] != set_to_none:
            raise unsupported(stmt, "one zero_grad step has one set_to_none")
        self.zero["covered"] |= covered

    def clear_grad(self, stmt: ast.Assign, target: ast.Attribute) -> None:
        if not (
            isinstance(stmt.value, ast.Constant)
            and stmt.value.value is None
            and isinstance(target.value, ast.Name)
        ):
            raise unsupported(stmt, "only `x.grad = None` (as part of zeroing the gradients) is supported")
        if target.value.id not in self.inputs:
            raise unsupported(
                target, "only an input's .grad is set to None here; zero a model with model.zero_grad()"
            )
        self.flush()
        if self.zero is None:
            self.zero = {"set_to_none": True, "covered": set(), "node": stmt}
        elif not self.zero["set_to_none"]:
            raise unsupported(
                stmt,
                "with zero_grad(set_to_none=False), the spec zeroes input gradients too; set_to_none=True",
            )
        self.zero["covered"].add(target.value.id)

    def end_zero(self) -> None:
        """Close a zero_grad group: the spec clears every leaf, so the source must too."""
        zero, self.zero = self.zero, None
        if zero is None:
            return
        needed = self.modules_with_parameters() + [
            n for n, s in self.inputs.items() if s.get("requires_grad") and zero["set_to_none"]
        ]
        missing = [n for n in needed if n not in zero["covered"]]
        if missing:
            hints = [f"{n}.grad = None" if n in self.inputs else f"{n}.zero_grad()" for n in missing]
            raise unsupported(
                zero["node"], f"the spec's zero_grad clears every leaf's .grad; add {', '.join(hints)} here"
            )
        spec = {"do": "zero_grad"} if zero["set_to_none"] else {"do": "zero_grad", "set_to_none": False}
        self.add_step(spec, zero["node"])

    def flush(self) -> None:
        """Close a forward written after the steps began: a rerun of the first, or new lines."""
        block, self.block = self.block, []
        if not block:
            return
        dumps = [ast.dump(s) for s in block]
        if dumps == self.first_forward:
            self.where[f"/steps/{len(self.steps)}"] = block[0]
            self.steps.append(_Step({"do": "forward"}, block[0]))
            return
        assigns = [s for s in block if isinstance(s, ast.Assign)]
        if [ast.dump(s) for s in assigns] == [d for d in self.first_forward if d.startswith("Assign(")]:
            raise unsupported(
                block[0],
                "this forward repeats the first one but not its hooks/retain_grad lines: the spec "
                "registers them again on every forward, so repeat them here exactly as there",
            )
        index = len(self.steps)
        lines: list[str] = []
        self.steps.append(_Step({"do": "forward", "program": lines}, block[0]))
        self.where[f"/steps/{index}"] = block[0]
        saved_phase, self.phase = self.phase, "block"
        try:
            for stmt in block:
                if isinstance(stmt, ast.Assign):
                    self.forward_line(stmt, f"/steps/{index}/program", lines)
                else:
                    assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                    self.call_statement(stmt, stmt.value)
        finally:
            self.phase = saved_phase

    # ---- errors from the spec validator, at the line they come from ------------------------
    def remap(self, exc: SpecError) -> SpecError:
        path = exc.path or ""
        best = None
        for pointer in self.where:
            if (path == pointer or path.startswith(pointer + "/")) and (
                best is None or len(pointer) > len(best)
            ):
                best = pointer
        node = self.where.get(best) if best else None
        message = exc.message
        if node is None:
            return SpecError(exc.code, message, "/python", None, None)
        err = unsupported(node, message, exc.code)
        err.status = exc.status
        return err


def _has_parameters(spec: dict[str, Any]) -> bool:
    kind = spec.get("type")
    if kind == "Sequential":
        return any(_has_parameters(layer) for layer in spec["layers"])
    if kind == "Module":
        return any(_has_parameters(child) for child in spec["modules"].values())
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
        raise _limit(node, "a layer size over 2**31")
    return result


def _docstring(stmt: ast.stmt) -> str | None:
    if (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    ):
        return stmt.value.value
    return None


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


def python_to_spec(source: str, limits: TranslateLimits = LIMITS) -> dict[str, Any]:
    """The normalised spec of a PyTorch program; SpecError (4xx) at the line it cannot read.

    The source is parsed with ``ast`` and never run. Errors the spec validator finds in what
    was read (an unknown name, a shape) are reported at the Python line they came from.
    """
    tree = parse_source(source, limits)
    translator = _Translator(limits)
    try:
        doc = translator.run(tree)
    except RecursionError:
        raise _limit(None, "the source is nested too deeply") from None
    try:
        spec = parse_spec(doc)
    except SpecError as exc:
        raise translator.remap(exc) from None
    return spec.normalized()
