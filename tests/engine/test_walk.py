"""The engine reads as one walk: spec → built model → capture → records, analyses → trace.

Followed from an entry point, the modules its own code calls into (calls whose every frame up
to the entry point is gradtrace's: not hooks torch calls back) form a walk; consecutive calls
into one module are one stay. At the entry point's level each stage is a module entered once,
in the pipeline's order, and the assembly enters each analysis once, in its order: a reader
never goes back to a module they had left.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import CodeType
from typing import Any

import torch
from torch import nn

import gradtrace
from gradtrace.engine import capture, spec_pipeline
from gradtrace.examples import get_example
from gradtrace.spec import SpecLimits, parse_spec


def walk(entry: CodeType, depth: int, call: Callable[[], Any]) -> list[str]:
    """The stays of ``call()``'s walk, below the frame running ``entry``, ``depth`` calls deep
    at most: each a module name (``gradtrace.`` left out)."""
    stays: list[str] = []

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("gradtrace."):
            return
        caller, level = frame.f_back, 1
        while caller is not None and caller.f_code is not entry:
            if not caller.f_globals.get("__name__", "").startswith("gradtrace."):
                return  # (torch called it: a hook, not the walk)
            caller, level = caller.f_back, level + 1
        if caller is None or level > depth:
            return
        name = module.removeprefix("gradtrace.")
        if not stays or stays[-1] != name:
            stays.append(name)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return stays


def _stage(stays: list[str], first: str, last: str) -> list[str]:
    """The part of a walk from the stay ``first`` to the stay ``last``, both included."""
    start = stays.index(first)
    return stays[start : stays.index(last, start) + 1]


def test_a_spec_walks_each_stage_once_in_order() -> None:
    spec = parse_spec(get_example("mlp-hooks-reconstruction"))
    stays = walk(spec_pipeline.run_spec.__code__, 1, lambda: spec_pipeline.run_spec(spec, SpecLimits()))
    assert stays == [
        "engine.capture",  # no capture running in this thread (one at a time), before anything runs
        "spec.price",  # the price, from the programs
        "engine.dryrun",  # the limits, on the meta device
        "spec.models",  # the normalized spec the trace carries
        "engine.build",  # the built model
        "engine.spec_capture",  # the capture (inside the one entry), then the trace
    ]


def _model_and_input() -> tuple[nn.Module, torch.Tensor]:
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)), torch.randn(2, 3)


def test_a_spec_and_a_module_run_inside_the_one_capture_entry() -> None:
    """A spec's program and trace()'s forward and backward are each the block of a Capture:
    started, the block run, finished (the one assembly), as a record() block is."""
    spec = parse_spec(get_example("mlp-hooks-reconstruction"))
    entry = capture.Capture.run.__code__
    assert walk(entry, 1, lambda: spec_pipeline.run_spec(spec, SpecLimits())) == [
        "engine.capture",
        "engine.spec_capture",  # the block: the spec's program and steps
        "engine.capture",
    ]
    model, x = _model_and_input()
    assert walk(entry, 1, lambda: gradtrace.trace(model, x, lambda out: out.sum())) == [
        "engine.capture",
        "engine.run",  # the block: the forward and the backward, as a program writes them
        "engine.capture",
    ]


def test_every_capture_finishes_through_the_one_assembly() -> None:
    spec = parse_spec(get_example("mlp-hooks-reconstruction"))
    model, x = _model_and_input()

    def program() -> None:
        with gradtrace.record():
            model(x).sum().backward()

    finish = capture.Capture.finish.__code__
    # a spec, trace() and record() end the same session (session.TraceSession)
    assert walk(finish, 1, lambda: spec_pipeline.run_spec(spec, SpecLimits())) == [
        "engine.recorder",  # the graph's nodes, held until the session is gone
        "engine.session",  # the block ended: passes left open end
        "engine.assemble",  # records, analyses, the trace
        "engine.graph_walk",  # the graph let go newest node first (no recursion as deep as it)
        "engine.capture",  # the GC pause ends
    ]
    after_block = [
        "engine.assemble",  # records, analyses, the trace
        "engine.graph_walk",  # the graph let go newest node first
        "engine.assemble",  # the final gradients copied
        "engine.caller_warnings",  # the model's warnings, issued again
        "engine.graph_walk",  # (the finally's release: nothing left by then)
        "engine.capture",
    ]
    assert walk(finish, 1, lambda: gradtrace.trace(model, x, lambda out: out.sum())) == [
        "engine.recorder",
        "engine.session",
        *after_block,
    ]
    assert walk(finish, 1, program) == ["engine.recorder", "engine.session", *after_block]


def test_the_assembly_enters_each_analysis_once_after_the_records() -> None:
    spec = parse_spec(get_example("mlp-hooks-reconstruction"))
    stays = walk(capture.Capture.finish.__code__, 2, lambda: spec_pipeline.run_spec(spec, SpecLimits()))
    assembly = _stage(stays, "engine.assemble", "engine.grad_norms")
    # (engine.analysis: the interface's methods an analysis leaves as they are, doing nothing)
    assert [stay for stay in assembly if stay not in ("engine.assemble", "engine.analysis")] == [
        "engine.session",  # the capture closed
        "engine.diagnostics",  # analyses.ANALYSES in its order
        "engine.memory",
        "engine.linear_reconstruction",  # W.grad from (a, δ), per-sample factors
        "engine.summarize",  # every record's numbers read to the host at once
        "engine.grad_norms",  # each pass's norms, then the final ones (off the values' stats)
    ]
