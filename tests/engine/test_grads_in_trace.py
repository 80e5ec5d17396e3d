"""Trace.grads of a traced model: a gradient whose exact numbers the trace holds is decoded
from its block when first read (GradInTrace), any other is a copy made at trace time; both
are the very bits of the model's .grad, in its dtype (bfloat16 as float32)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradtrace
from gradtrace.engine.summarize import exact_array
from gradtrace.trace_schema import GradInTrace


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_grads_are_the_exact_gradients_in_their_dtype(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 40), torch.nn.Tanh(), torch.nn.Linear(40, 3)).to(dtype)
    x = torch.randn(5, 6, dtype=dtype, requires_grad=True)
    trace = gradtrace.trace(model, x, lambda y: (y.float() ** 2).sum(), retain_grad=True)
    held = trace._grads
    assert held is not None and isinstance(held["0.weight"], GradInTrace)  # (240 numbers: a block)
    grads = trace.grads
    want = {name: p.grad for name, p in model.named_parameters()} | {"x": x.grad}
    for name, grad in want.items():
        assert grads[name].dtype == exact_array(grad).dtype, name
        assert grads[name].tobytes() == exact_array(grad).tobytes(), name
    assert grads["output"] is not None  # a retained tensor's, too
    assert not any(isinstance(g, GradInTrace) for g in trace._grads.values())  # decoded once
    assert trace.grads["0.weight"] is grads["0.weight"]


def test_gradients_the_trace_cuts_are_copies_and_doc_edits_change_nothing() -> None:
    torch.manual_seed(1)
    model = torch.nn.Linear(30, 30)
    trace = gradtrace.trace(model, torch.randn(4, 30), value_budget=0, final_value_limit=100)  # weight: stats
    held = trace._grads
    assert held is not None
    assert isinstance(held["weight"], np.ndarray) and isinstance(held["bias"], GradInTrace)
    trace.doc.tensor_data = []  # (what is serialised changes; the gradients do not)
    trace.doc.grads["bias"] = None
    assert np.array_equal(trace.grads["bias"], model.bias.grad.numpy())
    assert np.array_equal(trace.grads["weight"], model.weight.grad.numpy())
