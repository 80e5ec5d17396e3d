"""The Linear (a, δ) reconstruction compared NaN-aware (issue 8 item 5): NaN equals NaN, an
infinity the same-signed infinity; max_error is over the finite part."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import gradtrace
from gradtrace.engine.linear_reconstruction import compare_nan_aware

INF, NAN = math.inf, math.nan


@pytest.mark.parametrize(
    ("rebuilt", "real", "error", "matches"),
    [
        ([1.0, NAN, INF, -INF], [1.0, NAN, INF, -INF], 0.0, True),
        ([1.0, NAN], [1.5, NAN], 0.5, False),  # the finite part differs
        ([1.0, NAN], [1.0, 2.0], 0.0, False),  # NaN where autograd has a number
        ([1.0, INF], [1.0, -INF], 0.0, False),  # infinities of opposite sign
        ([INF, 2.0], [NAN, 2.0], 0.0, False),
        ([NAN, NAN], [NAN, NAN], 0.0, True),  # nothing finite to compare: equal all the same
        ([1e9, 0.0], [1e9 + 1e-4, 0.0], 1e-4, True),  # within 1e-6 of the largest magnitude
    ],
)
def test_compare_nan_aware(rebuilt: list, real: list, error: float, matches: bool) -> None:
    got_error, got_matches = compare_nan_aware(
        torch.tensor(rebuilt, dtype=torch.float64), torch.tensor(real, dtype=torch.float64)
    )
    assert got_error == pytest.approx(error, abs=1e-6) and got_matches is matches


@pytest.mark.parametrize("bad", [INF, -INF, NAN])
def test_reconstruction_with_non_finite_inputs_matches_real_grad(bad: float) -> None:
    layer = nn.Linear(3, 2)
    x = torch.tensor([[1.0, bad, 2.0], [0.5, 1.0, -1.0]])
    trace = gradtrace.trace(layer, x, lambda y: y.sum())
    [rec] = trace.doc.analyses.linear
    grad = layer.weight.grad.numpy()
    assert not np.isfinite(grad).all()  # the real W.grad holds NaN or inf
    assert rec.matches is True and rec.max_error == 0.0
    assert np.array_equal(trace.grads["weight"], grad, equal_nan=True)
