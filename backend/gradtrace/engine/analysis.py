"""The one interface every analysis implements: what it observes of a capture, what it adds to
the trace. The analyses themselves are listed in one place, ``analyses.ANALYSES``.

An analysis observes only through the calls below (each a no-op here), made by the capture in
ANALYSES's order, and only what they hand it: it never sees the session nor the capture's parts
(no analysis module imports them: an import-linter contract), and the session calls no analysis
by name. After the passes, ``assemble`` asks each in turn for its records (the value budget is
spent in that order: it is part of the output).

What the capture offers, while the passes run:

- ``keeps_calls_of``: module types whose every call the forward keeps (its input, its output's
  node: :attr:`Finished.kept_calls`), and whose weights the analysis is told of as models are
  met (:meth:`Analysis.weights_found`); the backward keeps a copy of the gradient arriving at
  those outputs' nodes (:attr:`Finished.deltas`).
- ``wants_saved``: every node's saved tensors, as the node is first seen (:meth:`Analysis.saved`:
  backward frees them).
- each top-level backward pass, a :class:`Backward`: as it starts
  (:meth:`Analysis.backward_starting`: its nodes are known, not yet hooked) and as it ends
  (:meth:`Analysis.backward_ended`, whether it raised or not).

and once they are over, one :class:`Finished` (its fields are the whole list).

Both records are read-only views: their containers are the capture's own (no copies), typed as
``Sequence`` and ``Mapping`` so that no analysis writes them; what an analysis makes goes into its
own state, and into the trace through ``add``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import torch
    from torch import nn

    from gradtrace.engine.summarize import Summarizer
    from gradtrace.trace_schema import Analyses, Event, GraphEdge, GraphNode, TensorValue


class Backward(NamedTuple):
    """A top-level backward pass, as the analyses see it when it starts and when it ends."""

    pass_index: int  # its index in the trace's passes
    first_seq: int  # the seq of its first event
    # the trace's events so far, as records (when it ends: its own too, from ``first_seq``)
    events: Sequence[Event]
    # every parameter known now, by name (their ``.grad``: the gradients so far), and each
    # one's module as grad norms name it (see session._scan_modules)
    params: Mapping[str, torch.Tensor]
    param_modules: Mapping[str, str | None]


class Finished(NamedTuple):
    """What assemble hands every analysis once the passes are over (built once, after the
    final values' records are made): the closed capture's records, names and kept tensors,
    and its final state."""

    # the records the passes made
    nodes: Sequence[GraphNode]
    edges: Sequence[GraphEdge]
    events: Sequence[Event]
    node_ids: Mapping[Any, str]  # autograd node -> its node's id
    # the program's names
    leaves: Sequence[tuple[str, torch.Tensor]]  # the parameters, then the named inputs, that require grad
    param_modules: Mapping[str, str | None]  # (see Backward)
    module_types: Mapping[str, tuple[str, str | None, list[str]]]  # path -> (type, parent, its parameters)
    env: Mapping[str, torch.Tensor]  # the program's named tensors (values)
    retained: Mapping[str, torch.Tensor]  # the named tensors that retain their grad
    backward_roots: Sequence[str]  # the node of each named root a backward ran from
    # what the capture kept for the analyses
    kept_calls: Sequence[dict[str, Any]]  # see keeps_calls_of (ForwardCapture.kept_calls)
    # pass -> node -> the gradients arriving at it (BackwardCapture.deltas)
    deltas: Mapping[int, dict[str, list[tuple]]]
    dynamo_frames: tuple[int, int] | None  # torch.compile's frames (ForwardCapture.dynamo_frames)
    wrapped: Mapping[int, tuple[TensorValue, str]]  # records of torch.func wrappers (Summarizer.wrapped)
    # the value summarizer: a record of each tensor an analysis keeps (each spends what the
    # value budget has left, in ANALYSES's order)
    summarize: Summarizer
    # the final state: the ``.grad`` of every named leaf and retained tensor (references), the
    # trace's ``grads`` (their final values), the leaves left without a gradient (name -> tensor
    # node), and the texts of the warnings the model issued
    final_grads: Mapping[str, torch.Tensor | None]
    grads: Mapping[str, TensorValue | None]
    cleared: Mapping[str, str | None]
    warnings: Sequence[str]


class Analysis:
    """One analysis of a capture. A subclass overrides what it needs."""

    # the module types whose calls (and the gradients at their outputs) it reads: see the module
    keeps_calls_of: tuple[type[nn.Module], ...] = ()
    wants_saved = False  # whether ``saved`` is called for every node that saved tensors

    def weights_found(self, weights: dict[str, torch.Tensor]) -> None:
        """The ``weight`` parameters of a model's modules of ``keeps_calls_of``, by name."""

    def saved(self, node_id: str, node: Any, seq: int, tensors: list[tuple[str, torch.Tensor]]) -> None:
        """A node (created at event ``seq``) saved these (attribute, tensor) for its backward."""

    def backward_starting(self, backward: Backward) -> None:
        """A top-level backward pass is about to run."""

    def backward_ended(self, backward: Backward, ok: bool) -> None:
        """That pass is over (``ok``: it returned; else it raised)."""

    def add(self, done: Finished, out: Analyses) -> None:
        """Its records into ``out``, before the values are read (what it summarizes spends
        what the value budget has left)."""

    def add_after_values(self, done: Finished, out: Analyses) -> None:
        """Records made once every value is read to the host (``Summarizer.finalize``)."""
