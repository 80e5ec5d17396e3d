"""The Linear analyses computed in bulk (all calls of one shape stacked, across layers and
passes) give each layer its own numbers: checked against plain PyTorch, layer by layer, on a
model mixing stacked layers, a layer called twice and a layer of another shape."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import gradtrace
from gradtrace.engine import linear_factors
from gradtrace.engine.linear_reconstruction import compare_nan_aware, compare_stacked

INF, NAN = math.inf, math.nan


class Mixed(nn.Module):
    """a, b, c and the two calls of `shared` have (a, δ) of one shape (one stack); `head`
    another. `shared` is called twice: its W.grad sums two calls."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c, self.shared = (nn.Linear(4, 4) for _ in range(4))
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.b(torch.tanh(self.a(x))))
        h = torch.tanh(self.shared(self.shared(h)))
        return self.head(self.c(h))


def _oracle(model: Mixed, x: torch.Tensor) -> dict[str, list[tuple[torch.Tensor, torch.Tensor]]]:
    """Per weight, its calls' (a, δ) from plain autograd (no hooks): δ = ∂L/∂(layer output)."""
    za = model.a(x)
    zb = model.b(torch.tanh(za))
    h = torch.tanh(zb)
    zs1 = model.shared(h)
    zs2 = model.shared(zs1)
    h2 = torch.tanh(zs2)
    zc = model.c(h2)
    out = model.head(zc)
    deltas = torch.autograd.grad((out**2).mean(), [za, zb, zs1, zs2, zc, out])
    da, db, ds1, ds2, dc, dout = deltas
    return {
        "a.weight": [(x, da)],
        "b.weight": [(torch.tanh(za), db)],
        "shared.weight": [(h, ds1), (zs1, ds2)],
        "c.weight": [(h2, dc)],
        "head.weight": [(zc, dout)],
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
# the default (all five calls of one shape in one stack), two calls per stack, one per stack
@pytest.mark.parametrize("stack_numbers", [linear_factors.STACK_NUMBERS, 200, 1])
def test_each_layer_of_a_stack_against_pytorch(
    dtype: torch.dtype, stack_numbers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(linear_factors, "STACK_NUMBERS", stack_numbers)
    torch.manual_seed(0)
    model = Mixed().to(dtype)
    x = torch.randn(2, 5, 4, dtype=dtype)
    trace = gradtrace.trace(model, x, lambda out: (out**2).mean())
    factors = _oracle(model, x)
    linear = {r.weight: r for r in trace.doc.analyses.linear}
    per_sample = {r.weight: r for r in trace.doc.analyses.per_sample}
    assert (
        list(linear)
        == list(per_sample)
        == ["a.weight", "b.weight", "shared.weight", "c.weight", "head.weight"]
    )
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for weight, calls in factors.items():
        rec, shares = linear[weight], per_sample[weight]
        expected = sum(
            d.detach().reshape(-1, d.shape[-1]).T @ a.detach().reshape(-1, a.shape[-1]) for a, d in calls
        )
        np.testing.assert_allclose(trace.array(rec.reconstructed), expected.numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(trace.array(rec.grad), trace.grads[weight], rtol=0, atol=0)
        assert rec.matches is True and rec.max_error <= tol
        assert (shares.sum_max_error, shares.matches) == (rec.max_error, rec.matches)
        assert len(rec.a) == len(rec.delta) == len(shares.calls) == len(calls)
        for (a, d), call, a_value, d_value in zip(calls, shares.calls, rec.a, rec.delta, strict=True):
            a, d = a.detach().to(torch.float64), d.to(torch.float64)
            np.testing.assert_allclose(trace.array(a_value), a.numpy(), rtol=tol, atol=tol)
            np.testing.assert_allclose(trace.array(d_value), d.numpy(), rtol=tol, atol=tol)
            positions = d.norm(dim=-1) * a.norm(dim=-1)
            samples = torch.einsum("bto,bti->boi", d, a).flatten(1).norm(dim=1)
            np.testing.assert_allclose(
                trace.array(call.position_norms), positions.numpy(), rtol=tol, atol=1e-12
            )
            np.testing.assert_allclose(trace.array(call.sample_norms), samples.numpy(), rtol=tol, atol=1e-12)


def test_second_backward_pass_reconstructs_what_it_added() -> None:
    """retain_graph: the second pass adds the same gradient again; each pass's record holds
    what that pass added (.grad after minus before), and both stack together."""
    spec = {
        "spec_version": 1,
        "title": "two passes",
        "seed": 0,
        "modules": {
            "fc1": {"type": "Linear", "in_features": 3, "out_features": 3},
            "fc2": {"type": "Linear", "in_features": 3, "out_features": 3},
        },
        "inputs": {"x": {"shape": [4, 3], "init": "randn"}},
        "forward": ["loss = (fc2(tanh(fc1(x))) ** 2).sum()"],
        "steps": [{"do": "backward", "of": "loss", "retain_graph": True}, {"do": "backward", "of": "loss"}],
    }
    trace = gradtrace.trace_spec(spec)
    records = trace.doc.analyses.linear
    assert [(r.weight, r.pass_index) for r in records] == [
        ("fc1.weight", records[0].pass_index),
        ("fc2.weight", records[0].pass_index),
        ("fc1.weight", records[2].pass_index),
        ("fc2.weight", records[2].pass_index),
    ]
    assert records[0].pass_index != records[2].pass_index
    for first, second in zip(records[:2], records[2:], strict=True):
        assert first.matches and second.matches
        np.testing.assert_allclose(
            trace.array(second.reconstructed), trace.array(first.reconstructed), rtol=1e-6
        )
        # the final .grad holds both passes
        np.testing.assert_allclose(
            trace.grads[first.weight], 2 * trace.array(first.grad), rtol=1e-6, atol=1e-7
        )


def test_compare_stacked_is_compare_nan_aware_per_pair() -> None:
    pairs = [
        ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]),  # identical
        ([1.0, 2.0, 3.0], [1.0, 2.5, 3.0]),  # finite, differ
        ([1.0, NAN, INF], [1.0, NAN, INF]),  # the same non-finite numbers: identical bits
        ([1.0, NAN, 3.0], [1.0, 2.0, 3.0]),  # NaN where the real one has a number
        ([1.0, INF, 3.5], [1.0, -INF, 3.0]),  # opposite infinities, finite part differs
        ([0.0, 1e9, 0.0], [0.0, 1e9 + 100, 0.0]),  # within 1e-6 of the largest magnitude
        ([-0.0, 1.0, 2.0], [0.0, 1.0, 2.0]),  # equal, not the same bits
    ]
    for dtype in (torch.float32, torch.float64):
        rebuilt = torch.tensor([p[0] for p in pairs], dtype=dtype)
        real = torch.tensor([p[1] for p in pairs], dtype=dtype)
        got = compare_stacked(rebuilt, real)
        for k, (error, matches, identical) in enumerate(got):
            expected_error, expected_matches = compare_nan_aware(rebuilt[k], real[k])
            assert error == pytest.approx(expected_error) and matches is expected_matches, k
            assert identical is (k in (0, 2)), k


@pytest.mark.parametrize("shape", [(0, 3), (0, 4, 3), (3,)])
def test_empty_batch_and_single_vector(shape: tuple[int, ...]) -> None:
    """No samples (W.grad is zero) or a 1-D input (one sample of one token)."""
    layer = nn.Linear(3, 2)
    trace = gradtrace.trace(layer, torch.randn(*shape), lambda out: out.sum())
    [rec] = trace.doc.analyses.linear
    [shares] = trace.doc.analyses.per_sample
    assert rec.matches is True and shares.matches is True
    np.testing.assert_array_equal(trace.array(rec.reconstructed), trace.grads["weight"])
    [call] = shares.calls
    assert call.sample_dims == list(shape[:-1])
    assert trace.array(call.position_norms).shape == shape[:-1]
    assert shares.factor_numbers == math.prod(shape[:-1]) * (3 + 2)
    if len(shape) == 1:
        assert call.sample_norms is None
    else:
        assert trace.array(call.sample_norms).shape == (0,)
