"""The gradient-norm analysis (the ``analyses.grad_norms`` records): the float64 norm of every
parameter's gradient at the end of each backward pass, and of every final ``.grad``.

What it observes: the parameters' gradients as each backward pass ends (:class:`GradNorms`;
:class:`PendingNorms`, computed on their devices, read after the passes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from gradtrace.engine.analysis import Analysis, Backward, Finished
from gradtrace.engine.summarize import finite_or_name
from gradtrace.trace_schema import Analyses, GradNorm, TensorValue


def grad_norm(name: str, module: str | None, pass_index: int | None, grad: torch.Tensor) -> GradNorm:
    """One gradient's float64 norm, read now (what PendingNorms gives for many at once)."""
    norm = float(_device_norm(grad.detach()))
    return GradNorm(name=name, module=module, pass_index=pass_index, norm=finite_or_name(norm))


def _device_norm(grad: torch.Tensor) -> torch.Tensor:
    """A gradient's float64 norm as a 0-dim tensor on its device (not read yet)."""
    if grad.layout != torch.strided:  # a sparse .grad (Embedding(sparse=True)): no sparse norm
        grad = grad.to_dense()
    return torch.linalg.vector_norm(grad.to(torch.float64))


STACKED_NORM = 4096  # elements: gradients up to this size are normed in rows of one stacked tensor
# elements: a larger CPU gradient is normed without a float64 copy of it (128 MB at most: the
# copy is made and freed at each pass's end, where a big model's memory is near its peak)
COPIED_NORM = 1 << 24


class PendingNorms:
    """The norms of many (name, module, grad) of one pass, computed on the gradients' devices
    when made and read to the host by :meth:`read` (after the passes: no sync between them).

    Small dense real gradients of one shape, dtype and device (every layer's bias, ...) are
    normed as the float64 rows of one stacked tensor, larger ones a float64 reduction each,
    sparse or complex ones one by one: the same numbers as one norm call per gradient, in
    far fewer calls. Per gradient only what grouping needs is read (a detach only when it
    requires grad, the device only off the CPU): on models with a thousand tiny gradients
    those reads were the cost."""

    def __init__(self, grads: list[tuple[str, str | None, torch.Tensor]], pass_index: int | None) -> None:
        self.names = [(name, module) for name, module, _g in grads]
        self.pass_index = pass_index
        # each norm: (a tensor of norms, the row of it) — rows of a stacked norm, or 0-dim (None)
        self._norms: list[tuple[torch.Tensor, int | None] | None] = [None] * len(grads)
        alike: dict[tuple, list[int]] = {}  # (shape, dtype, device) -> indices of small dense ones
        alone: list[int] = []
        tensors: list[torch.Tensor] = []
        for k, (_name, _module, grad) in enumerate(grads):
            t = grad.detach() if grad.requires_grad else grad
            tensors.append(t)
            if t.layout != torch.strided or not t.is_floating_point():
                self._norms[k] = (_device_norm(t), None)
            elif t.numel() <= STACKED_NORM:
                alike.setdefault((t.shape, t.dtype, t.is_cpu or t.device), []).append(k)
            else:
                alone.append(k)
        for members in alike.values():
            if len(members) == 1:
                alone += members
                continue
            # (stacked as they are, then one row each: the rows are each gradient's elements in
            # order, as its reshape(-1) would give them, without a reshape per gradient; reduced
            # in float64 without a float64 copy)
            rows = torch.stack([tensors[k] for k in members]).reshape(len(members), -1)
            row_norms = torch.linalg.vector_norm(rows, dim=1, dtype=torch.float64)
            for row, k in enumerate(members):
                self._norms[k] = (row_norms, row)
        for k in alone:
            t = tensors[k]
            if t.is_cpu and t.dtype is not torch.float64 and t.numel() <= COPIED_NORM:
                # (a float64 copy, then its norm: the very bits of the reduction that casts as
                # it reads, dtype=float64, which on the CPU casts element by element and took
                # 3× as long: a fifth of torchvision resnet18's trace on one 32 × 32 image)
                self._norms[k] = (torch.linalg.vector_norm(t.to(torch.float64)), None)
            else:
                # (the float64 reduction without a float64 copy: torch._foreach_norm with
                # dtype=float64 was several times slower on resnet's conv weights, the copies'
                # page faults)
                self._norms[k] = (torch.linalg.vector_norm(t, dtype=torch.float64), None)

    def read(self) -> list[GradNorm]:
        """The GradNorm records: each tensor of norms read to the host once."""
        read: dict[int, Any] = {}  # id(tensor of norms) -> its numbers (a list, or a float)
        out = []
        for (name, module), pending in zip(self.names, self._norms, strict=True):
            assert pending is not None  # (every gradient got one in __init__)
            norms, row = pending
            numbers: Any = read.get(id(norms))
            if numbers is None:
                numbers = read[id(norms)] = norms.tolist()
            norm = numbers if row is None else numbers[row]
            out.append(
                GradNorm(name=name, module=module, pass_index=self.pass_index, norm=finite_or_name(norm))
            )
        return out


