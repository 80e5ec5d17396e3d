"""analyses.per_sample against plain PyTorch: each sample's share of W.grad is the gradient of
that sample's own part of the loss, each token's is ‖δ‖·‖a‖, and the shares add up to W.grad."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import gradtrace
from gradtrace.examples import get_example


class TokenMLP(nn.Module):
    """Seed 000's MLP: (B, T, 4) -> Linear(4, 3) -> ReLU -> Linear(3, 2)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.fc2 = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sample_and_token_shares_against_pytorch(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = TokenMLP().to(dtype)
    x, y = torch.randn(5, 6, 4, dtype=dtype), torch.randn(5, 6, 2, dtype=dtype)
    count = y.numel()

    def loss_fn(out: torch.Tensor) -> torch.Tensor:
        return ((out - y) ** 2).mean()

    trace = gradtrace.trace(model, x, loss_fn)
    records = {r.weight: r for r in trace.doc.analyses.per_sample}
    assert set(records) == {"fc1.weight", "fc2.weight"}

    # the oracle, without hooks: z = fc(a), δ = ∂L/∂z, and per sample the gradient of its own
    # part of the loss (samples do not interact in this model)
    a1 = x
    z1 = model.fc1(a1)
    a2 = torch.relu(z1)
    z2 = model.fc2(a2)
    d1, d2 = torch.autograd.grad(loss_fn(z2), [z1, z2])
    per_sample_grads = []
    for b in range(x.shape[0]):
        part = ((model(x[b : b + 1]) - y[b : b + 1]) ** 2).sum() / count
        per_sample_grads.append(torch.autograd.grad(part, [model.fc1.weight, model.fc2.weight]))
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    for k, (weight, a, delta) in enumerate([("fc1.weight", a1, d1), ("fc2.weight", a2, d2)]):
        rec = records[weight]
        (call,) = rec.calls
        assert call.sample_dims == [5, 6]
        tokens = trace.array(call.position_norms)
        expected_tokens = (delta.norm(dim=-1) * a.detach().norm(dim=-1)).numpy()
        np.testing.assert_allclose(tokens, expected_tokens, rtol=tol, atol=tol)
        samples = trace.array(call.sample_norms)
        expected_samples = np.array([float(g[k].norm()) for g in per_sample_grads])
        np.testing.assert_allclose(samples, expected_samples, rtol=1e-5 if tol > 1e-6 else 1e-10, atol=tol)
        # the shares add up to what autograd stored in .grad
        assert rec.matches is True
        assert rec.sum_max_error <= (1e-12 if dtype == torch.float64 else 1e-6)
        d_out, d_in = delta.shape[-1], a.shape[-1]
        assert rec.gradient_numbers == d_out * d_in
        assert rec.factor_numbers == 5 * 6 * (d_in + d_out)


def test_seed_000_example_shares_sum_to_w_grad() -> None:
    trace = gradtrace.trace_spec(get_example("mlp-hooks-reconstruction"))
    records = trace.doc.analyses.per_sample
    assert {r.weight for r in records} == {r.weight for r in trace.doc.analyses.linear}
    for rec in records:
        assert rec.matches is True and rec.sum_max_error <= 1e-6 * max(
            1.0, float(np.abs(trace.grads[rec.weight]).max())
        )


def test_seed_000_storage_payoff() -> None:
    """The seed's figures: for d_in = d_out = 4096 the gradient is 1.7e7 numbers, a token's
    factors 8,192."""
    torch.manual_seed(0)
    layer = nn.Linear(4096, 4096, bias=False)
    trace = gradtrace.trace(layer, torch.randn(1, 4096), lambda out: out.sum())
    (rec,) = trace.doc.analyses.per_sample
    assert rec.gradient_numbers == 4096 * 4096 == 16_777_216
    assert rec.factor_numbers == 8_192
    # the shares' sum is the reconstruction: checked however large the layer
    assert rec.matches is True and rec.sum_max_error == trace.doc.analyses.linear[0].max_error


class ThreeShapes(nn.Module):
    """One Linear called on three shapes in one pass: (B, T, d), a single vector (no sample
    dim) and (B, 1, d) (one token per sample, two sample dims)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).pow(2).sum() + self.fc(x[0, 0]).sum() + self.fc(x[:, :1]).pow(3).sum()


def test_calls_of_several_shapes_against_pytorch() -> None:
    torch.manual_seed(0)
    model = ThreeShapes().double()
    x = torch.randn(4, 5, 3, dtype=torch.float64)
    trace = gradtrace.trace(model, x)
    (rec,) = trace.doc.analyses.per_sample
    # the oracle, without hooks: each call's input a and the gradient δ at its output
    inputs = [x, x[0, 0], x[:, :1]]
    outputs = [model.fc(a) for a in inputs]
    loss = outputs[0].pow(2).sum() + outputs[1].sum() + outputs[2].pow(3).sum()
    deltas = torch.autograd.grad(loss, outputs)
    assert [c.a_shape for c in rec.calls] == [[4, 5, 3], [3], [4, 1, 3]]
    assert [c.delta_shape for c in rec.calls] == [[4, 5, 2], [2], [4, 1, 2]]
    assert [c.sample_dims for c in rec.calls] == [[4, 5], [], [4, 1]]
    for call, a, delta in zip(rec.calls, inputs, deltas, strict=True):
        expected = (delta.norm(dim=-1) * a.norm(dim=-1)).numpy()
        np.testing.assert_allclose(trace.array(call.position_norms), expected, rtol=1e-12)
        if not call.sample_dims:
            assert call.sample_norms is None  # a single vector: no sample to split by
            continue
        shares = torch.einsum("bto,bti->boi", delta.flatten(1, -2), a.flatten(1, -2))  # C_b
        np.testing.assert_allclose(
            trace.array(call.sample_norms), shares.flatten(1).norm(dim=1).numpy(), rtol=1e-12
        )
    assert rec.matches is True and rec.factor_numbers == (20 + 1 + 4) * (3 + 2)
    [linear] = trace.doc.analyses.linear
    assert linear.a_shape == [4, 5, 3] and linear.delta_shape == [4, 5, 2]  # its first call's
