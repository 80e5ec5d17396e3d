"""The one interface every analysis implements: what it observes of a capture, what it adds to
the trace. The analyses themselves are listed in one place, ``analyses.ANALYSES``.

An analysis observes only through the calls below (each a no-op here), made by the capture in
ANALYSES's order; it never reaches into the session's parts, and the session calls no analysis
by name. After the passes, ``assemble`` asks each in turn for its records (the value budget is
spent in that order: it is part of the output).

What the capture offers:

- ``keeps_calls_of``: module types whose every call the forward keeps (its input, its output's
  node; ``ForwardCapture.kept_calls``), and whose weights the analysis is told of as models are
  met (:meth:`Analysis.weights_found`); the backward keeps a copy of the gradient arriving at
  those outputs' nodes (``BackwardCapture.deltas``).
- ``wants_saved``: every node's saved tensors, as the node is first seen (:meth:`Analysis.saved`:
  backward frees them).
- each top-level backward pass: :meth:`Analysis.backward_starting` (its nodes are known, not yet
  hooked) and :meth:`Analysis.backward_ended` (after it, whether it raised or not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import torch
    from torch import nn

    from gradtrace.engine.session import TraceSession
    from gradtrace.trace_schema import Analyses, TensorValue


class Finished(NamedTuple):
    """What assemble hands every analysis once the passes are over: the closed capture, the
    final ``.grad`` of every named leaf and retained tensor (references), the trace's ``grads``
    (their final values), the leaves left without a gradient (name -> tensor node), and the
    texts of the warnings the model issued."""

    session: TraceSession
    final_grads: dict[str, torch.Tensor | None]
    grads: dict[str, TensorValue | None]
    cleared: dict[str, str | None]
    warnings: list[str]


class Analysis:
    """One analysis of a capture. A subclass overrides what it needs."""

    # the module types whose calls (and the gradients at their outputs) it reads: see the module
    keeps_calls_of: tuple[type[nn.Module], ...] = ()
    wants_saved = False  # whether ``saved`` is called for every node that saved tensors

    def weights_found(self, weights: dict[str, torch.Tensor]) -> None:
        """The ``weight`` parameters of a model's modules of ``keeps_calls_of``, by name."""

    def saved(self, node_id: str, node: Any, seq: int, tensors: list[tuple[str, torch.Tensor]]) -> None:
        """A node (created at event ``seq``) saved these (attribute, tensor) for its backward."""

    def backward_starting(self, session: TraceSession, pass_index: int) -> None:
        """A top-level backward pass (``pass_index``) is about to run."""

    def backward_ended(self, session: TraceSession, pass_index: int, ok: bool) -> None:
        """That pass is over (``ok``: it returned; else it raised)."""

    def add(self, done: Finished, out: Analyses) -> None:
        """Its records into ``out``, before the values are read (what it summarizes spends
        what the value budget has left)."""

    def add_after_values(self, done: Finished, out: Analyses) -> None:
        """Records made once every value is read to the host (``Summarizer.finalize``)."""
