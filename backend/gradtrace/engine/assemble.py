"""After the passes: what the capture kept becomes the trace.

The last stage of the engine's pipeline (spec → built model → capture → records → analyses →
trace). It takes a finished capture (a TraceSession whose passes are over) and goes through
four steps, each once, in this order:

1. **records**: the capture's graph, events and passes as they are; the final values
   (every named leaf's final ``.grad``, every named tensor's value), exact and first
   (``Summarizer.final``); the modules.
2. **analyses**: each of ``analyses.ANALYSES`` in turn adds its records (``Analysis.add``):
   diagnostics, the saved-tensor memory, the Linear reconstruction and its per-sample factors.
   Analyses that keep tensors summarize them after the final values, so they spend what the
   value budget has left.
3. **values**: every record's numbers read to the host at once (``Summarizer.finalize``), then
   what the analyses make of them (``Analysis.add_after_values``: the gradient norms, the
   final ones read off those values' stats).
4. **the TraceDoc**.

The order is part of the output: the value budget is spent in it, so a trace comes out byte for
byte the same from one run to the next.
"""

from __future__ import annotations

import warnings
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

import torch

from gradtrace.engine.analysis import Finished
from gradtrace.engine.errors import UnreadableTensor
from gradtrace.engine.session import TraceSession
from gradtrace.engine.summarize import exact_array
from gradtrace.trace_schema import (
    Analyses,
    Base64Blocks,
    Diagnostic,
    GradInTrace,
    Graph,
    Limits,
    ModuleInfo,
    TensorValue,
    TraceDoc,
)


class Assembled(NamedTuple):
    """The trace; the final ``.grad`` of every named leaf and retained tensor as the records
    read them (references, not copies: see final_grad_arrays); and the model's warnings the
    capture recorded, for the caller to issue again (caller_warnings.reissue)."""

    doc: TraceDoc
    final_grads: dict[str, torch.Tensor | None]
    warnings: list[warnings.WarningMessage]


def assemble_trace(
    session: TraceSession,
    *,
    source: Literal["spec", "module", "program"],
    title: str,
    spec: dict[str, Any] | None,
) -> Assembled:
    """The trace of a capture whose passes are over (its hooks come off first). Torch
    function dispatch is off throughout: gradtrace's reads of the model's tensors are no
    calls a ``__torch_function__`` subclass sees (a plain run makes none of them)."""
    with torch._C.DisableTorchFunction():
        session.close()  # (the summarizer's copies end with it)
        summarize = session.summarize
        rec = session.recorder

        # 1. records
        final_grads = _final_grads(session)
        grads, values = _final_values(session, final_grads)
        cleared = _without_grad(session, final_grads)
        for tensor in session.retained.values():
            rec.mark_retains_grad(tensor)
        modules = [
            ModuleInfo(
                path=path,
                type=typ,
                parent=parent,
                parameters=params,
                hooks=session.module_hooks.get(path, []),
            )
            for path, (typ, parent, params) in session.module_types.items()
        ]

        # 2. analyses (analyses.ANALYSES, in its order), after the capture's own diagnostics
        model_warnings = list(session.recorded_warnings)
        done = _finished(session, final_grads, grads, cleared, [str(w.message) for w in model_warnings])
        analyses = Analyses(diagnostics=session.diagnostics)
        for analysis in session.analyses:
            analysis.add(done, analyses)
        limits = Limits(  # (after the analyses: what they cut counts too)
            max_nodes=rec.max_nodes,
            value_budget=summarize.value_budget,
            final_value_limit=summarize.final_value_limit,
            values_truncated=summarize.values_truncated,
            finals_truncated=summarize.finals_truncated,
        )

        # 3. values, and the gradient norms (the final ones read off the values' stats)
        summarize.finalize()
        for analysis in session.analyses:
            analysis.add_after_values(done, analyses)

        # 4. the trace (its event payloads keep their TensorValue records: gradtrace.Trace.doc turns
        # them into plain data when a reader first asks; serialising does not need that)
        doc = TraceDoc(
            torch_version=str(torch.__version__),
            source=source,
            title=title,
            spec=spec,
            graph=Graph(nodes=rec.nodes, edges=rec.edges, modules=modules),
            events=rec.events,
            passes=rec.passes,
            values=values,
            grads=grads,
            analyses=analyses,
            limits=limits,
            tensor_data=Base64Blocks(summarize.tensor_data),
        )
        return Assembled(doc, final_grads, model_warnings)


