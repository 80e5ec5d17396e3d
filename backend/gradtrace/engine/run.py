"""trace_module: the engine's pipeline for a user's nn.Module (the library): the capture of
one forward and one backward (``session``), then records, analyses and the trace
(``assemble``). A spec's pipeline is ``run_spec``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import torch
from torch import nn

from gradtrace.engine.assemble import assemble_trace, final_grad_arrays
from gradtrace.engine.caller_warnings import reissue
from gradtrace.engine.diagnostics import reduced_to_sum
from gradtrace.engine.errors import TraceError, UnreadableTensor
from gradtrace.engine.session import LIBRARY_MAX_NODES, TraceSession, gc_paused, one_capture
from gradtrace.engine.summarize import DEFAULT_FINAL_VALUE_LIMIT, DEFAULT_VALUE_BUDGET
from gradtrace.trace_schema import TraceDoc


def _input_names(inputs: tuple[torch.Tensor, ...]) -> dict[str, torch.Tensor]:
    if len(inputs) == 1:
        return {"x": inputs[0]}
    return {f"x{k}": t for k, t in enumerate(inputs)}


def _retained_names(retain_grad: Any) -> set[str]:
    if retain_grad is True:
        return {"output"}
    if not retain_grad:
        return set()
    return set(retain_grad)


def trace_module(
    model: nn.Module,
    inputs: Any,
    loss_fn: Callable[[Any], Any] | None = None,
    *,
    max_nodes: int = LIBRARY_MAX_NODES,
    value_budget: int = DEFAULT_VALUE_BUDGET,
    final_value_limit: int = DEFAULT_FINAL_VALUE_LIMIT,
    retain_grad: Any = None,
    title: str | None = None,
    grads_out: dict[str, Any] | None = None,
) -> TraceDoc:
    """Trace one forward and one backward of ``model(*inputs)`` (the library's entry point).

    ``inputs``: a tensor or a tuple of tensors, named ``x`` (or ``x0, x1, …``) in the trace.
    ``loss_fn(output)`` gives the scalar to backward; without it a scalar output is the loss
    and a non-scalar output is reduced with ``.sum()`` (a diagnostic says so).
    ``retain_grad``: True (keep ``output.grad``) or names among "output", "loss".
    ``grads_out``, when given, receives the final ``.grad`` of every named leaf (``None``: no
    gradient), exact whatever the serialised trace could keep, for ``gradtrace.Trace(doc,
    grads)``: numpy arrays, or a GradInTrace where the returned document's blocks hold the
    exact numbers (the Trace decodes it when first asked).

    The model's own hooks (already registered, or registered inside ``forward``) are recorded
    where they fire and restored exactly afterwards (see model_hooks.py); engine runs inside
    the traced ones (reentrant checkpoint recomputation, ``autograd.grad`` inside ``forward``)
    are nested passes (see nested_runs.py); a loss that is a leaf gets its pass and grad write.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    inputs = tuple(inputs)
    bad = [k for k, t in enumerate(inputs) if not isinstance(t, torch.Tensor)]
    if bad:
        raise TypeError(f"inputs must be tensors; inputs[{bad[0]}] is {type(inputs[bad[0]]).__name__}")
    retained = _retained_names(retain_grad)
    # (the session is made, used and dropped inside the GC pause)
    with one_capture("gradtrace.trace()"), gc_paused():
        doc, grads = _traced(
            model,
            inputs,
            _input_names(inputs),
            loss_fn,
            retained,
            max_nodes,
            value_budget,
            final_value_limit,
            title,
            grads_out is not None,
        )
    if grads is not None and grads_out is not None:
        grads_out.update(grads)
    return doc


def _traced(
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    input_names: dict[str, torch.Tensor],
    loss_fn: Callable[[Any], Any] | None,
    retained: set[str],
    max_nodes: int,
    value_budget: int,
    final_value_limit: int,
    title: str | None,
    want_grads: bool,
) -> tuple[TraceDoc, dict[str, Any] | None]:
    """The trace of one forward and backward (capture, then assembly), and (``want_grads``)
    the final gradients as numpy arrays. ``input_names``: the inputs by their names in the
    trace."""
    session = TraceSession(
        model,
        input_names,
        max_nodes=max_nodes,
        value_budget=value_budget,
        final_value_limit=final_value_limit,
        model_hooks=True,
        grad_mode=torch.is_grad_enabled(),  # (the caller's: see TraceSession)
    )
    title = title or f"{type(model).__name__} forward and backward"
    try:
        _capture(session, model, inputs, loss_fn, retained)
    except BaseException as exc:
        session.close()  # (nothing of gradtrace's stays on the model; assembling closes it too)
        if isinstance(exc, Exception) and with_partial(exc):
            attach_partial(exc, session, title, want_grads)
        raise
    doc, final_grads, model_warnings = assemble_trace(session, source="module", spec=None, title=title)
    # (the session's last reference: what it held for its records, every intermediate tensor
    # it summarised, hundreds of MB on a big model, is freed here by reference counting, before
    # the gradients are copied, not held at once with those copies)
    del session
    grads = final_grad_arrays(final_grads, in_trace=doc.grads) if want_grads else None
    reissue(model_warnings)
    return doc, grads


def _capture(
    session: TraceSession,
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    loss_fn: Callable[[Any], Any] | None,
    retained: set[str],
) -> None:
    """The forward and backward of ``model(*inputs)``, recorded by ``session``."""

    def forward() -> torch.Tensor:
        output = model(*inputs)
        session.name("output", output)
        if "output" in retained and isinstance(output, torch.Tensor):
            output.retain_grad()
            session.retained["output"] = output
        loss = _loss_of(output, loss_fn, session)
        session.name("loss", loss)
        if "loss" in retained:
            loss.retain_grad()
            session.retained["loss"] = loss
        return loss

    loss = session.forward(forward, error_is_event=with_partial)
    session.backward_pass("backward", "loss", None, loss.backward)


def with_partial(exc: BaseException) -> bool:
    """An exception that comes with the trace recorded up to it (an ``error`` event where it
    broke): the model's or PyTorch's, or gradtrace's refusal of a tensor it cannot read
    (not a limit: a limit's partial trace would be as big as what it refused)."""
    return not isinstance(exc, TraceError) or isinstance(exc, UnreadableTensor)


def attach_partial(
    exc: Exception,
    session: TraceSession,
    title: str,
    want_grads: bool,
    source: Literal["module", "program"] = "module",
) -> None:
    """What was recorded up to the exception, as ``exc.gradtrace_partial``: (the trace, its
    final gradients or None), for ``gradtrace.trace`` to attach as ``exc.gradtrace_trace``.
    The exception itself stays exactly PyTorch's (or the model's): same object, type and
    message. The warnings recorded until then are issued first, as a plain run showed them."""
    try:
        doc, final_grads, _warnings = assemble_trace(session, source=source, spec=None, title=title)
        grads = final_grad_arrays(final_grads, in_trace=doc.grads) if want_grads else None
    except Exception as failure:  # noqa: BLE001 - the model's exception is what is raised
        exc.add_note(f"gradtrace could not assemble the partial trace: {type(failure).__name__}: {failure}")
    else:
        exc.gradtrace_partial = (doc, grads)  # type: ignore[attr-defined]
    session.reissue_warnings()


def _loss_of(output: Any, loss_fn: Callable[[Any], Any] | None, session: TraceSession) -> torch.Tensor:
    if loss_fn is not None:
        loss = loss_fn(output)
        if not isinstance(loss, torch.Tensor) or _numel(loss) != 1:
            raise ValueError(
                "loss_fn(output) must return a scalar tensor, got "
                + (f"shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else type(loss).__name__)
            )
        return loss
    if not isinstance(output, torch.Tensor):
        raise ValueError(
            f"the model returned {type(output).__name__}, not a tensor: pass loss_fn to turn it into a scalar"
        )
    if _numel(output) == 1:
        return output
    session.diagnostics.append(reduced_to_sum("output", tuple(output.shape), "no loss_fn was given"))
    return output.sum()


def _numel(t: torch.Tensor) -> int:
    """``t.numel()`` as gradtrace's own read: no call a ``__torch_function__`` subclass sees."""
    with torch._C.DisableTorchFunction():
        return t.numel()
