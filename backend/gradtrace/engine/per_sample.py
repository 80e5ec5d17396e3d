"""Per-sample and per-token shares of a Linear layer's W.grad (seed 000).

The hooks see (a, δ) with their batch and token dimensions intact. Summing δ ⊗ a over both
gives ``W.grad``; "without summing over tokens you have per-token factors … without summing
over batch either, the full per-sample, per-token picture". For every position p (a sample,
or a sample's token) the contribution δ_p ⊗ a_p is a rank-one matrix whose Frobenius norm is
‖δ_p‖·‖a_p‖, so the whole B × T picture costs two norms per position. A sample's share
C_b = Σ_t δ_bt ⊗ a_bt has ‖C_b‖² = Σ_{t,s} (δ_bt·δ_bs)(a_bt·a_bs): Gram matrices, never the
d_out × d_in matrices (with one token per sample, C_b is rank one: ‖δ_b‖·‖a_b‖). The shares
add up to Σ_b C_b = Σ_{b,t} δ_bt ⊗ a_bt, the reconstruction (analyses.py): its comparison
with W.grad is the check that they do.

All calls of one shape, across layers, are computed together (linear_factors.stacked), in
float64.

And the storage payoff the seed measures: a position's factors are d_in + d_out numbers, the
gradient d_out × d_in (for d_in = d_out = 4096: 8,192 against 1.7 × 10⁷).
"""

from __future__ import annotations

import torch

from gradtrace.engine.linear_factors import Factors, LayerPass
from gradtrace.engine.summarize import Summarizer
from gradtrace.trace_schema import CallContributions, PerSampleContributions


def _norms(inputs: torch.Tensor, deltas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For stacks (calls, samples, tokens, width) of a and δ in float64: ‖δ_p ⊗ a_p‖ per
    position (calls, samples, tokens) and ‖C_b‖ per sample (calls, samples)."""
    positions = torch.linalg.vector_norm(deltas, dim=3) * torch.linalg.vector_norm(inputs, dim=3)
    calls, samples, tokens, _ = inputs.shape
    if tokens == 1:
        return positions, positions[:, :, 0]
    flat_d = deltas.reshape(calls * samples, tokens, -1)
    flat_a = inputs.reshape(calls * samples, tokens, -1)
    gram = torch.bmm(flat_d, flat_d.transpose(1, 2)) * torch.bmm(flat_a, flat_a.transpose(1, 2))
    return positions, gram.sum(dim=(1, 2)).clamp_min(0).sqrt().reshape(calls, samples)


def per_sample_records(
    layers: list[LayerPass], factors: Factors, summarize: Summarizer
) -> list[PerSampleContributions]:
    """One ``analyses.per_sample`` record per layer and pass (every call of the layer in that
    pass), from the layers' stacked factors."""
    norms = []  # per stack: (‖δ_p ⊗ a_p‖ per position, ‖C_b‖ per sample) of each call
    for factor_stack in factors.stacks:
        by_position, by_sample = _norms(
            factor_stack.inputs.to(torch.float64), factor_stack.deltas.to(torch.float64)
        )
        norms.append((by_position.unbind(0), by_sample.unbind(0)))
    out: list[PerSampleContributions] = []
    row = 0
    for layer in layers:
        d_out, d_in = layer.grad.shape
        records = []
        positions = 0
        for _call, a, delta, _summary in layer.calls:
            dims = list(a.shape[:-1])
            stack, position = factors.where[row]
            by_position, by_sample = norms[stack][0][position], norms[stack][1][position]
            positions += by_position.numel()
            records.append(
                CallContributions(
                    a_shape=list(a.shape),
                    delta_shape=list(delta.shape),
                    sample_dims=dims,
                    position_norms=summarize(by_position.reshape(dims)),
                    sample_norms=summarize(by_sample) if dims else None,
                )
            )
            row += 1
        out.append(
            PerSampleContributions(
                module=layer.module,
                weight=layer.weight,
                pass_index=layer.pass_index,
                calls=records,
                sum_max_error=layer.max_error,
                matches=layer.matches,
                factor_numbers=positions * (d_in + d_out),
                gradient_numbers=d_out * d_in,
            )
        )
    return out
