"""The meta-device dry run: build, forward and run the steps with shapes only, to enforce limits.

No memory is allocated and nothing is random; every op's output is checked as it is produced
(so a hidden blow-up such as a 10^10-element matmul stops at once), FLOPs are counted with
torch's FLOP formulas (``torch.utils.flop_counter``), and autograd nodes are counted by walking
the graphs. The spec's price (spec/price.py) is checked before: on the meta device most
elementwise kernels are Python reference implementations, far slower than the real kernels
they stand for, so the dry run of a spec with many operations is itself slow; what it
measures is then checked against the same ``max_ops`` (operations dispatched, backward
included), naming the line or the step.

``FlopCounterMode`` itself is not used: its module tracker wraps every module call's tensors
in an autograd Function (two extra operations per call, and nodes the real run does not have)
and it decomposes operators without a formula, which doubled the dry run's time per operation.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._ops import OpOverload
from torch.autograd.graph import Node
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry

from gradtrace.spec.errors import SpecError
from gradtrace.spec.limits import SpecLimits, check_declared
from gradtrace.spec.models import ModelSpec
from gradtrace.spec.steps import BackwardStep, ForwardStep, GradStep, SgdStep, StepSpec, ZeroGradStep

from .build import BuiltModel, build, resolve_tensor
from .interpreter import run_program
from .steps import clear_grads, default_sum, run_backward, run_grad, sgd_step


@dataclass
class DryRunReport:
    nodes: int = 0  # distinct autograd nodes over the whole run (AccumulateGrad included)
    ops: int = 0  # aten ops dispatched
    max_tensor_elements: int = 0
    total_elements: int = 0  # elements of every newly allocated op output (an upper bound on memory)
    flops: int = 0
    parameters: int = 0
    step_errors: list[str] = field(default_factory=list)  # steps PyTorch refused (recorded, not fatal)


class _LimitHit(Exception):
    def __init__(
        self, limit: str, value: int | float, bound: int | float, what: str, code: str = "limit_exceeded"
    ) -> None:
        super().__init__(f"{what} would be {value:,}; the limit {limit} is {bound:,}")
        self.limit = limit
        self.code = code


class _Watch(TorchDispatchMode):
    """Checks every op's outputs against the limits as they are produced."""

    def __init__(self, limits: SpecLimits, report: DryRunReport) -> None:
        super().__init__()
        self.limits, self.report = limits, report
        self.max_ops = 16 * limits.max_nodes  # runaway guard (nested Modules calling children in loops)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        report, limits = self.report, self.limits
        report.ops += 1
        if report.ops > self.max_ops:
            raise _LimitHit("max_nodes", report.ops, self.max_ops, "the number of tensor operations")
        if report.ops > limits.max_ops:
            raise _LimitHit(
                "max_ops", report.ops, limits.max_ops, "the number of tensor operations", "too_costly"
            )
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            report.flops += formula(*args, **kwargs, out_val=out)
        fresh = _allocates(func)
        for item in tree_leaves(out):
            if isinstance(item, torch.Tensor):
                numel = math.prod(int(d) for d in item.shape)  # Python ints: no overflow
                report.max_tensor_elements = max(report.max_tensor_elements, numel)
                if fresh:  # views and in-place results share memory: count only new storage
                    report.total_elements += numel
                if numel > limits.max_tensor_elements:
                    raise _LimitHit(
                        "max_tensor_elements",
                        numel,
                        limits.max_tensor_elements,
                        f"the element count of a tensor of shape {list(item.shape)}",
                    )
        if report.total_elements > limits.max_total_elements:
            raise _LimitHit(
                "max_total_elements",
                report.total_elements,
                limits.max_total_elements,
                "the elements produced by all operations",
            )
        if report.flops > limits.max_flops:
            raise _LimitHit("max_flops", report.flops, limits.max_flops, "the floating-point operation count")
        return out


def _allocates(func: OpOverload) -> bool:
    """False for ops whose outputs alias an input (views such as t() or view(), in-place ops)."""
    returns = func._schema.returns
    return not any(r.alias_info is not None for r in returns)


def _count_nodes(roots: list[Node | None], seen: set[Node]) -> None:
    queue = deque(r for r in roots if r is not None and r not in seen)
    seen.update(queue)
    while queue:
        node = queue.popleft()
        for child, _ in node.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                queue.append(child)


def dry_run(spec: ModelSpec, limits: SpecLimits) -> DryRunReport:
    """Raise SpecError(code="limit_exceeded") if running `spec` would exceed `limits`.

    Forward errors (shape mismatches) raise SpecError(code="forward_error") as in the real run;
    errors of steps are PyTorch refusing (a freed graph): they are noted, not raised.
    """
    check_declared(spec, limits)
    report = DryRunReport()
    built = build(spec, torch.Generator(), device="meta")
    report.parameters = sum(math.prod(p.shape) for p in built.root.parameters())
    nodes: set[Node] = set()
    env: dict[str, Any] = {}

    def note_graph() -> None:
        _count_nodes([t.grad_fn for t in env.values() if isinstance(t, torch.Tensor)], nodes)
        if len(nodes) > limits.max_nodes:
            raise _LimitHit("max_nodes", len(nodes), limits.max_nodes, "the number of autograd nodes")

    steps = spec.effective_steps()
    where, path = "", "/forward"  # the step running, if any: a limit hit names it
    with _Watch(limits, report):
        try:
            env.update(built.inputs)
            run_program(built.program, env, built.modules)
            default_sum(spec, steps, env)
            note_graph()
            for index, step in enumerate(steps):
                where = f"step {index} ({step.do}): "
                path = f"/steps/{index}" if spec.steps is not None else "/forward"
                _run_step(spec, index, step, env, built, report)
                note_graph()
        except _LimitHit as hit:
            raise SpecError(hit.code, f"{where}{hit}", path) from None
        except SpecError as exc:
            if isinstance(exc.__cause__, _LimitHit):
                raise SpecError(
                    exc.__cause__.code,
                    f"{exc.message.split(': ', 1)[0]}: {exc.__cause__}",
                    exc.path or "",
                    exc.line,
                    exc.column,
                ) from None
            raise
    report.nodes = len(nodes)
    return report


def _run_step(
    spec: ModelSpec, index: int, step: StepSpec, env: dict[str, Any], built: BuiltModel, report: DryRunReport
) -> None:
    root = built.root
    params = list(root.parameters())
    leaves = [*params, *(t for t in built.inputs.values() if t.requires_grad and t.is_leaf)]

    def resolve(ref: str) -> torch.Tensor:
        return resolve_tensor(ref, env, root)

    try:
        match step:
            case BackwardStep():
                run_backward(step, resolve)
            case GradStep():
                env.update(zip(step.as_, run_grad(step, resolve), strict=True))
            case ForwardStep():
                program = spec.step_program(index) or built.program
                if step.program is None:
                    env.update(built.inputs)
                run_program(program, env, built.modules)
            case ZeroGradStep():
                clear_grads(leaves, step.set_to_none)
            case SgdStep():
                sgd_step(params, step.lr)
    except (SpecError, _LimitHit):
        raise
    except Exception as exc:  # PyTorch refused the step: the real run records it as an error event
        report.step_errors.append(f"step {index} ({step.do}): {type(exc).__name__}: {str(exc)[:300]}")
