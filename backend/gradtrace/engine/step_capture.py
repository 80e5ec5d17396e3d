"""A full trace of one real training step, for ``gradtrace.watch`` (its first logged step, and
the step after the first flag of each kind).

The step is recorded as it runs, by the session ``record()`` uses (a ``TraceSession`` in
the one capture entry, capture.Capture), with no frame: the watched model given, its
parameters named by their paths, its inputs ``x`` (``x0``, ``x1``, …) and by their keywords.
The capture starts inside the model's call (the watch's forward pre-hook: the model's own
start is recorded as its module hooks would have, see ForwardCapture.call_began) and
records the model's real forward on the real inputs, the loop's real loss function (its ops, in the
forward pass; the tensor the backward starts from named ``loss``), its real backward and the
loop's optimizer step after it: the first optimizer step the watch's own step hooks see once
the backward has ended, a pass of its own with an ``optimizer_step`` event (the parameters it
changed, after it), as ``record()`` records one. Past its backward the capture records
nothing else (what the loop computes between the backward and the step: clipping, logging);
it ends as the optimizer's step ends, or, where none follows (gradient accumulation, an
evaluation), at the next forward of the model or the watch's end. The trace's ``grads`` are
the parameters' ``.grad`` then.

The training is never refused nor changed by it: a model the recorder cannot read is found
before the step, and a graph past the library's node limit is refused at the step's end,
not in the middle of it. Whatever else the recording fails on during the step (a tensor made
inside the forward whose numbers it cannot read, a bug of gradtrace's) is kept, not raised
into the training (the session is fail-safe, see Recorder.trip): the recording stops there,
the step runs on as without gradtrace, and the trace is dropped. Each dropped trace comes
with its reason (``failure``: a warning, and the watch writes it into the run). A forward
that no backward follows (an evaluation with grad on) ends the capture without a trace
(``abandon``).
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gradtrace.engine.capture import Capture
from gradtrace.engine.run import input_names
from gradtrace.engine.session import LIBRARY_MAX_NODES, TraceSession
from gradtrace.trace_schema import encode_doc


class _NoBackward(BaseException):
    """The step ended without a backward: its capture comes off with no trace (a
    BaseException: no partial trace is assembled for it, see Capture.finish)."""


class StepSession(TraceSession):
    """A TraceSession started inside ``model``'s call with ``args`` and ``kwargs`` (see the
    module's docstring); ``ended()`` is called as its backward ends."""

    def __init__(
        self, model: nn.Module, args: tuple, kwargs: dict[str, Any], ended: Callable[[], None], **options: Any
    ) -> None:
        self._args = args
        self._ended: Callable[[], None] | None = ended
        super().__init__(None, model, input_names(args, kwargs), **options)
        self.declared = False  # (the loop's own code: its backward ends the forward)

    fail_safe = True  # (the training's own step: see the module's docstring)
    optimizer_hooks = False  # (the watch reports the step's optimizer step: optimizer_step)

    def begin_block(self) -> None:
        super().begin_block()
        assert self.root is not None
        try:
            self.forward_capture.call_began(self.root, self._args)
        except BaseException:
            self.end_block(None)  # (the mode off again: Capture.start closes the rest)
            raise
        finally:
            self._args = ()

    def unnamed_root(self, root: torch.Tensor | None, kind: str) -> str:
        """The tensor the step's backward starts from: the loss (named so in the trace)."""
        if root is None or kind != "backward" or "loss" in self.env:
            return super().unnamed_root(root, kind)
        self.name("loss", root)
        return "loss"

    def backward_ended(self, kind: str) -> None:
        """The step's backward has ended (a top-level ``autograd.grad`` before it, e.g. a
        gradient penalty computed outside the model, is a pass of the step): nothing more is
        recorded but the optimizer's step the watch reports (``optimizer_step``)."""
        if kind != "backward":
            return
        self.recorder.stopped = True
        ended, self._ended = self._ended, None
        if ended is not None:
            ended()

    def optimizer_step(self, began: bool, optimizer: Any, args: tuple, kwargs: dict) -> None:
        """The loop's optimizer step after the backward, as the watch's own step hooks see it
        (``began``: its pre-hook, else its post-hook): recorded as ``record()`` records one,
        a pass of its own with an ``optimizer_step`` event (the parameters it changed)."""
        rec = self.recorder
        if rec.failure is not None:
            return
        try:
            (self._step_starts if began else self._step_ends)(optimizer, args, kwargs)
        except Exception as exc:
            if not rec.trip(exc):  # (never raises: the training goes on, see the module's docstring)
                raise


def _unreadable(model: nn.Module, args: tuple, kwargs: dict[str, Any]) -> str | None:
    """The first tensor of the step's model or inputs whose numbers the recorder cannot read
    (see summarize._refuse), named; None when there is none."""
    named = [*model.named_parameters(), *model.named_buffers(), *input_names(args, kwargs).items()]
    for name, t in named:
        if t.is_nested:
            return f"{name} is a nested tensor"
        if t.layout is torch.strided and t.numel() and not t.data_ptr():
            return f"{name} is a {type(t).__name__} with no storage of its own"
    return None


