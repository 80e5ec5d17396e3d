"""Per-sample and per-token shares of a Linear layer's W.grad (seed 000).

The hooks see (a, δ) with their batch and token dimensions intact. Summing δ ⊗ a over both
gives ``W.grad``; "without summing over tokens you have per-token factors … without summing
over batch either, the full per-sample, per-token picture". For every position p (a sample,
or a sample's token) the contribution δ_p ⊗ a_p is a rank-one matrix whose Frobenius norm is
‖δ_p‖·‖a_p‖, so the whole B × T picture costs two norms per position. A sample's share
C_b = Σ_t δ_bt ⊗ a_bt has ‖C_b‖² = Σ_{t,s} (δ_bt·δ_bs)(a_bt·a_bs): Gram matrices, never the
d_out × d_in matrices. The check that the shares add up builds them (Σ_b C_b, a different
order of summation from the reconstruction's) while they stay small.

And the storage payoff the seed measures: a position's factors are d_in + d_out numbers, the
gradient d_out × d_in (for d_in = d_out = 4096: 8,192 against 1.7 × 10⁷).
"""

from __future__ import annotations

import torch

from gradtrace.engine.summarize import Summarizer
from gradtrace.trace_schema import CallContributions, PerSampleContributions

# Σ_b C_b is checked by building every C_b while B × d_out × d_in stays below this.
CHECK_ELEMENTS = 1 << 22


def _positions(t: torch.Tensor, width: int) -> torch.Tensor:
    """(..., width) as (samples, tokens, width): the first dim is the sample, the rest tokens."""
    t = t.detach().to(torch.float64)
    if t.dim() == 1:
        return t.reshape(1, 1, width)
    return t.reshape(t.shape[0], -1, width)


def per_sample_record(
    weight: str, pass_index: int, calls: list[tuple], grad: torch.Tensor, summarize: Summarizer
) -> tuple[PerSampleContributions, torch.Tensor | None]:
    """One ``analyses.per_sample`` record (every call of the layer in this pass), and the sum
    of the per-sample shares for the caller to check against W.grad (None when too large to
    build: then ``sum_max_error`` and ``matches`` stay null)."""
    d_out, d_in = grad.shape
    records = []
    total = torch.zeros(d_out, d_in, dtype=torch.float64)
    checked = True
    positions = 0
    for _call, a, delta, _summary in calls:
        dims = list(a.shape[:-1])
        a3, d3 = _positions(a, d_in), _positions(delta, d_out)
        positions += a3.shape[0] * a3.shape[1]
        position_norms = (d3.norm(dim=2) * a3.norm(dim=2)).reshape(dims)
        gram = torch.einsum("bto,bso->bts", d3, d3) * torch.einsum("bti,bsi->bts", a3, a3)
        sample_norms = gram.sum(dim=(1, 2)).clamp_min(0).sqrt()
        if checked and a3.shape[0] * d_out * d_in <= CHECK_ELEMENTS:
            total += torch.einsum("bto,bti->boi", d3, a3).sum(dim=0)
        else:
            checked = False
        records.append(
            CallContributions(
                a_shape=list(a.shape),
                delta_shape=list(delta.shape),
                sample_dims=dims,
                position_norms=summarize(position_norms),
                sample_norms=summarize(sample_norms) if len(dims) >= 1 else None,
            )
        )
    record = PerSampleContributions(
        module=calls[0][0]["module"],
        weight=weight,
        pass_index=pass_index,
        calls=records,
        sum_max_error=None,
        matches=None,
        factor_numbers=positions * (d_in + d_out),
        gradient_numbers=d_out * d_in,
    )
    return record, total if checked else None
