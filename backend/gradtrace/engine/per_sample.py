"""Per-sample and per-token shares of a Linear layer's W.grad (seed 000).

The hooks see (a, δ) with their batch and token dimensions intact. Summing δ ⊗ a over both
gives ``W.grad``; "without summing over tokens you have per-token factors … without summing
over batch either, the full per-sample, per-token picture". For every position p (a sample,
or a sample's token) the contribution δ_p ⊗ a_p is a rank-one matrix whose Frobenius norm is
‖δ_p‖·‖a_p‖, so the whole B × T picture costs two norms per position. A sample's share
C_b = Σ_t δ_bt ⊗ a_bt has ‖C_b‖² = Σ_{t,s} (δ_bt·δ_bs)(a_bt·a_bs): Gram matrices, never the
d_out × d_in matrices (with one token per sample, C_b is rank one: ‖δ_b‖·‖a_b‖). The shares
add up to Σ_b C_b = Σ_{b,t} δ_bt ⊗ a_bt, the reconstruction (linear_reconstruction.py): its
comparison with W.grad is the check that they do.

All calls of one shape, across layers, are computed together (linear_factors.Factors), in
float64.

And the storage payoff the seed measures: a position's factors are d_in + d_out numbers, the
gradient d_out × d_in (for d_in = d_out = 4096: 8,192 against 1.7 × 10⁷).
"""

from __future__ import annotations

import torch

from gradtrace.engine.linear_factors import Factors, LayerPass
from gradtrace.engine.summarize import Summarizer
from gradtrace.trace_schema import CallContributions, PerSampleContributions, TensorValue


def _norms(inputs: torch.Tensor, deltas: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """For stacks (calls, samples, tokens, width) of a and δ in float64: ‖δ_p ⊗ a_p‖ per
    position (calls, samples, tokens) and ‖C_b‖ per sample (calls, samples); None for the
    latter with one token per sample, where C_b is rank one and its norm the position's."""
    calls, samples, tokens, _ = inputs.shape
    if tokens == 1:
        return torch.linalg.vector_norm(deltas, dim=3) * torch.linalg.vector_norm(inputs, dim=3), None
    flat_d, flat_a = deltas.flatten(0, 1), inputs.flatten(0, 1)  # (calls x samples, tokens, width)
    gram_d, gram_a = torch.bmm(flat_d, flat_d.transpose(1, 2)), torch.bmm(flat_a, flat_a.transpose(1, 2))
    # the Grams' diagonals are the squared norms ‖δ_p‖², ‖a_p‖²
    positions = (gram_d.diagonal(dim1=1, dim2=2) * gram_a.diagonal(dim1=1, dim2=2)).sqrt()
    by_sample = (gram_d * gram_a).sum(dim=(1, 2)).clamp_min(0).sqrt()
    return positions.reshape(calls, samples, tokens), by_sample.reshape(calls, samples)


def _sample_norms(
    summarize: Summarizer,
    dims: list[int],
    by_position: torch.Tensor,
    by_sample: torch.Tensor | None,
    positions: TensorValue,
) -> TensorValue | None:
    """The record of ‖C_b‖ per sample (None for a 1-D factor: no sample dim)."""
    if not dims:
        return None
    if by_sample is not None:
        return summarize(by_sample)
    if len(dims) == 1:  # one token per sample, and the positions are the samples: their record
        return summarize.like_new(positions)
    return summarize(by_position.reshape(dims[0]))


def per_sample_records(
    layers: list[LayerPass], factors: Factors, summarize: Summarizer
) -> list[PerSampleContributions]:
    """One ``analyses.per_sample`` record per layer and pass (every call of the layer in that
    pass), from the layers' stacked factors."""
    # per stack: its calls' sample dims, positions per call, ‖δ_p ⊗ a_p‖ per position (shaped
    # as the sample dims) and ‖C_b‖ per sample (None: one token) of each call
    norms: list[tuple[list[int], int, tuple[torch.Tensor, ...], tuple[torch.Tensor, ...] | None]] = []
    for factor_stack in factors.stacks:
        by_position, by_sample = _norms(
            factor_stack.inputs.to(torch.float64), factor_stack.deltas.to(torch.float64)
        )
        calls, samples, tokens = by_position.shape
        dims = factor_stack.a_shape[:-1]
        norms.append(
            (
                dims,
                samples * tokens,
                by_position.reshape(calls, *dims).unbind(0),
                None if by_sample is None else by_sample.unbind(0),
            )
        )
    out: list[PerSampleContributions] = []
    for layer in layers:
        d_out, d_in = layer.grad.shape
        records = []
        positions = 0
        for stack, position in layer.spots:
            dims, numel, by_positions, by_samples = norms[stack]
            by_position = by_positions[position]
            by_sample = None if by_samples is None else by_samples[position]
            positions += numel
            position_norms = summarize(by_position)
            records.append(
                CallContributions(
                    a_shape=factors.stacks[stack].a_shape,
                    delta_shape=factors.stacks[stack].delta_shape,
                    sample_dims=dims,
                    position_norms=position_norms,
                    sample_norms=_sample_norms(summarize, dims, by_position, by_sample, position_norms),
                )
            )
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
