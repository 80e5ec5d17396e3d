"""The Linear analysis: each Linear weight's .grad rebuilt from (a, δ) and compared with
autograd's (the ``analyses.linear`` records; ``per_sample.py`` reads the same factors).

The (a, δ) trick (seed 000): a Linear's weight gradient is the sum over every leading
(batch, token) position and every call of δ ⊗ a, where a is the layer's input (forward hook)
and δ the gradient arriving at the node that produced its output (node pre-hook). No full
backward hooks are needed. The reconstruction is compared with what autograd accumulated into
the weight in that pass (.grad after minus .grad before).

What it observes (``LinearAnalysis.keeps_calls_of``, see analysis.py): every call of an
``nn.Linear``, with its input, and the gradient arriving at its output's node; the Linear
weights' ``.grad`` before and after each backward pass (:meth:`LinearAnalysis.before_pass`,
:meth:`LinearAnalysis.after_pass`).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from gradtrace.engine.analysis import Analysis, Backward, Finished
from gradtrace.engine.linear_factors import Call, Factors, LayerPass
from gradtrace.engine.per_sample import per_sample_records
from gradtrace.engine.summarize import Summarizer
from gradtrace.trace_schema import Analyses, LinearReconstruction, PerSampleContributions, TensorValue


class LinearAnalysis(Analysis):
    """Snapshots of Linear weights' .grad around each backward pass, then reconstruction (the
    ``linear`` and ``per_sample`` records)."""

    # what it asks of the capture: every call of these modules, with its input ``a`` and the
    # gradient δ arriving at its output's node (the capture names no analysis)
    keeps_calls_of: tuple[type[nn.Module], ...] = (nn.Linear,)

    def __init__(self) -> None:
        self.weights: dict[str, torch.Tensor] = {}  # weight name -> parameter, Linear layers only
        self._before: dict[int, dict[str, torch.Tensor | None]] = {}
        self._after: dict[int, dict[str, torch.Tensor | None]] = {}
        # per pass: weight name -> (its live .grad, that tensor's version) right after the pass
        self._live: dict[int, dict[str, tuple[torch.Tensor, int]]] = {}

    # ---- the Analysis interface ---------------------------------------------------------
    def weights_found(self, weights: dict[str, torch.Tensor]) -> None:
        self.weights.update(weights)

    def backward_starting(self, backward: Backward) -> None:
        self.before_pass(backward.pass_index)

    def backward_ended(self, backward: Backward, ok: bool) -> None:
        if ok:
            self.after_pass(backward.pass_index)

    def add(self, done: Finished, out: Analyses) -> None:
        # (the calls the forward kept, of every analysis's types: those of weights not in
        # ``weights`` are passed over)
        layers, factors = self.layer_passes(done.kept_calls, done.deltas)
        out.linear = self.build(layers, factors, done.summarize)
        out.per_sample = self.per_sample(layers, factors, done.summarize)

    @staticmethod
    def _copies(grads: dict[str, torch.Tensor | None]) -> dict[str, torch.Tensor | None]:
        """A copy of each .grad (None: none)."""
        return {name: None if grad is None else grad.detach().clone() for name, grad in grads.items()}

    def before_pass(self, pass_index: int) -> None:
        self._before[pass_index] = self._copies({name: w.grad for name, w in self.weights.items()})

    def after_pass(self, pass_index: int) -> None:
        grads = {name: w.grad for name, w in self.weights.items()}
        self._after[pass_index] = self._copies(grads)
        self._live[pass_index] = {name: (g, g._version) for name, g in grads.items() if g is not None}

    def build(
        self, layers: list[LayerPass], factors: Factors, summarize: Summarizer
    ) -> list[LinearReconstruction]:
        """The reconstruction record of every layer from :meth:`layer_passes`."""
        return [self._record(layer, factors, summarize) for layer in layers]

    @staticmethod
    def per_sample(
        layers: list[LayerPass], factors: Factors, summarize: Summarizer
    ) -> list[PerSampleContributions]:
        """Each sample's and each token's share of every Linear's W.grad (see per_sample.py),
        from :meth:`layer_passes`."""
        return per_sample_records(layers, factors, summarize)

    def layer_passes(
        self, kept_calls: Sequence[dict[str, Any]], deltas: Mapping[int, dict[str, list[tuple]]]
    ) -> tuple[list[LayerPass], Factors]:
        """Every Linear weight the backward reached and that received a gradient, per pass,
        with its reconstruction compared, and the factors stacked by shape (what both
        :meth:`build` and :meth:`per_sample` read: computed once for the two)."""
        reached = [
            (pass_index, weight, calls, grad)
            for pass_index, weight, calls in self.grouped(kept_calls, deltas)
            if (grad := self.pass_grad(weight, pass_index)) is not None
        ]
        factors = Factors((calls, grad.dtype) for _pass, _weight, calls, grad in reached)
        return reconstruct(reached, factors), factors

    def grouped(self, kept_calls: Sequence[dict[str, Any]], deltas: Mapping[int, dict[str, list[tuple]]]):
        """(pass, weight, [(call, a, δ, δ's summary)]) for every Linear call of ``kept_calls``
        the backward reached."""
        for pass_index in sorted(self._after):
            pass_deltas = deltas.get(pass_index, {})
            by_weight: dict[str, list[tuple[dict, torch.Tensor, torch.Tensor, Any]]] = {}
            for call in kept_calls:
                runs = pass_deltas.get(call["node"])
                if not runs or call["weight"] not in self.weights:
                    continue
                grads = runs[0]
                delta, summary = grads[call["output_nr"]] if call["output_nr"] < len(grads) else (None, None)
                if delta is None:
                    continue
                by_weight.setdefault(call["weight"], []).append((call, call["a"], delta, summary))
            for weight, calls in by_weight.items():
                yield pass_index, weight, calls

    def pass_grad(self, weight: str, pass_index: int) -> torch.Tensor | None:
        """What autograd accumulated into the weight in that pass (.grad after minus before)."""
        after = self._after[pass_index].get(weight)
        if after is None:
            return None
        before = self._before[pass_index].get(weight)
        return after if before is None else after - before

    def _record(self, layer: LayerPass, factors: Factors, summarize: Summarizer) -> LinearReconstruction:
        weight, pass_index = layer.weight, layer.pass_index
        before = self._before[pass_index].get(weight)
        w = self.weights[weight]
        live, version = self._live[pass_index].get(weight, (None, -1))
        # .grad unchanged since it was copied: its summary (made at the grad_write) serves
        known = (
            summarize.known(live)
            if before is None and live is w.grad and live is not None and live._version == version
            else None
        )

        def grad_value() -> TensorValue:
            return summarize(layer.grad) if known is None else summarize.like_new(known)

        # a reconstruction with the very bits of grad: one summary for both, accounted as two
        reconstructed = grad_value() if layer.identical else summarize(layer.reconstructed)
        grad = summarize.like_new(reconstructed) if layer.identical else grad_value()
        first = factors.stacks[layer.spots[0][0]]  # (its first call's stack: their shapes)
        return LinearReconstruction(
            module=layer.module,
            weight=weight,
            pass_index=pass_index,
            a_shape=first.a_shape,
            delta_shape=first.delta_shape,
            reconstructed=reconstructed,
            grad=grad,
            max_error=layer.max_error,
            matches=layer.matches,
            a=[summarize(c[1]) for c in layer.calls],
            delta=[summarize(c[2]) if c[3] is None else summarize.like_new(c[3]) for c in layer.calls],
        )


def reconstruct(
    reached: list[tuple[int, str, list[Call], torch.Tensor]], factors: Factors
) -> list[LayerPass]:
    """Each (pass, weight, calls, grad) with Σ δ ⊗ a over its calls and positions, in grad's
    dtype as autograd computes it, compared with grad: one batched matmul per stack of
    factors, one batched comparison per stack of single-call layers."""
    products = []  # per stack: δᵀ a of each call, (calls, d_out, d_in)
    for factor_stack in factors.stacks:
        # (calls, samples, tokens, width) -> (calls, positions, width)
        deltas = factor_stack.deltas.flatten(1, 2).to(factor_stack.grad_dtype)
        inputs = factor_stack.inputs.flatten(1, 2).to(factor_stack.grad_dtype)
        products.append(torch.bmm(deltas.transpose(1, 2), inputs))
    by_call = [stack.unbind(0) for stack in products]  # (one call per stack, not one per layer)
    rebuilt: list[torch.Tensor] = []
    single: dict[int, list[tuple[int, int]]] = {}  # stack -> (layer, position) of one-call layers
    several: list[int] = []  # layers called more than once in the pass
    for k, spots in enumerate(factors.where):
        if len(spots) == 1:
            stack, position = spots[0]
            single.setdefault(stack, []).append((k, position))
            rebuilt.append(by_call[stack][position])
        else:  # summed call by call, as autograd accumulates them into .grad
            rebuilt.append(functools.reduce(operator.add, (by_call[g][p] for g, p in spots)))
            several.append(k)
    compared: list[tuple[float, bool, bool]] = [(0.0, True, True)] * len(reached)
    for stack, members in single.items():
        positions = [position for _k, position in members]
        ours = products[stack]
        if positions != list(range(len(ours))):
            ours = ours[torch.tensor(positions)]
        grads = torch.stack([reached[k][3] for k, _position in members])
        for (k, _position), result in zip(members, compare_stacked(ours, grads), strict=True):
            compared[k] = result
    for k in several:
        compared[k] = compare_stacked(rebuilt[k].unsqueeze(0), reached[k][3].unsqueeze(0))[0]
    return [
        LayerPass(*layer, rebuilt[k], *compared[k], spots)
        for k, (layer, spots) in enumerate(zip(reached, factors.where, strict=True))
    ]


def _close(error: float, scale: float) -> bool:
    """The match rule: the finite part's max error within 1e-6 of the larger of 1 and the
    real tensor's largest finite magnitude (``scale``)."""
    return error <= 1e-6 * max(1.0, scale)


def compare_nan_aware(rebuilt: torch.Tensor, real: torch.Tensor) -> tuple[float, bool]:
    """(max error over the positions where both are finite, whether they match).

    NaN equals NaN and an infinity the same-signed infinity; a non-finite number anywhere
    the other tensor has something else is a mismatch. Matching also needs the finite part
    within 1e-6 of the larger of 1 and the real tensor's largest finite magnitude.
    """
    rebuilt, real = rebuilt.detach().to(torch.float64), real.detach().to(torch.float64)
    if not real.numel():
        return 0.0, True
    difference = (rebuilt - real).abs().max()
    if bool(torch.isfinite(difference)):  # the usual case: all finite on both sides
        error = float(difference)
        return error, _close(error, float(real.abs().max()))
    both_finite = torch.isfinite(rebuilt) & torch.isfinite(real)
    same_non_finite = (torch.isnan(rebuilt) & torch.isnan(real)) | (torch.isinf(real) & (rebuilt == real))
    agree_non_finite = bool((both_finite | same_non_finite).all())
    if not bool(both_finite.any()):
        return 0.0, agree_non_finite
    error = float((rebuilt - real)[both_finite].abs().max())
    return error, agree_non_finite and _close(error, float(real[both_finite].abs().max()))


_SAME_SIZE_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def compare_stacked(rebuilt: torch.Tensor, real: torch.Tensor) -> list[tuple[float, bool, bool]]:
    """:func:`compare_nan_aware` of every pair in two stacks of same-shaped tensors, and
    whether the pair is identical bit for bit: (max_error, matches, identical) per pair.

    One pass over all pairs; the float64 difference only for pairs that differ, and the
    element-wise non-finite comparison only for those whose difference is not finite.
    """
    count = rebuilt.shape[0]
    if not rebuilt[0].numel():
        return [(0.0, True, True)] * count
    rebuilt, real = rebuilt.detach().reshape(count, -1), real.detach().reshape(count, -1)
    identical = [False] * count
    if rebuilt.dtype == real.dtype and rebuilt.is_floating_point():
        bits = _SAME_SIZE_INT[rebuilt.element_size()]
        identical = (rebuilt.view(bits) == real.view(bits)).all(dim=1).tolist()
    out = [(0.0, True, True)] * count
    differ = [k for k in range(count) if not identical[k]]
    if not differ:
        return out
    pick = slice(None) if len(differ) == count else torch.tensor(differ)
    rebuilt64, real64 = rebuilt[pick].to(torch.float64), real[pick].to(torch.float64)
    errors = (rebuilt64 - real64).abs().amax(dim=1).tolist()
    scales = real64.abs().amax(dim=1).tolist()
    for k, error, scale in zip(differ, errors, scales, strict=True):
        if math.isfinite(error):  # the usual case: all finite on both sides
            out[k] = (error, _close(error, scale), False)
        else:
            out[k] = (*compare_nan_aware(rebuilt[k], real[k]), False)
    return out
