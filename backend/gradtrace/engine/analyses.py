"""Analyses computed from what the capture saw: Linear W.grad rebuilt from (a, δ), gradient
norms, diagnostics.

The (a, δ) trick (seed 000): a Linear's weight gradient is the sum over every leading
(batch, token) position and every call of δ ⊗ a, where a is the layer's input (forward hook)
and δ the gradient arriving at the node that produced its output (node pre-hook). No full
backward hooks are needed. The reconstruction is compared with what autograd accumulated into
the weight in that pass (.grad after minus .grad before).
"""

from __future__ import annotations

from typing import Any

import torch

from gradtrace.engine.per_sample import per_sample_record
from gradtrace.engine.summarize import Summarizer, finite_or_name
from gradtrace.trace_schema import (
    Diagnostic,
    GradNorm,
    GraphEdge,
    LinearReconstruction,
    PerSampleContributions,
    Severity,
)


class LinearAnalysis:
    """Snapshots of Linear weights' .grad around each backward pass, then reconstruction."""

    def __init__(self, linear_calls: list[dict[str, Any]], weights: dict[str, torch.Tensor]) -> None:
        self.linear_calls = linear_calls
        self.weights = weights  # weight name -> parameter, for Linear layers only
        self._before: dict[int, dict[str, torch.Tensor | None]] = {}
        self._after: dict[int, dict[str, torch.Tensor | None]] = {}
        # per pass: weight name -> (its live .grad, that tensor's version) right after the pass
        self._live: dict[int, dict[str, tuple[torch.Tensor, int]]] = {}

    def _snapshot(self) -> dict[str, torch.Tensor | None]:
        return {name: None if w.grad is None else w.grad.detach().clone() for name, w in self.weights.items()}

    def before_pass(self, pass_index: int) -> None:
        self._before[pass_index] = self._snapshot()

    def after_pass(self, pass_index: int) -> None:
        self._after[pass_index] = self._snapshot()
        self._live[pass_index] = {
            name: (w.grad, w.grad._version) for name, w in self.weights.items() if w.grad is not None
        }

    def build(
        self, deltas: dict[int, dict[str, list[tuple]]], summarize: Summarizer
    ) -> list[LinearReconstruction]:
        out: list[LinearReconstruction] = []
        for pass_index, weight, calls in self.grouped(deltas):
            rec = self._reconstruct(weight, pass_index, calls, summarize)
            if rec is not None:
                out.append(rec)
        return out

    def per_sample(
        self, deltas: dict[int, dict[str, list[tuple]]], summarize: Summarizer
    ) -> list[PerSampleContributions]:
        """Each sample's and each token's share of every Linear's W.grad (see per_sample.py)."""
        out: list[PerSampleContributions] = []
        for pass_index, weight, calls in self.grouped(deltas):
            grad = self.pass_grad(weight, pass_index)
            if grad is None:
                continue
            record, total = per_sample_record(weight, pass_index, calls, grad, summarize)
            if total is not None:
                record.sum_max_error, record.matches = compare_nan_aware(total, grad)
            out.append(record)
        return out

    def grouped(self, deltas: dict[int, dict[str, list[tuple]]]):
        """(pass, weight, [(call, a, δ, δ's summary)]) for every Linear call the backward reached."""
        for pass_index in sorted(self._after):
            pass_deltas = deltas.get(pass_index, {})
            by_weight: dict[str, list[tuple[dict, torch.Tensor, torch.Tensor, Any]]] = {}
            for call in self.linear_calls:
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

    def _reconstruct(
        self, weight: str, pass_index: int, calls: list, summarize: Summarizer
    ) -> LinearReconstruction | None:
        grad = self.pass_grad(weight, pass_index)
        if grad is None:
            return None
        before = self._before[pass_index].get(weight)
        w = self.weights[weight]
        recon = torch.zeros(w.shape, dtype=grad.dtype)
        for _call, a, delta, _summary in calls:
            # einsum over all leading (batch, token) dims: (..., out) x (..., in) -> (out, in),
            # in the weight's dtype, as autograd itself computes it
            recon += torch.einsum(
                "no,ni->oi",
                delta.reshape(-1, w.shape[0]).to(grad.dtype),
                a.reshape(-1, w.shape[1]).to(grad.dtype),
            )
        error, matches = compare_nan_aware(recon, grad)
        first = calls[0]
        recon_summary = summarize(recon)
        live, version = self._live[pass_index].get(weight, (None, -1))
        known = (
            summarize.known(live)
            if before is None and live is w.grad and live is not None and live._version == version
            else None
        )
        # .grad unchanged since the clone copied it: its summary (made at the grad_write) serves
        grad_summary = summarize(grad) if known is None else summarize.like_new(known)
        return LinearReconstruction(
            module=first[0]["module"],
            weight=weight,
            pass_index=pass_index,
            a_shape=list(first[1].shape),
            delta_shape=list(first[2].shape),
            reconstructed=recon_summary,
            grad=grad_summary,
            max_error=error,
            matches=matches,
            a=[summarize(c[1]) for c in calls],
            delta=[summarize(c[2]) if c[3] is None else summarize.like_new(c[3]) for c in calls],
        )


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
        return error, error <= 1e-6 * max(1.0, float(real.abs().max()))
    both_finite = torch.isfinite(rebuilt) & torch.isfinite(real)
    same_non_finite = (torch.isnan(rebuilt) & torch.isnan(real)) | (torch.isinf(real) & (rebuilt == real))
    agree_non_finite = bool((both_finite | same_non_finite).all())
    if not bool(both_finite.any()):
        return 0.0, agree_non_finite
    error = float((rebuilt - real)[both_finite].abs().max())
    scale = max(1.0, float(real[both_finite].abs().max()))
    return error, agree_non_finite and error <= 1e-6 * scale


