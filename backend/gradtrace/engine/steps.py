"""The spec's steps after the first forward: backward, grad, forward, zero_grad, sgd_step.

Each step is one pass of the timeline, run as the program it stands for inside the capture's
ProgramSession (the recorder ``record()`` and ``trace()`` use), in a ``StepNote`` giving its
number and, for an engine run, its label: ``backward`` and ``grad`` are plain
``Tensor.backward`` / ``torch.autograd.grad`` calls whose passes the session finds as a
program's; a ``forward`` step is a forward the code declares, as ``trace()``'s is.
``zero_grad`` and ``sgd_step`` are the spec's own operations, each a step pass declared here.

A step PyTorch refuses (a second backward through a freed graph, an in-place error) becomes an
``error`` event with PyTorch's exact message; the later steps are skipped and a diagnostic says
so. The trace up to there is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gradtrace.engine.errors import TraceError
from gradtrace.engine.program import ProgramSession, StepNote
from gradtrace.spec.steps import BackwardStep, ForwardStep, GradStep, SgdStep, StepSpec, ZeroGradStep
from gradtrace.trace_schema import SgdStepPayload, ZeroGradPayload


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

    def _step_pass(self, index: int, label: str) -> None:
        self.session.recorder.begin_pass("step", label, index)

    def _zero_grad(self, index: int, set_to_none: bool) -> None:
        session = self.session
        self._step_pass(index, "zero_grad")
        names = []
        with session.forward_capture.quiet():  # (one event, the spec's: not the clearings')
            for name, t in session.all_leaves_named():
                if t.grad is None:
                    continue
                names.append(name)
                if set_to_none:
                    t.grad = None
                else:
                    t.grad.detach_().zero_()
        session.recorder.emit("zero_grad", payload=ZeroGradPayload(set_to_none=set_to_none, tensors=names))
        session.recorder.end_pass()

    def _sgd_step(self, index: int, lr: float) -> None:
        session = self.session
        rec = session.recorder
        self._step_pass(index, f"sgd_step lr={lr:g}")
        updates: dict[str, Any] = {}
        with torch.no_grad(), session.forward_capture.quiet():
            for name, p in session.params.items():
                if p.grad is None:
                    continue
                p.add_(p.grad, alpha=-lr)  # what torch.optim.SGD does without momentum
                updates[name] = rec.summarize(p)
        rec.emit("sgd_step", payload=SgdStepPayload(lr=lr, after=updates))
        rec.end_pass()
