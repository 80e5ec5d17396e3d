"""The engine: the only package of gradtrace that imports torch.

``run_spec`` (``spec_pipeline``) traces a validated ModelSpec (the service calls it in a worker
process); ``trace_module`` (``run``) traces a user's own nn.Module (the Python library);
``program.start_recording`` records any block of PyTorch code while it runs
(``gradtrace.record()``: its models, leaves and passes found as the program makes them). Each
loads when first asked for (tracing a user's model does not load the spec's build, dry run and
pydantic models). All three capture through one entry (``capture.Capture``: a spec's program,
``trace()``'s forward and backward and ``record()``'s block are each the block it runs, and it
ends each through the one assembly; so is ``gradtrace.watch``'s full trace of a real training
step, ``step_capture``), and are one pipeline,
each stage a module entered once, in this order (tests/engine/test_walk.py keeps it so):

=======================  ==================================================================
stage                    modules
=======================  ==================================================================
the spec checked         ``spec.price``, ``dryrun`` (a spec: limits before any allocation)
the built model          ``build`` (a spec; a user's model comes built)
the capture              ``capture``, running ``spec_capture``, ``run`` or ``program``
                         (each in ``session``'s TraceSession, which finds the passes)
records, analyses, trace ``assemble``: the final values, then each analysis, then every
                         record's numbers read to the host at once, then the TraceDoc
=======================  ==================================================================

The capture (``forward_capture``, ``backward_capture``, ``recorder``, ``model_hooks``) records
the passes and names no analysis. The analyses, each a module of its own that says what it
asks of the capture and computes its records from what was kept, see only the read-only
records ``analysis.py``'s interface hands them (never the session); the session and the
assembly call them through it:

=========================  =========================  ==========================================
analysis                   module                     what it asks of the capture
=========================  =========================  ==========================================
Linear W.grad from (a, δ)  ``linear_reconstruction``  the calls of ``nn.Linear`` (input a) and
                                                      the gradient arriving at their outputs (δ)
per-sample and per-token   ``per_sample``             the same factors, stacked by
                                                      ``linear_factors``
saved-tensor memory        ``memory``                 every node's saved tensors
                                                      (``Recorder.on_saved``), the events
gradient norms             ``grad_norms``             nothing: the parameters' gradients as
                                                      each pass ends, and the final ones
diagnostics                ``diagnostics``            nothing: the finished graph, events and
                                                      values
=========================  =========================  ==========================================
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gradtrace.engine.errors import TraceError, UnreadableTensor
    from gradtrace.engine.run import trace_module
    from gradtrace.engine.spec_pipeline import run_spec

# (each entry point loads its own pipeline when first asked for: tracing a user's model does
# not load the spec's build, dry run and pydantic models)
_DEFINED_IN = {
    "TraceError": "gradtrace.engine.errors",
    "UnreadableTensor": "gradtrace.engine.errors",
    "run_spec": "gradtrace.engine.spec_pipeline",
    "trace_module": "gradtrace.engine.run",
}

__all__ = ["TraceError", "UnreadableTensor", "run_spec", "trace_module"]


def __getattr__(name: str) -> Any:
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # (asked once)
    return value