def grad_norms(grads: list[tuple[str, str | None, torch.Tensor]], pass_index: int | None) -> list[GradNorm]:
    """The float64 norm of each (name, module, grad), read now (see PendingNorms)."""
    return PendingNorms(grads, pass_index).read()


def all_grad_norms(
    pass_norms: list[PendingNorms],
    leaves: Sequence[tuple[str, torch.Tensor]],
    modules: Mapping[str, str | None],
    final_values: Mapping[str, TensorValue | None],
) -> list[GradNorm]:
    """The ``analyses.grad_norms`` records: each pass's norms (read now), then the norm of
    every leaf's final ``.grad`` (``leaves``: (name, leaf); ``modules``: a parameter's module).

    A final norm is the leaf's final value's ``stats.norm`` (``final_values``, read to the
    host already: the same float64 norm, computed once), or torch's where there is none or
    the stats leave non-finite numbers out (the norm is then NaN or infinite), all of those
    in one batch."""
    out = [norm for pending in pass_norms for norm in pending.read()]
    finals: list[GradNorm | None] = []
    fallbacks: list[tuple[str, str | None, torch.Tensor]] = []
    at: list[int] = []  # where each fallback's norm goes in ``finals``
    for name, t in leaves:
        grad = t.grad
        if grad is None:
            continue
        module = modules.get(name)  # (None for an input)
        value = final_values.get(name)
        stats = None if value is None else value.stats
        if stats is not None and stats.norm is not None and not stats.nan and not stats.inf:
            finals.append(GradNorm(name=name, module=module, pass_index=None, norm=stats.norm))
        else:
            at.append(len(finals))
            finals.append(None)
            fallbacks.append((name, module, grad))
    if fallbacks:
        for k, norm in zip(at, grad_norms(fallbacks, None), strict=True):
            finals[k] = norm
    return out + [norm for norm in finals if norm is not None]


class GradNorms(Analysis):
    """The analysis: each backward pass's parameter gradient norms, computed on the device as
    the pass ends (a pass that raised has none), read to the host after the values; then the
    final ones (read off those values' stats)."""

    def __init__(self) -> None:
        self.pending: list[PendingNorms] = []

    def backward_ended(self, backward: Backward, ok: bool) -> None:
        if not ok:
            return
        modules = backward.param_modules
        grads = [
            (name, modules[name], grad) for name, p in backward.params.items() if (grad := p.grad) is not None
        ]
        self.pending.append(PendingNorms(grads, backward.pass_index))

    def add_after_values(self, done: Finished, out: Analyses) -> None:
        retained = done.retained
        out.grad_norms = all_grad_norms(
            self.pending,
            done.leaves,
            done.param_modules,
            {name: None if name in retained else value for name, value in done.grads.items()},
        )
