"""trace_module: the engine's pipeline for a user's nn.Module (the library): the code
``out = model(*inputs); loss = loss_fn(out); loss.backward()`` run inside the one capture entry
(capture.Capture) with the session ``record()`` uses (session.TraceSession, with no frame), told
the model and the inputs to name and that the forward is declared (an engine run inside it is a
nested pass); then records, analyses and the trace (``assemble``, in the capture's finish).
A spec's pipeline is ``run_spec``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gradtrace.engine.capture import Capture
from gradtrace.engine.diagnostics import reduced_to_sum
from gradtrace.engine.forward_capture import flat_tensors
from gradtrace.engine.session import LIBRARY_MAX_NODES, TraceSession
from gradtrace.engine.summarize import DEFAULT_FINAL_VALUE_LIMIT, DEFAULT_VALUE_BUDGET
from gradtrace.trace_schema import TraceDoc


def input_names(args: tuple, kwargs: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A model call's input tensors by their names in the trace (``trace()``'s inputs, a
    watched step's): positional ``x`` (several: ``x0``, ``x1``, …, in order), keyword ones by
    their keyword (the first tensor inside a nested one); a tensor given twice
    (``input_ids=ids, labels=ids``) under its first name."""
    positional = flat_tensors(args)
    names = {"x": positional[0]} if len(positional) == 1 else {f"x{k}": t for k, t in enumerate(positional)}
    seen = {id(t) for t in names.values()}
    for key, value in kwargs.items():
        found = flat_tensors(value)
        if found and key not in names and id(found[0]) not in seen:
            names[key] = found[0]
            seen.add(id(found[0]))
    return names


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
    capture = Capture(
        "gradtrace.trace()",
        "module",
        title or f"{type(model).__name__} forward and backward",
        want_grads=grads_out is not None,
    )
    doc, grads = capture.run(
        functools.partial(
            TraceSession,
            None,
            model,
            input_names(inputs, {}),
            max_nodes=max_nodes,
            value_budget=value_budget,
            final_value_limit=final_value_limit,
            grad_mode=torch.is_grad_enabled(),  # (the caller's: see TraceSession)
        ),
        functools.partial(_capture, model=model, inputs=inputs, loss_fn=loss_fn, retained=retained),
    )
    if grads is not None and grads_out is not None:
        grads_out.update(grads)
    return doc


def _capture(
    session: TraceSession,
    model: nn.Module,
    inputs: tuple[torch.Tensor, ...],
    loss_fn: Callable[[Any], Any] | None,
    retained: set[str],
) -> None:
    """The forward (declared: an engine run inside it, e.g. ``autograd.grad`` in ``loss_fn``,
    is a nested pass) and the backward of ``model(*inputs)``, as a program writes them."""
    session.open_forward()
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
    session.close_forward()
    loss.backward()  # (its pass: "backward #1 of loss")


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