def _finished(
    session: TraceSession,
    final_grads: dict[str, torch.Tensor | None],
    grads: dict[str, TensorValue | None],
    cleared: dict[str, str | None],
    warning_texts: list[str],
) -> Finished:
    """What the analyses are offered of the closed capture (see analysis.Finished)."""
    rec = session.recorder
    return Finished(
        nodes=rec.nodes,
        edges=rec.edges,
        events=rec.events,
        node_ids=MappingProxyType(rec.node_ids),
        leaves=session.all_leaves_named(),
        param_modules=MappingProxyType(session.param_modules),
        module_types=MappingProxyType(session.module_types),
        env=MappingProxyType(session.env),
        retained=MappingProxyType(session.retained),
        backward_roots=session.backward_roots,
        kept_calls=session.forward_capture.kept_calls,
        deltas=MappingProxyType(session.backward_capture.deltas),
        dynamo_frames=session.forward_capture.dynamo_frames,
        wrapped=MappingProxyType(session.summarize.wrapped),
        summarize=session.summarize,
        final_grads=MappingProxyType(final_grads),
        grads=MappingProxyType(grads),
        cleared=MappingProxyType(cleared),
        warnings=warning_texts,
    )


def _final_grads(session: TraceSession) -> dict[str, torch.Tensor | None]:
    """The final ``.grad`` of every named leaf and retained tensor, by name."""
    final_grads: dict[str, torch.Tensor | None] = {name: t.grad for name, t in session.all_leaves_named()}
    final_grads.update({name: t.grad for name, t in session.retained.items()})
    return dict(sorted(final_grads.items()))


def _without_grad(
    session: TraceSession, final_grads: dict[str, torch.Tensor | None]
) -> dict[str, str | None]:
    """The leaves whose final ``.grad`` is None, by name, with their tensor node (for
    diagnostics.cleared_grads)."""
    rec = session.recorder
    return {
        name: rec.leaf_id(t) for name, t in session.all_leaves_named() if final_grads.get(name, 0) is None
    }


def _final_values(
    session: TraceSession, final_grads: dict[str, torch.Tensor | None]
) -> tuple[dict[str, TensorValue | None], dict[str, TensorValue]]:
    """The trace's ``grads`` and ``values``, exact and first (Summarizer.final); one
    diagnostic when the model is too big for them."""
    final = session.summarize.final
    unreadable: list[str] = []

    def read(named: Any) -> dict[str, Any]:
        out = {}
        for name, t in named:
            try:
                out[name] = None if t is None else final(t)
            except UnreadableTensor:  # (a partial trace, refused at such a tensor: see run.py)
                unreadable.append(name)
        return out

    grads = read(final_grads.items())
    for name in unreadable:  # (left out, not None: None would say "no gradient")
        del final_grads[name]
    values = read(sorted(session.leaves.items()))
    values.update(read(session.env.items()))
    if unreadable:
        session.diagnostics.append(
            Diagnostic(
                code="unreadable_tensor",
                severity="error",
                message=f"{', '.join(unreadable)}: gradtrace cannot read these tensors' numbers (a nested "
                "tensor, or a __torch_dispatch__ wrapper subclass): the trace leaves them out",
            )
        )
    cut = session.summarize.finals_truncated
    if cut:
        limit = session.summarize.final_value_limit
        session.diagnostics.append(
            Diagnostic(
                code="final_values_truncated",
                severity="warning",
                message=f"the model is too big for the serialised trace: {cut} final gradient(s) or named "
                f"value(s) do not fit in final_value_limit={limit:,} numbers and are kept as stats "
                "only (truncated: true); Trace.grads in memory still holds every gradient. "
                "Pass a larger final_value_limit to keep them all.",
            )
        )
    return grads, values


def final_grad_arrays(
    final_grads: dict[str, torch.Tensor | None], in_trace: dict[str, TensorValue | None] | None = None
) -> dict[str, Any]:
    """The final gradients as numpy arrays (the library's ``Trace.grads``: exact whatever the
    serialised trace could keep; None where there is no gradient). Call it right after
    ``assemble_trace`` (with its ``final_grads``), no user code run in between (the .grad
    tensors are copied now), still inside the GC pause; a caller that does not want them skips
    the copies.

    ``in_trace``: the finished trace's ``grads``; a gradient whose exact numbers it holds in a
    block is then a GradInTrace instead of a copy (for a Trace made of that document, which
    decodes it if ever asked)."""
    values = in_trace or {}
    out: dict[str, Any] = {}
    for name, grad in final_grads.items():
        if grad is None:
            out[name] = None
        else:
            out[name] = GradInTrace.of(values.get(name)) or exact_array(grad)
    return out
