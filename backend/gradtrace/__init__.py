"""gradtrace: see what PyTorch's autograd really does.

Importing this package does not import torch (the service's API process must stay
torch-free); the tracing functions import the engine when first called.
"""

from __future__ import annotations

from typing import Any

from gradtrace.trace import Trace

__all__ = ["Trace", "show", "trace", "trace_spec"]


def trace(model: Any, inputs: Any, loss_fn: Any = None, **options: Any) -> Trace:
    """Trace one forward and backward of a real ``nn.Module``.

    ``inputs``: a tensor or a tuple of tensors. ``loss_fn(output) -> scalar``; without it a
    scalar output is the loss and a non-scalar output is reduced with ``.sum()`` (a
    diagnostic says so). Options: ``max_nodes`` (default 40,000), ``value_budget`` (float32
    elements kept as base64 across the trace), ``retain_grad`` (True, or names among
    "output", "loss"), ``title``.
    """
    from gradtrace.engine import trace_module

    return Trace(trace_module(model, inputs, loss_fn, **options))


def trace_spec(spec: dict[str, Any], **options: Any) -> Trace:
    """Trace a model spec (the JSON format of the service and the examples).

    Raises ``gradtrace.spec.SpecError`` for an invalid spec (naming the field or line) and
    ``gradtrace.engine.TraceError`` for a limit. Options: ``max_nodes``, ``value_budget``.
    """
    from gradtrace.engine import run_spec
    from gradtrace.spec import SpecLimits, parse_spec

    limits = SpecLimits.local()
    if options:
        limits = limits.model_copy(update=options) if hasattr(limits, "model_copy") else limits
        for key, value in options.items():
            if not hasattr(limits, key):
                raise TypeError(f"unknown option {key!r}")
            object.__setattr__(limits, key, value)
    return Trace(run_spec(parse_spec(spec), limits))


def show(model: Any, inputs: Any, loss_fn: Any = None, **options: Any) -> Trace:
    """One-liner for notebooks: the returned Trace renders itself inline (``_repr_html_``)."""
    return trace(model, inputs, loss_fn, **options)
