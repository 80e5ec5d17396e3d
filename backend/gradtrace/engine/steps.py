"""The spec's steps after the first forward: backward, grad, forward, zero_grad, sgd_step.

Each step is one pass of the timeline, run as the program it stands for inside the capture's
ProgramSession (the recorder ``record()`` and ``trace()`` use), in a ``StepNote`` giving its
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

from collections.abc import Callable

import torch

from gradtrace.engine.errors import TraceError
from gradtrace.engine.program import ProgramSession, StepNote
from gradtrace.spec.steps import BackwardStep, ForwardStep, GradStep, SgdStep, StepSpec, ZeroGradStep


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
        session: ProgramSession,
        resolve: Callable[[str], torch.Tensor],
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
                    self._backward(step)
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

    def _backward(self, step: BackwardStep) -> None:
        root = self.resolve(step.of)
        inputs = [self.resolve(r) for r in step.inputs] if step.inputs else None
        # retain_graph=None lets PyTorch default it to create_graph, as a bare call would
        retain = True if step.retain_graph else None
        root.backward(retain_graph=retain, create_graph=step.create_graph, inputs=inputs)

    def _grad(self, step: GradStep) -> None:
        outputs = [self.resolve(o) for o in step.outputs()]
        inputs = [self.resolve(r) for r in step.inputs]
        result = torch.autograd.grad(
            outputs,
            inputs,
            retain_graph=step.retain_graph,
            create_graph=step.create_graph,
            allow_unused=step.allow_unused,
        )
        for name, grad in zip(step.as_, result, strict=True):
            if grad is not None:
                self.assign(name, grad)

    def _zero_grad(self, index: int, set_to_none: bool) -> None:
        """Every leaf's ``.grad`` cleared, as a program clears it: the session finds the
        clearings (one zero_grad event, in the step's pass)."""
        session = self.session
        cleared = False
        with session.in_step(StepNote(index)):
            for _name, t in session.all_leaves_named():
                grad = t.grad
                if grad is None:
                    continue
                cleared = True
                if set_to_none:
                    t.grad = None
                else:
                    grad.detach_().zero_()
            if not cleared:  # (the step's event all the same, naming no tensor)
                session.zero_grad_event(set_to_none, [])

    def _sgd_step(self, index: int, lr: float) -> None:
        """``torch.optim.SGD`` without momentum, one step of every parameter (those with no
        gradient are left as they are): the session finds the optimizer's step."""
        session = self.session
        params = list(session.params.values())
        with session.in_step(StepNote(index, "sgd_step")):
            if params:
                torch.optim.SGD(params, lr=lr, foreach=False).step()
            else:  # (torch.optim has no optimizer of no parameters)
                session.sgd_step_event(lr, {})
