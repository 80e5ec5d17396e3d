"""The numbers of one logged step of ``gradtrace.watch``, computed on the tensors' devices and
read to the host at once.

Each gradient a node passes gets its 2-norm (:meth:`StepValues.norm`); a ReLU-like node's also
its zero count (:meth:`StepValues.zeros`). Small gradients (up to ``SMALL`` elements: most
nodes of most models) are not reduced one by one, which would cost a kernel launch and Python
calls per node: they are held (``BATCH`` elements at most, then reduced) and those of one shape
stacked as the rows of one tensor, normed by one row reduction. A larger gradient is normed at
once, on its own. The same tensor seen twice in a step (a node's outgoing gradient is the next
node's incoming one) is normed once.

NaN and inf are read from the norms (a NaN norm: the gradient holds a NaN; an infinite one: an
inf, or values so large their norm overflows): counting them element by element costs an
elementwise pass per gradient, 10-30 times a norm (measured on a CPU), on every gradient of
the step; the full trace armed by the ``nonfinite`` flag has the counts of every tensor.

Slots: every number has an index in the step, reserved when asked for; its value arrives as
part of a 1-D tensor ("chunk") on the device. :meth:`StepValues.read` concatenates the chunks
of each device as float64 and reads them with one ``tolist``: the one transfer of the step.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

SMALL = 1 << 16  # elements: gradients up to this size are reduced in batches
BATCH = 1 << 22  # elements held for a batch at most, then reduced (the memory it may keep)


class StepValues:
    def __init__(self) -> None:
        self.size = 0
        self._chunks: list[tuple[list[int], torch.Tensor]] = []
        self._held: dict[tuple[Any, Any, Any], tuple[list[torch.Tensor], list[int]]] = {}
        self._held_elements = 0
        self._seen: dict[int, tuple[weakref.ref[torch.Tensor], int]] = {}

    def _reserve(self, n: int) -> int:
        start = self.size
        self.size += n
        return start

    def scalar(self, t: torch.Tensor) -> int:
        """The slot of a 0-dim tensor's value."""
        slot = self._reserve(1)
        self._chunks.append(([slot], t.detach().reshape(1)))
        return slot

    def scalars(self, ts: list[torch.Tensor]) -> list[int]:
        """The slots of several 0-dim tensors' values (one chunk)."""
        if not ts:
            return []
        start = self._reserve(len(ts))
        slots = list(range(start, start + len(ts)))
        self._chunks.append((slots, torch.stack(ts)))  # (0-dim tensors)
        return slots

    def norm(self, g: torch.Tensor) -> int:
        """The slot of gradient ``g``'s 2-norm."""
        key = id(g)
        known = self._seen.get(key)
        if known is not None and known[0]() is g:
            return known[1]
        slot = self._reserve(1)
        self._seen[key] = (weakref.ref(g), slot)
        g = _plain(g)
        n = g.numel()
        if n > SMALL:
            self._chunks.append(([slot], torch.linalg.vector_norm(g, dtype=_acc(g.dtype)).reshape(1)))
            return slot
        held, slots = self._held.setdefault((g.device, g.dtype, g.shape), ([], []))
        held.append(g)
        slots.append(slot)
        self._held_elements += n
        if self._held_elements > BATCH:
            self.reduce_held()
        return slot

    def zeros(self, g: torch.Tensor) -> int:
        """The slot of the number of zeros in ``g`` (an elementwise pass: ReLU-like nodes only)."""
        return self.scalar((_plain(g) == 0).sum())

    def reduce_held(self) -> None:
        """Norm the held gradients now (called when they pass ``BATCH``, and at the read)."""
        for (_device, dtype, _shape), (held, slots) in self._held.items():
            rows = torch.stack(held).reshape(len(held), -1)
            self._chunks.append((slots, torch.linalg.vector_norm(rows, dim=1, dtype=_acc(dtype))))
        self._held = {}
        self._held_elements = 0

    def read(self) -> list[float]:
        """Every value of the step, on the host: one ``tolist`` per device."""
        self.reduce_held()
        self._seen = {}
        out = [0.0] * self.size
        per_device: dict[Any, tuple[list[int], list[torch.Tensor]]] = {}
        for slots, values in self._chunks:
            wide = torch.float32 if values.device.type == "mps" else torch.float64  # (MPS: no float64)
            order, parts = per_device.setdefault(values.device, ([], []))
            order.extend(slots)
            parts.append(values.to(wide))
        for order, parts in per_device.values():
            for slot, value in zip(order, torch.cat(parts).tolist(), strict=True):  # the transfer
                out[slot] = value
        self._chunks = []
        return out


def _plain(g: torch.Tensor) -> torch.Tensor:
    """A dense real tensor with ``g``'s norm (a sparse gradient's values, a complex one's
    magnitudes)."""
    if g.layout != torch.strided:
        g = g.coalesce().values() if g.layout == torch.sparse_coo else g.to_dense()
    if g.is_complex():
        return g.abs()
    return g if g.is_floating_point() else g.to(torch.float32)


def _acc(dtype: torch.dtype) -> torch.dtype:
    """The dtype a norm is computed in: float64 for float64, else float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def exact_norms(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Each tensor's 2-norm exactly as ``t.norm()`` gives it (0-dim tensors, on their devices):
    ``torch._foreach_norm`` on the CPU (one call; it is the same reduction there), one
    ``vector_norm`` per tensor elsewhere (a fused foreach kernel sums in another order)."""
    dense = [t.to_dense() if t.layout != torch.strided else t for t in tensors]
    if dense and all(t.device.type == "cpu" for t in dense):
        return list(torch._foreach_norm(dense))
    return [torch.linalg.vector_norm(t) for t in dense]