def grad_norm(name: str, module: str | None, pass_index: int | None, grad: torch.Tensor) -> GradNorm:
    grad = grad.detach()
    if grad.layout != torch.strided:  # a sparse .grad (Embedding(sparse=True)): no sparse norm
        grad = grad.to_dense()
    norm = float(torch.linalg.vector_norm(grad.to(torch.float64)))
    return GradNorm(name=name, module=module, pass_index=pass_index, norm=finite_or_name(norm))


STACKED_NORM = 4096  # elements: gradients up to this size are normed in rows of one stacked tensor


def grad_norms(grads: list[tuple[str, str | None, torch.Tensor]], pass_index: int | None) -> list[GradNorm]:
    """:func:`grad_norm` of many (name, module, grad), the same numbers at a fraction of the
    calls (one by one: 0.7 ms for chain60's 240 parameters, 8 ms for 1,430): small dense real
    gradients of one shape (every layer's bias, ...) as the float64 rows of one stacked
    tensor, the rest in one ``torch._foreach_norm``. Sparse, complex or mixed-device
    gradients go one by one."""
    tensors = [g.detach() for _name, _module, g in grads]
    batchable = len({t.device for t in tensors}) == 1 and all(
        t.layout == torch.strided and t.is_floating_point() for t in tensors
    )
    if not batchable:  # (also: none at all)
        return [grad_norm(name, module, pass_index, g) for name, module, g in grads]
    norms: list[float] = [0.0] * len(tensors)
    alike: dict[tuple[torch.Size, torch.dtype], list[int]] = {}
    alone: list[int] = []
    for k, t in enumerate(tensors):
        if t.numel() <= STACKED_NORM:
            alike.setdefault((t.shape, t.dtype), []).append(k)
        else:
            alone.append(k)
    for members in alike.values():
        if len(members) == 1:
            alone += members
            continue
        rows = torch.stack([tensors[k].reshape(-1) for k in members]).to(torch.float64)
        for k, norm in zip(members, torch.linalg.vector_norm(rows, dim=1).tolist(), strict=True):
            norms[k] = norm
    if alone:
        singles = torch._foreach_norm([tensors[k] for k in alone], 2, dtype=torch.float64)
        for k, norm in zip(alone, torch.stack(singles).tolist(), strict=True):
            norms[k] = norm
    return [
        GradNorm(name=name, module=module, pass_index=pass_index, norm=finite_or_name(norm))
        for (name, module, _g), norm in zip(grads, norms, strict=True)
    ]


def diagnostic(
    code: str,
    severity: Severity,
    message: str,
    *,
    node: str | None = None,
    module: str | None = None,
    tensor: str | None = None,
) -> Diagnostic:
    return Diagnostic(code=code, severity=severity, message=message, node=node, module=module, tensor=tensor)


def reduced_to_sum(name: str, shape: tuple[int, ...], why: str) -> Diagnostic:
    """A non-scalar tensor was to be backpropagated: backward ran on its sum (the library
    without loss_fn, a spec's default backward)."""
    return diagnostic(
        "output_reduced",
        "info",
        f"'{name}' has shape {shape}, not a scalar, and {why}: backward ran on {name}.sum()",
        tensor=name,
    )


def reachable_from(roots: list[str], edges: list[GraphEdge]) -> set[str]:
    """Node ids upstream of ``roots`` (following edges against data flow)."""
    sources: dict[str, list[str]] = {}
    for e in edges:
        sources.setdefault(e.target, []).append(e.source)
    seen = set(roots)
    stack = list(roots)
    while stack:
        for s in sources.get(stack.pop(), []):
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return seen


def diagnose(
    rec: Any,
    env: dict[str, Any],
    retained: dict[str, Any],
    backward_roots: list[str],
    warnings: list[str],
    already_found: bool = False,
) -> list[Diagnostic]:
    """Diagnostics from the finished trace: detached branches, intermediates whose .grad is
    not kept, and PyTorch's own warnings (e.g. a full backward hook firing on outputs only)."""
    out: list[Diagnostic] = []
    if backward_roots:
        connected = reachable_from(backward_roots, rec.edges)
        roots = set(backward_roots)
        for name, t in env.items():
            fn = t.grad_fn
            node = rec.node_ids.get(fn) if fn is not None else None
            if node is not None and node not in connected:
                out.append(
                    diagnostic(
                        "detached_branch",
                        "info",
                        f"'{name}' is not connected to what backward was called on: no gradient reaches it",
                        node=node,
                        tensor=name,
                    )
                )
        for name, t in env.items():
            fn = t.grad_fn
            if fn is not None and name not in retained and rec.node_ids.get(fn) not in roots:
                out.append(
                    diagnostic(
                        "grad_not_retained",
                        "info",
                        f"'{name}' is an intermediate tensor: its .grad is None unless "
                        "retain_grad is asked for it",
                        tensor=name,
                    )
                )
    for text in dict.fromkeys(warnings):  # each distinct warning once, in order
        code = "hook_on_outputs_only" if "no inputs require gradients" in text else "torch_warning"
        if code == "hook_on_outputs_only" and already_found:
            continue  # already reported, naming the module
        out.append(diagnostic(code, "warning", text))
    return out
