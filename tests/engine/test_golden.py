"""Golden traces: the exact structure of a few traces, floats approximately.

The viewer and export tests use tests/engine/golden/*.json as fixtures too.
Regenerate: GRADTRACE_UPDATE_GOLDEN=1 .venv/bin/pytest tests/engine/test_golden.py
"""

from __future__ import annotations

import torch
from engine_models import Seed002Net, seed000_case, seed002_loss
from engine_specs import SEED001_RETAIN, SEED001_TENSOR_HOOKS, seed002
from golden_util import check_golden

import gradtrace


def test_golden_module_seed002() -> None:
    x = torch.tensor([0.3], requires_grad=True)
    trace = gradtrace.trace(Seed002Net(), x, seed002_loss, title="Seed 002 as an nn.Module")
    check_golden("module_seed002", trace.to_dict())


def test_golden_module_seed000_mlp() -> None:
    model, x, y = seed000_case()
    trace = gradtrace.trace(
        model, x, lambda out: 0.5 * ((out - y) ** 2).sum(), title="Seed 000 MLP (B=5, T=6) as an nn.Module"
    )
    check_golden("module_seed000_mlp", trace.to_dict())


def test_golden_spec_seed002_full_hook_scaled() -> None:
    check_golden("spec_seed002_full_backward_hook", gradtrace.trace_spec(seed002()).to_dict())


def test_golden_spec_seed001_retain_graph_error() -> None:
    check_golden("spec_seed001_retain_graph", gradtrace.trace_spec(SEED001_RETAIN).to_dict())


def test_golden_spec_seed001_tensor_hooks() -> None:
    check_golden("spec_seed001_tensor_hooks", gradtrace.trace_spec(SEED001_TENSOR_HOOKS).to_dict())
