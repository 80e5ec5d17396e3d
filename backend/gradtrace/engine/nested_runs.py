"""Engine runs inside a pass, each recorded as its own nested pass.

Two places start the autograd engine while a traced pass is already running:

* a reentrant ``torch.utils.checkpoint`` node, whose backward recomputes its segment (new
  nodes, created inside the outer backward) and calls ``torch.autograd.backward`` on them;
* ``torch.autograd.grad`` (or ``backward``) called inside the model's forward, e.g. a
  gradient penalty with ``create_graph=True``.

``torch.autograd.backward``, ``torch.autograd.grad`` and ``Tensor.backward`` are torch
functions: the forward's discovery mode hands them to :meth:`NestedRuns.run`. During a
backward the discovery mode is entered only while a Python Function's backward runs (see
``BackwardCapture.python_node_mode``), which is where such calls and recomputations happen.
:meth:`run` opens a pass (``parent`` = the pass it interrupts), hooks every node the engine may
run that the enclosing pass has not hooked, runs the engine, discovers the nodes the run
created (``create_graph``) and closes the pass.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from gradtrace.engine.backward_capture import BackwardCapture
from gradtrace.engine.forward_capture import ForwardCapture, flat_tensors
from gradtrace.engine.recorder import Recorder
from gradtrace.trace_schema import Diagnostic

ENGINE_CALLS: dict[Any, str] = {
    torch.autograd.backward: "backward",
    torch.Tensor.backward: "backward",
    torch.autograd.grad: "autograd.grad",
}


@functools.cache
def _signature(func: Callable) -> inspect.Signature:
    """An engine call's signature, made on first use (20 us each: not at every import)."""
    return inspect.signature(func)


def call_arguments(func: Callable, args: tuple, kwargs: dict) -> tuple[Any, dict[str, Any]]:
    """An engine call's roots (the tensors it starts from) and all its arguments by name."""
    call = _signature(func).bind(*args, **kwargs).arguments
    return call.get("self", call.get("tensors", call.get("outputs"))), call


class NestedRuns:
    def __init__(
        self,
        recorder: Recorder,
        forward_capture: ForwardCapture,
        backward_capture: BackwardCapture,
        retained: dict[str, torch.Tensor],
        leaves: Callable[[], list[torch.Tensor]],
        on_error: Callable[[BaseException, int | None], None],
        diagnostics: list[Diagnostic],
    ) -> None:
        self.recorder = recorder
        self.forward_capture = forward_capture
        self.backward_capture = backward_capture
        self.retained = retained
        self.leaves = leaves  # the trace's leaves (their .grad may hold create_graph nodes)
        self.on_error = on_error  # records an error event in the nested pass, where it broke
        self.diagnostics = diagnostics

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Engine calls seen by the discovery mode become nested passes inside this block.
        Undone on exit: the interception points back at the session (``on_error``), and left
        in place it would keep the session alive in a cycle after the trace."""
        intercepts = self.forward_capture.intercepts
        intercepts.update(dict.fromkeys(ENGINE_CALLS, self.run))
        self.backward_capture.python_node_mode = self.forward_capture.new_mode
        try:
            yield
        finally:
            self.backward_capture.python_node_mode = None
            for func in ENGINE_CALLS:
                intercepts.pop(func, None)

    def _label(self, what: str) -> str:
        rec = self.recorder
        running = rec.running_node()
        if running is not None:
            op = rec.by_id[running].op
            why = " (checkpoint recomputation)" if op == "CheckpointFunctionBackward" else ""
            return f"nested {what} inside {op} {running}{why}"
        return f"nested {what} inside {rec.passes[rec.pass_index].label}"

    def _note_double_backward(self, label: str) -> None:
        self.diagnostics.append(
            Diagnostic(
                code="double_backward",
                severity="info",
                message=f"{label} ran with create_graph=True: the gradients it returned are part of the graph "
                "and a later backward differentiates them again, so a weight's .grad also gets terms "
                "through that gradient graph; a Linear's (a, δ) reconstruction covers only its own "
                "calls and may not match then",
            )
        )

    def run(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """Run an engine call (the mode is off while it runs) as a nested pass."""
        rec = self.recorder
        capture = self.forward_capture
        roots_given, call = call_arguments(func, args, kwargs)
        roots = flat_tensors(roots_given)
        step = rec.passes[rec.pass_index].step if rec.in_pass else None
        label = self._label(ENGINE_CALLS[func])
        if call.get("create_graph"):
            self._note_double_backward(label)
        rec.begin_pass("backward", label, step)
        result = None
        try:
            with capture.quiet():
                capture.discover_roots(roots)
                self.backward_capture.watch.update(capture.kept_output_nodes())
            with self.backward_capture.node_hooks(self.retained):
                result = capture.real(func, *args, **kwargs)
            return result
        except Exception as exc:
            self.on_error(exc, step)  # once: the enclosing pass sees it recorded
            raise
        finally:
            # nodes the run created (create_graph) are behind the results and the leaves' .grad
            made = flat_tensors(result) + [t.grad for t in self.leaves() if t.grad is not None]
            with capture.quiet():
                capture.discover_from(made)
            rec.end_pass()
