"""The captured (a, δ) factors of the Linear layers a backward reached, stacked by shape for
the two analyses of them: the reconstruction of W.grad (linear_reconstruction.py) and the per-sample,
per-token picture (per_sample.py).

A model repeats its layers: chain60 has 60 Linear calls of one shape, a TransformerEncoder
the same two per layer. One batched matmul (or norm) over every call of a shape costs about
what a single one does, where a loop pays torch's per-call overhead for every layer; and
both analyses read the same stacks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

# one call of a Linear layer: (the forward capture's record of it, a, δ, δ's summary)
Call = tuple[dict[str, Any], torch.Tensor, torch.Tensor, Any]


@dataclass(slots=True)
class LayerPass:
    """One Linear weight in one backward pass: every call of it the backward reached, what
    autograd accumulated into it, and the reconstruction Σ δ ⊗ a compared with that."""

    pass_index: int
    weight: str
    calls: list[Call]
    grad: torch.Tensor  # .grad after the pass minus before
    reconstructed: torch.Tensor  # Σ over calls and positions of δ ⊗ a, in grad's dtype
    max_error: float  # see LinearReconstruction
    matches: bool
    identical: bool  # the reconstruction has the very bits of grad
    spots: list[tuple[int, int]]  # (stack, position) in the Factors of each call, in order

    @property
    def module(self) -> str:
        return self.calls[0][0]["module"]


def samples_and_tokens(shape: torch.Size) -> tuple[int, int]:
    """A factor of this shape (..., width) read as (samples, tokens, width): the first dim is
    the sample, the others tokens; a 1-D factor is one sample of one token."""
    if len(shape) == 1:
        return 1, 1
    tokens = 1
    for size in shape[1:-1]:
        tokens *= size
    return shape[0], tokens


@dataclass(slots=True)
class FactorStack:
    """The calls of one shape: a and δ as (calls, samples, tokens, width) in their own dtype,
    the dtype of their weights' gradients, and the shape of each call's a and δ (one list
    for every record of these calls: read-only, as the Summarizer's shape lists)."""

    inputs: torch.Tensor
    deltas: torch.Tensor
    grad_dtype: torch.dtype
    a_shape: list[int]
    delta_shape: list[int]


# numbers per stack, counting a, δ and the d_out x d_in product of each call: bounds the
# extra memory of the stacks and their float64 copies (chain60's 60 calls hold ~120 k)
STACK_NUMBERS = 1 << 22


class Factors:
    """Every call's (a, δ), stacked by shape across layers and passes (a stack holds up to
    STACK_NUMBERS numbers, or one call).

    ``where[k][c]`` is (stack, position in it) of the k-th layer's c-th call, layers in the
    order given.
    """

    def __init__(self, layers: Iterable[tuple[list[Call], torch.dtype]]) -> None:
        flat: list[Call] = []
        spot_of: list[tuple[int, int]] = []  # per call in flat: (its layer, its index in the layer)
        self.where: list[list[tuple[int, int]]] = []
        by_shape: dict[tuple, list[int]] = {}
        for calls, grad_dtype in layers:
            for c, call in enumerate(calls):
                a, delta = call[1], call[2]
                key = (a.shape, delta.shape, a.dtype, delta.dtype, a.device, grad_dtype)
                by_shape.setdefault(key, []).append(len(flat))
                flat.append(call)
                spot_of.append((len(self.where), c))
            self.where.append([(0, 0)] * len(calls))
        self.stacks: list[FactorStack] = []
        for (a_shape, delta_shape, *_, grad_dtype), members in by_shape.items():
            samples, tokens = samples_and_tokens(a_shape)
            d_in, d_out = a_shape[-1], delta_shape[-1]
            a_list, delta_list = list(a_shape), list(delta_shape)
            per_call = samples * tokens * (d_in + d_out) + d_out * d_in
            size = max(1, STACK_NUMBERS // max(1, per_call))
            for start in range(0, len(members), size):
                chunk = members[start : start + size]
                for position, c in enumerate(chunk):
                    layer, index = spot_of[c]
                    self.where[layer][index] = (len(self.stacks), position)
                inputs = _stack([flat[c][1] for c in chunk]).reshape(len(chunk), samples, tokens, d_in)
                deltas = _stack([flat[c][2] for c in chunk]).reshape(len(chunk), samples, tokens, d_out)
                self.stacks.append(FactorStack(inputs, deltas, grad_dtype, a_list, delta_list))


def _stack(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(tensors) if len(tensors) > 1 else tensors[0].unsqueeze(0)
