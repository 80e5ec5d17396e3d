"""The capture and Python's cyclic GC: paused while tracing, the user's state restored exactly,
and a finished trace leaves no cyclic garbage behind (its session and every tensor it held
are freed by reference counting, not by a later full collection over all of them)."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest
import torch
from torch import nn

import gradtrace
from gradtrace.engine import run_spec
from gradtrace.examples import get_example
from gradtrace.spec import SpecLimits, parse_spec
from gradtrace.trace_schema import TraceDoc


def _model() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 2)), torch.randn(3, 4)


@pytest.fixture
def gc_state() -> Iterator[None]:
    enabled = gc.isenabled()
    yield
    (gc.enable if enabled else gc.disable)()


@pytest.mark.parametrize("enabled", [True, False])
def test_the_users_gc_state_is_restored_exactly(enabled: bool, gc_state: None) -> None:
    model, x = _model()
    (gc.enable if enabled else gc.disable)()
    gradtrace.trace(model, x, lambda out: out.pow(2).mean())
    assert gc.isenabled() is enabled
    with pytest.raises(ValueError, match="scalar"):  # a failing trace restores it too
        gradtrace.trace(model, x, lambda out: out)
    assert gc.isenabled() is enabled
    gradtrace.trace_spec(get_example("full-backward-hook"))
    assert gc.isenabled() is enabled


def test_gc_is_paused_until_the_final_gradients_are_copied(
    gc_state: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gradtrace.engine import assemble as assemble_module

    seen: list[bool] = []
    copy = assemble_module.exact_array

    def watched(t: torch.Tensor):  # noqa: ANN202
        seen.append(gc.isenabled())
        return copy(t)

    monkeypatch.setattr(assemble_module, "exact_array", watched)
    gc.enable()
    model, x = _model()
    trace = gradtrace.trace(model, x, lambda out: out.pow(2).mean())
    assert seen and not any(seen) and gc.isenabled()
    # the copies are the real final gradients
    for name, p in model.named_parameters():
        assert (trace.grads[name] == p.grad.numpy()).all()


def _library_trace() -> gradtrace.Trace:
    model, x = _model()
    return gradtrace.trace(model, x, lambda out: out.pow(2).mean())


def _recorded_trace() -> gradtrace.Trace:
    model, x = _model()
    with gradtrace.record() as rec:
        loss = model(x).pow(2).mean()
        loss.backward()
    return rec.trace


_SPEC = parse_spec(get_example("full-backward-hook"))  # (networkx's graphs of a parse are cyclic)


def _spec_trace() -> TraceDoc:
    return run_spec(_SPEC, SpecLimits.local())


@pytest.mark.parametrize(
    "make", [_library_trace, _recorded_trace, _spec_trace], ids=["library", "record", "spec"]
)
def test_a_finished_trace_leaves_no_cyclic_garbage(make: Callable[[], object], gc_state: None) -> None:
    make()  # warm-up (imports, caches)
    gc.collect()
    gc.disable()
    trace = make()
    del trace
    flags = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        # (torch's own pytree flattening leaves small closure cycles: not the trace's)
        leftovers = sorted(
            {
                type(o).__name__
                for o in gc.garbage
                if isinstance(o, torch.Tensor)
                or type(o).__module__.startswith(("gradtrace", "torch.autograd"))
            }
        )
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
    assert leftovers == []


def test_trace_records_are_not_tracked_by_the_gc() -> None:
    model, x = _model()
    doc = gradtrace.trace(model, x, lambda out: out.pow(2).mean()).doc
    assert not gc.is_tracked(doc)
    assert not any(gc.is_tracked(node) for node in doc.graph.nodes)
    assert not any(gc.is_tracked(event) for event in doc.events)
