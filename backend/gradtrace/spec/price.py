"""The price of a spec before it runs: work counted from the compiled programs, torch-free.

Programs have no loops and no branches, so what a run will do can be counted exactly from its
IR before anything is built: every operator, function, method and module call of every line,
composite Modules expanded into their own programs (a Module that calls a child 60 times per
line is 60 calls per line *times* what the child costs), every forward step, and the graph
each ``backward``/``grad`` step walks. Two counts come out:

- ``ops``: tensor operations over the whole run — the forward programs, and for each walk of
  the graph about ``BACKWARD_OPS_PER_OP`` backward operations per forward one;
- ``calls``: Python-level calls (module calls included, even of an ``Identity`` that does no
  tensor work: a composite calling one 13,000 times still runs 13,000 module calls).

``check_price`` refuses a spec whose counts exceed ``SpecLimits.max_ops``/``max_calls`` with
``too_costly`` (413), naming the line or the step where the run crosses the limit. It runs in
the API process before a worker is taken, and again in the worker before the meta dry run
(whose own per-op cost is what makes op counts expensive: see engine/dryrun.py).

Number arithmetic in program lines (``9 ** 9 ** 9``) is bounded as sizes are:
``bounded_arithmetic`` computes a folded constant only when its size is known to be small, and
raises ``CostlyArithmetic`` otherwise (the parser turns it into ``too_costly`` at the line and
column of the expression).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import SpecError
from .ir import (
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
    TensorList,
    TupleExpr,
)
from .modules import CompositeSpec, LeafSpec, ModuleSpec, SequentialSpec
from .steps import BackwardStep, ForwardStep, GradStep, SgdStep, ZeroGradStep
from .vocabulary import FUNCTIONS, OPERATORS

if TYPE_CHECKING:
    from .limits import SpecLimits
    from .models import ModelSpec

Modules = Mapping[str, ModuleSpec]

# Integers a program line may compute: Python's own cap on int <-> str conversion (4,300
# digits) is also the JSON reader's cap on integers in a spec.
MAX_INTEGER_DIGITS = 4300
_MAX_INTEGER_BITS = int(MAX_INTEGER_DIGITS / math.log10(2))

# Backward operations per forward operation, for pricing a walk of the graph (most backward
# functions run one or two kernels; a Linear's runs about five for its two forward ops).
BACKWARD_OPS_PER_OP = 2


class CostlyArithmetic(Exception):
    """Number arithmetic in a program line whose result would be too big to compute."""


# ---- number arithmetic ---------------------------------------------------------------------------
def _digits(bits: int) -> int:
    return int(bits * math.log10(2)) + 1


def bounded_arithmetic(op: str, a: int | float, b: int | float) -> int | float | None:
    """``a op b`` for two number constants of a program line, computed only when it is cheap.

    Raises CostlyArithmetic when an integer result would exceed MAX_INTEGER_DIGITS (its size is
    estimated from the operands' bit lengths first, so ``9 ** 9 ** 9`` is never computed).
    None: not a number constant (a float overflow, a division by zero, a complex power): the
    run reports those on their line, at once.
    """
    if isinstance(a, int) and isinstance(b, int):
        bits = max(a.bit_length(), b.bit_length())
        if op == "*":
            bits = a.bit_length() + b.bit_length()
        elif op == "**" and b > 0 and abs(a) > 1:
            bits = int(b * math.log2(abs(a))) + 1
        elif op in "+-":
            bits += 1
        if bits > _MAX_INTEGER_BITS:
            raise CostlyArithmetic(
                f"this integer arithmetic would produce a number of up to {_digits(bits):,} digits; "
                f"numbers in a program have at most {MAX_INTEGER_DIGITS:,}"
            )
    try:
        value = OPERATORS[op][1](a, b)
    except (KeyError, ArithmeticError, ValueError, TypeError):  # (TypeError: `@` of two numbers)
        return None
    return value if isinstance(value, int | float) else None


# ---- the price of programs -----------------------------------------------------------------------
@dataclass(frozen=True)
class Work:
    ops: int = 0
    calls: int = 0

    def __add__(self, other: Work) -> Work:
        return Work(self.ops + other.ops, self.calls + other.calls)

    def times(self, n: int) -> Work:
        return Work(self.ops * n, self.calls * n)


_NOTHING = Work()
_ONE = Work(1, 1)


def _is_number(expr: Expr) -> bool:
    if isinstance(expr, Const):
        return isinstance(expr.value, int | float) and not isinstance(expr.value, bool)
    if isinstance(expr, BinOp):
        return _is_number(expr.left) and _is_number(expr.right)
    if isinstance(expr, Neg):
        return _is_number(expr.operand)
    return False


class _Pricer:
    """Work of programs and module calls, each module priced once (memoised by identity)."""

    def __init__(self) -> None:
        self._modules: dict[int, Work] = {}

    def module(self, spec: ModuleSpec) -> Work:
        key = id(spec)
        if key not in self._modules:
            self._modules[key] = Work(0, 1) + self._module_body(spec)
        return self._modules[key]

    def _module_body(self, spec: ModuleSpec) -> Work:
        match spec:
            case SequentialSpec():
                total = _NOTHING
                for layer in spec.layers:
                    total = total + self.module(layer)
                return total
            case CompositeSpec():
                return self.program(spec.program, spec.modules)
            case LeafSpec():  # (the kernels one call runs: each layer's own `ops`)
                return Work(spec.ops, 0)

    def program(self, program: Program, modules: Modules) -> Work:
        total = _NOTHING
        for stmt in program.statements:
            total = total + self.expr(stmt.value, modules)
        return total

    def expr(self, expr: Expr, modules: Modules) -> Work:
        if isinstance(expr, Name | Const | IntTuple):
            return _NOTHING
        if isinstance(expr, BinOp):
            own = Work(0, 1) if _is_number(expr) else _ONE
            return own + self.expr(expr.left, modules) + self.expr(expr.right, modules)
        if isinstance(expr, Neg):
            own = Work(0, 1) if _is_number(expr) else _ONE
            return own + self.expr(expr.operand, modules)
        if isinstance(expr, Call):
            total = _NOTHING
            for arg in expr.args:
                total = total + self.expr(arg, modules)
            if expr.kind == "module":
                return total + self.module(modules[expr.callee])
            return total + Work(FUNCTIONS[expr.callee].ops, 1)
        if isinstance(expr, MethodCall):
            total = _ONE + self.expr(expr.obj, modules)
            for arg in expr.args:
                total = total + self.expr(arg, modules)
            return total
        if isinstance(expr, Index):
            return _ONE + self.expr(expr.obj, modules)
        if isinstance(expr, TensorList | TupleExpr):
            total = _NOTHING
            for item in expr.items:
                total = total + self.expr(item, modules)
            return total
        return _ONE  # pragma: no cover - the parser emits only the nodes above


@dataclass(frozen=True)
class Price:
    """What a run will do: tensor operations and Python-level calls over the whole run."""

    ops: int
    calls: int


def _too_costly(what: str, price: Work, limits: SpecLimits, path: str, line: int | None = None) -> SpecError:
    if price.calls > limits.max_calls:
        told = f"{price.calls:,} calls (module, function and operator calls); the limit max_calls is {limits.max_calls:,}"
    else:
        told = f"about {price.ops:,} tensor operations; the limit max_ops is {limits.max_ops:,}"
    message = f"{what}: the run would make {told}, more than a trace may take"
    return SpecError("too_costly", message, path, line)


def _over(work: Work, limits: SpecLimits) -> bool:
    return work.ops > limits.max_ops or work.calls > limits.max_calls


def _walk(step: BackwardStep | GradStep) -> tuple[bool, bool]:
    """(keeps the graph, builds a graph of the backward) for a backward or grad step."""
    create = step.create_graph
    retain = step.retain_graph
    return (create if retain is None else bool(retain)) or create, create


def check_price(spec: ModelSpec, limits: SpecLimits) -> Price:
    """The price of running ``spec`` (a validated ModelSpec); SpecError("too_costly") past the limits.

    The error names the first program line, or the step, at which the run's running total
    crosses ``limits.max_ops`` or ``limits.max_calls``.
    """
    pricer = _Pricer()
    modules = dict(spec.modules)
    program = spec.program
    total = _NOTHING
    for stmt in program.statements:
        total = total + pricer.expr(stmt.value, modules)
        if _over(total, limits):
            where = program.where(stmt.index)
            raise _too_costly(where, total, limits, f"{program.path}/{stmt.index}", stmt.index + 1)
    forward = total
    graph = forward.ops  # forward operations whose graph is still alive
    for index, step in enumerate(spec.effective_steps()):
        match step:
            case BackwardStep() | GradStep():
                walk = graph * BACKWARD_OPS_PER_OP
                total = total + Work(walk, max(1, graph))
                keep, create = _walk(step)
                graph = (graph + walk if create else graph) if keep else 0
            case ForwardStep():
                step_program = spec.step_program(index)
                work = pricer.program(step_program, modules) if step_program is not None else forward
                total = total + work
                graph += work.ops
            case ZeroGradStep() | SgdStep():  # one operation per parameter
                total = total + Work(len(spec.parameter_shapes()), 1)
        if _over(total, limits):
            path = f"/steps/{index}" if spec.steps is not None else "/forward"  # the default backward
            raise _too_costly(f"step {index} ({step.do})", total, limits, path)
    return Price(total.ops, total.calls)
