"""SpecLimits and check_declared: refuse oversized specs from their declarations alone.

Pure and torch-free, run before anything is allocated. Sizes are multiplied in Python ints
(torch.Size([2**40, 2**40]).numel() overflows to 0). The meta-device dry run
(engine/dryrun.py) then catches what declarations hide (e.g. a broadcast blow-up).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from .errors import SpecError
from .modules import CompositeSpec, walk_modules
from .steps import ForwardStep


@dataclass(frozen=True)
class SpecLimits:
    max_nodes: int = 4096  # autograd nodes over the whole run (dry run)
    max_tensor_elements: int = 1_000_000  # any one tensor
    max_total_elements: int = 5_000_000  # inputs + parameters declared; all tensors in the dry run
    max_parameters: int = 2_000_000
    max_flops: float = 2e9
    max_program_lines: int = 200  # per program
    max_modules: int = 200
    max_steps: int = 20
    max_depth: int = 8  # module nesting
    max_dim: int = 1_000_000  # any one dimension
    max_inputs: int = 64
    max_hooks: int = 64
    max_literal_elements: int = 100_000  # numbers written in value/init literals
    # The price of a run (spec/price.py), counted before anything runs: tensor operations
    # (forward programs, and each walk of the graph by backward/grad) and Python-level calls
    # (module calls included). Calibrated on the service's 20 s deadline: see RELIABILITY.md.
    max_ops: int = 10_000
    max_calls: int = 10_000

    @classmethod
    def local(cls) -> SpecLimits:
        """Generous limits for the local library: still well under the ~50k-node crash point."""
        return cls(
            max_nodes=40_000,
            max_tensor_elements=50_000_000,
            max_total_elements=200_000_000,
            max_parameters=100_000_000,
            max_flops=1e12,
            max_program_lines=2000,
            max_modules=2000,
            max_steps=100,
            max_depth=16,
            max_dim=100_000_000,
            max_inputs=1000,
            max_hooks=200,
            max_literal_elements=1_000_000,
            max_ops=10_000_000,
            max_calls=10_000_000,
        )

    def with_(self, **changes: Any) -> SpecLimits:
        return replace(self, **changes)


def _fail(limit: str, value: int | float, bound: int | float, what: str, path: str) -> SpecError:
    return SpecError("limit_exceeded", f"{what} is {value:,}; the limit {limit} is {bound:,}", path)


def _count_literal(value: object) -> int:
    if not isinstance(value, list):
        return 1
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        else:
            total += 1
    return total


def check_shape(shape: tuple[int, ...], limits: SpecLimits, what: str, path: str) -> int:
    """Check each dim and the element count (Python ints); return the count."""
    for i, dim in enumerate(shape):
        if dim > limits.max_dim:
            raise _fail("max_dim", dim, limits.max_dim, f"dimension {i} of {what}", path)
    numel = math.prod(shape)
    if numel > limits.max_tensor_elements:
        raise _fail(
            "max_tensor_elements", numel, limits.max_tensor_elements, f"the element count of {what}", path
        )
    return numel


def check_declared(spec, limits: SpecLimits) -> None:  # noqa: ANN001 (ModelSpec; avoids an import cycle)
    """Raise SpecError(code="limit_exceeded") if what the spec declares is over a limit."""
    if len(spec.inputs) > limits.max_inputs:
        raise _fail("max_inputs", len(spec.inputs), limits.max_inputs, "the number of inputs", "/inputs")
    if len(spec.hooks) > limits.max_hooks:
        raise _fail("max_hooks", len(spec.hooks), limits.max_hooks, "the number of hooks", "/hooks")
    steps = spec.steps or []
    if len(steps) > limits.max_steps:
        raise _fail("max_steps", len(steps), limits.max_steps, "the number of steps", "/steps")
    _check_lines(spec.forward, "/forward", "the forward program", limits)
    for i, step in enumerate(steps):
        match step:
            case ForwardStep(program=list(lines)):
                _check_lines(lines, f"/steps/{i}/program", f"step {i}'s program", limits)

    literal = 0
    total = 0
    biggest_literal = (0, "/inputs")  # (count, path): where a refusal of the literal total points
    for name, inp in spec.inputs.items():
        total += check_shape(inp.declared_shape(), limits, f"input {name}", f"/inputs/{name}")
        if inp.value is not None:
            count = _count_literal(inp.value)
            literal += count
            biggest_literal = max(biggest_literal, (count, f"/inputs/{name}/value"))
    inputs_total = total

    modules = list(walk_modules(spec.modules))
    if len(modules) > limits.max_modules:
        raise _fail("max_modules", len(modules), limits.max_modules, "the number of modules", "/modules")
    params = 0
    for path, ptr, mod, depth in modules:
        if depth > limits.max_depth:
            raise _fail("max_depth", depth, limits.max_depth, f"the nesting depth of module {path}", ptr)
        if isinstance(mod, CompositeSpec):
            _check_lines(mod.forward, f"{ptr}/forward", f"module {path}'s program", limits)
        shapes = mod.parameter_shapes() if hasattr(mod, "parameter_shapes") else {}
        for pname, shape in shapes.items():
            params += check_shape(shape, limits, f"parameter {path}.{pname}", ptr)
        for key, value in (getattr(mod, "init", None) or {}).items():
            count = _count_literal(value)
            literal += count
            biggest_literal = max(biggest_literal, (count, f"{ptr}/init/{key}"))
    if params > limits.max_parameters:
        raise _fail("max_parameters", params, limits.max_parameters, "the parameter count", "/modules")
    total += params
    if total > limits.max_total_elements:
        raise _fail(
            "max_total_elements",
            total,
            limits.max_total_elements,
            "the declared element count (inputs + parameters)",
            "/inputs" if inputs_total >= params else "/modules",  # the larger share
        )
    if literal > limits.max_literal_elements:
        raise _fail(
            "max_literal_elements",
            literal,
            limits.max_literal_elements,
            "the count of numbers written in value/init literals",
            biggest_literal[1],  # the largest literal
        )


def _check_lines(lines: list[str], path: str, what: str, limits: SpecLimits) -> None:
    if len(lines) > limits.max_program_lines:
        raise _fail(
            "max_program_lines", len(lines), limits.max_program_lines, f"the line count of {what}", path
        )