class StepTrace:
    """The capture of one step: ``start()`` in the model's forward pre-hook; ``done(doc,
    failure)`` gets the trace (TraceDoc JSON) when its backward ends, or None and the reason
    (also warned, and kept in ``failure``) when the recorder refused or failed it."""

    def __init__(
        self,
        model: nn.Module,
        args: tuple,
        kwargs: dict[str, Any],
        title: str,
        done: Callable[[bytes | None, str | None], None],
    ) -> None:
        self.model = model
        self.args = args
        self.kwargs = kwargs
        self.done = done
        self.capture = Capture("gradtrace.watch", "module", title, want_grads=False)
        self.session: StepSession | None = None
        self.failure: str | None = None  # why there is no trace (None: none yet, or a trace)
        self.backward_done = False  # (its backward has ended: see finish)
        self._stepping: Any = None  # the optimizer whose step after the backward is recorded

    def start(self) -> bool:
        """The capture is on (False, with a warning, when the recorder refuses the model)."""
        try:
            refused = _unreadable(self.model, self.args, self.kwargs)
            if refused is not None:
                raise ValueError(f"gradtrace cannot read its numbers: {refused}")
            session = self.capture.start(
                functools.partial(StepSession, self.model, self.args, self.kwargs, self._backward_ended)
            )
        except Exception as exc:  # noqa: BLE001 - the run goes on without its trace
            self._no_trace(exc)
            return False
        finally:
            self.args, self.kwargs = (), {}
        # never refused in the middle of the step (that would stop the training): the node
        # limit is checked at its end
        assert isinstance(session, StepSession)
        session.recorder.max_nodes = sys.maxsize
        self.session = session
        return True

    def quiet(self) -> Any:
        """The watch's own torch calls while the capture is on go unrecorded."""
        assert self.session is not None
        return self.session.forward_capture.quiet()

    @property
    def failed(self) -> bool:
        """The recording failed during the step (see the module's docstring): it records
        nothing more, and its trace will be dropped."""
        return self.session is not None and self.session.recorder.failure is not None

    def forward_ended(self, output: Any) -> None:
        """The model's forward returned ``output``: named ``output`` in the trace (a mapping,
        a Hugging Face ModelOutput: its tensors by their keys, but ``loss``: the name of the
        tensor the backward starts from, whichever it is)."""
        session = self.session
        assert session is not None
        if session.recorder.failure is not None:
            return
        try:
            if isinstance(output, torch.Tensor):
                session.name("output", output)
            elif isinstance(output, dict):
                for key, value in output.items():
                    if isinstance(value, torch.Tensor) and isinstance(key, str) and key != "loss":
                        session.name(key, value)
        except Exception as exc:
            if not session.recorder.trip(exc):  # (never raises: the training goes on)
                raise

    def _backward_ended(self) -> None:
        self.backward_done = True

    def optimizer_began(self, optimizer: Any, args: tuple, kwargs: dict) -> None:
        """An optimizer's step begins (the watch's pre-hook): after the backward, it is the
        step's own, recorded."""
        if self.session is not None and self.backward_done and self._stepping is None:
            self._stepping = optimizer
            self.session.optimizer_step(True, optimizer, args, kwargs)

    def optimizer_ended(self, optimizer: Any, args: tuple, kwargs: dict) -> None:
        """An optimizer's step has ended (the watch's post-hook): recorded if its start was,
        and the capture ends (``finish``)."""
        if self.session is None or not self.backward_done:
            return
        if self._stepping is optimizer:
            self.session.optimizer_step(False, optimizer, args, kwargs)
        self.finish()

    def finish(self) -> None:
        """The step is over (its optimizer's step, or, when none followed its backward, the
        next forward or the watch's end): the trace, or why there is none, to ``done``."""
        session, self.session = self.session, None
        if session is None:
            return
        if session.recorder.failure is not None:
            self._drop(session, session.recorder.failure)
            return
        doc = None
        try:
            rec = session.recorder
            if len(rec.nodes) > LIBRARY_MAX_NODES:
                self._without_trace(session)
                raise ValueError(f"the autograd graph has more than max_nodes={LIBRARY_MAX_NODES} nodes")
            rec.max_nodes = LIBRARY_MAX_NODES
            del session, rec  # (finish frees the session, the graph newest node first: see Capture.finish)
            result = self.capture.finish(None)
            assert result is not None
            doc = encode_doc(result[0])
        except Exception as exc:  # noqa: BLE001 - the run goes on without its trace
            self._no_trace(exc)
        self.done(doc, self.failure if doc is None else None)

    def abandon(self) -> None:
        """The step ended without its backward (a forward no backward followed, or the loop
        raised), or its recording failed (``failed``: then ``done(None)`` is called): the
        capture comes off, no trace (the model's warnings issued again)."""
        session, self.session = self.session, None
        if session is None:
            return
        if session.recorder.failure is not None:
            self._drop(session, session.recorder.failure)
            return
        try:
            self._without_trace(session)
        except Exception as exc:  # noqa: BLE001 - never raised into the training
            self._no_trace(exc)

    def _drop(self, session: StepSession, failure: Exception) -> None:
        """The recording failed during the step: the capture comes off, no trace, the
        reason told (``done(None)``)."""
        try:
            self._without_trace(session)
        except Exception:  # noqa: BLE001, S110 - the recording's own failure is the reason told
            pass
        self._no_trace(failure)
        self.done(None, self.failure)

    def _without_trace(self, session: StepSession) -> None:
        """The capture comes off with no trace; the model's warnings are issued again."""
        try:
            self.capture.finish(_NoBackward())
        finally:
            session.reissue_warnings()

    def _no_trace(self, exc: BaseException) -> None:
        """No trace of this step, because of ``exc``: a warning, and the reason in ``failure``."""
        self.failure = f"{type(exc).__name__}: {exc}"
        warnings.warn(
            f"gradtrace.watch: no full trace of this step ({self.failure})", RuntimeWarning, stacklevel=4
        )
