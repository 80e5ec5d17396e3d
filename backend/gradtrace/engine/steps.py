"""The spec's steps after the first forward: backward, grad, forward, zero_grad, sgd_step.

Each step is one pass of the timeline, run as the program it stands for inside the capture's
TraceSession (the session ``record()`` and ``trace()`` use), in a ``StepNote`` giving its
number and, for an engine run, its label: ``backward`` and ``grad`` are plain
``Tensor.backward`` / ``torch.autograd.grad`` calls, ``zero_grad`` sets each leaf's ``.grad``
to None (or zeroes it) as ``Optimizer.zero_grad`` does, and the session finds their passes as
it finds a program's; a ``forward`` step is a forward the code declares, as ``trace()``'s is.
``sgd_step`` is a ``torch.optim.SGD`` step (no momentum) the session finds as a program's
optimizer step, recorded as the trace format's ``sgd_step`` event.

A step PyTorch refuses (a second backward through a freed graph, an in-place error) becomes an
``error`` event with PyTorch's exact message; the later steps are skipped and a diagnostic says
so. The trace up to there is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from gradtrace.engine.errors import TraceError
from gradtrace.engine.session import StepNote, TraceSession
from gradtrace.spec.steps import BackwardStep, ForwardStep, GradStep, SgdStep, StepSpec, ZeroGradStep

Resolve = Callable[[str], torch.Tensor]  # a step's tensor reference -> the tensor


# ---- each step as the torch calls a program makes: the capture runs them in its session
# (StepRunner), the dry run on the meta device (dryrun.py), one definition for both ----------
def default_sum(spec: Any, steps: list[StepSpec], env: dict[str, Any]) -> tuple[str, str] | None:
    """When the spec left its steps to the default (one backward of the last tensor) and
    that tensor is not a scalar, its sum is what the backward runs on, as the library does:
    ``env`` gets it as ``"<name>.sum()"`` and ``steps[0]`` becomes its backward. Returns the
    two names (the tensor's, its sum's), None when nothing changed."""
    first = steps[0]
    if spec.steps is not None or not isinstance(first, BackwardStep):
        return None
    last = env.get(first.of)
    if not isinstance(last, torch.Tensor) or last.numel() == 1:
        return None
    total = f"{first.of}.sum()"
    env[total] = last.sum()
    steps[0] = first.model_copy(update={"of": total})
    return first.of, total


def run_backward(step: BackwardStep, resolve: Resolve) -> None:
    root = resolve(step.of)
    inputs = [resolve(r) for r in step.inputs] if step.inputs else None
    # retain_graph=None lets PyTorch default it to create_graph, as a bare call would
    retain = True if step.retain_graph else None
    root.backward(retain_graph=retain, create_graph=step.create_graph, inputs=inputs)


def run_grad(step: GradStep, resolve: Resolve) -> tuple[torch.Tensor | None, ...]:
    return torch.autograd.grad(
        [resolve(o) for o in step.outputs()],
        [resolve(r) for r in step.inputs],
        retain_graph=step.retain_graph,
        create_graph=step.create_graph,
        allow_unused=step.allow_unused,
    )


def clear_grads(leaves: Sequence[torch.Tensor], set_to_none: bool) -> bool:
    """Each leaf's ``.grad`` set to None (or zeroed), as ``Optimizer.zero_grad`` does;
    False when none had one."""
    cleared = False
    for leaf in leaves:
        grad = leaf.grad
        if grad is None:
            continue
        cleared = True
        if set_to_none:
            leaf.grad = None
        else:
            grad.detach_().zero_()
    return cleared


def sgd_step(params: Sequence[torch.Tensor], lr: float) -> bool:
    """One ``torch.optim.SGD`` step without momentum (a parameter with no gradient is left as
    it is); False when there is no parameter (torch.optim has no optimizer of none)."""
    if not params:
        return False
    torch.optim.SGD(params, lr=lr, foreach=False).step()
    return True


def limit_hit(exc: BaseException | None) -> TraceError | None:
    """The TraceError behind ``exc`` (the interpreter wraps every error of a line)."""
    while exc is not None:
        if isinstance(exc, TraceError):
            return exc
        exc = exc.__cause__
    return None


class StepRunner:
    def __init__(
        self,
        session: TraceSession,
        resolve: Resolve,
        rerun_forward: Callable[[int], None],
        assign: Callable[[str, torch.Tensor], None],
    ) -> None:
        self.session = session
        self.resolve = resolve  # spec name or parameter path -> tensor
        self.rerun_forward = rerun_forward  # forward step index -> runs the program
        self.assign = assign  # a step result gets a name (grad's `as`)

    def run_all(self, steps: list[StepSpec]) -> None:
        for index, step in enumerate(steps):
            try:
                self.run(index, step)
            except Exception as exc:  # noqa: BLE001 - PyTorch's refusal is part of the trace
                limit = limit_hit(exc)
                if limit is not None:  # a limit refuses the whole trace, not one step
                    raise limit from None
                self.session.step_error(exc, index, skipped=len(steps) - index - 1)
                return

    def run(self, index: int, step: StepSpec) -> None:
        match step:
            case BackwardStep():
                with self.session.in_step(StepNote(index, "backward", step.of)):
                    run_backward(step, self.resolve)
            case GradStep():
                with self.session.in_step(StepNote(index, "grad", ", ".join(step.outputs()))):
                    self._grad(step)
            case ForwardStep():
                with self.session.in_step(StepNote(index)):
                    self.session.forward(lambda: self.rerun_forward(index))
            case ZeroGradStep():
                self._zero_grad(index, step.set_to_none)
            case SgdStep():
                self._sgd_step(index, step.lr)

    def _grad(self, step: GradStep) -> None:
        for name, grad in zip(step.as_, run_grad(step, self.resolve), strict=True):
            if grad is not None:
                self.assign(name, grad)

    def _zero_grad(self, index: int, set_to_none: bool) -> None:
        """Every leaf's ``.grad`` cleared, as a program clears it: the session finds the
        clearings (one zero_grad event, in the step's pass)."""
        session = self.session
        with session.in_step(StepNote(index)):
            if not clear_grads(session.all_leaves(), set_to_none):
                session.zero_grad_event(set_to_none, [])  # (the step's event all the same)

    def _sgd_step(self, index: int, lr: float) -> None:
        """The session finds the optimizer's step (a StepNote of kind "sgd_step": its event
        is the format's ``sgd_step``)."""
        session = self.session
        with session.in_step(StepNote(index, "sgd_step")):
            if not sgd_step(list(session.params.values()), lr):
                session.sgd_step_event(lr, {})  # (the step's event all the same: nothing updated)
