"""run_spec: the engine's pipeline for a spec, each stage entered once, in this order.

1. **the spec** checked (``dry_run_first``): the run's price from the programs
   (``spec.price``), then a dry run on the meta device (``dryrun``): limits refused before
   anything is allocated; its normalized form, which the trace carries;
2. **the built model** (``build``): modules and inputs, seeded;
3. **the capture** (``spec_capture``): the forward program and the steps, recorded inside the
   one capture entry (``capture``), which then makes
4. **records, analyses, the trace** (``assemble``).
"""

from __future__ import annotations

from typing import Any

from gradtrace.engine.build import build_model
from gradtrace.engine.capture import gc_paused, refuse_inside_capture
from gradtrace.engine.dryrun import dry_run
from gradtrace.engine.spec_capture import SPEC_RUN, capture_spec
from gradtrace.engine.summarize import DEFAULT_FINAL_VALUE_LIMIT, DEFAULT_VALUE_BUDGET
from gradtrace.spec.limits import SpecLimits
from gradtrace.spec.models import ModelSpec
from gradtrace.spec.price import check_price
from gradtrace.trace_schema import TraceDoc


def run_spec(
    spec: ModelSpec,
    limits: SpecLimits,
    value_budget: int = DEFAULT_VALUE_BUDGET,
    *,
    dry_run_first: bool = True,
    final_value_limit: int = DEFAULT_FINAL_VALUE_LIMIT,
    grads_out: dict[str, Any] | None = None,
) -> TraceDoc:
    """Trace a validated ModelSpec within ``limits`` (SpecLimits): the one entry point of the
    library, the CLI and the service's workers.

    Limits come before any allocation: the run's price (``check_price``: operations and calls
    counted from the programs), the declared shapes, then a dry run on the meta device
    (``dry_run`` checks both). ``dry_run_first=False`` skips them, for tests of the engine's own
    guards (the node cap before backward, torch's CPU error messages). ``grads_out``, when
    given, receives the final gradients as numpy arrays (the library's ``Trace.grads``).
    """
    refuse_inside_capture(SPEC_RUN)  # (before the dry run: inside record(), it would be recorded)
    if dry_run_first:
        check_price(spec, limits)
        dry_run(spec, limits)
    normalized = spec.normalized()  # (what the trace shows of its spec)
    with gc_paused():  # the model is built, used and dropped inside the pause, as the session is
        built = build_model(spec)
        doc, grads = capture_spec(
            spec, built, limits, value_budget, final_value_limit, normalized, grads_out is not None
        )
        del built
    if grads is not None and grads_out is not None:
        grads_out.update(grads)
    return doc
