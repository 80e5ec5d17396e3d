"""The numbers of one logged step of ``gradtrace.watch``, computed on the tensors' devices and
read to the host at once.

Every number has a slot in the step, reserved when asked for; its value arrives as part of a
1-D tensor ("chunk") on the device. :meth:`StepValues.read` concatenates the chunks of each
device as float64 and copies them to the host once: the one transfer of the step.

Gradients flowing through the graph's nodes are *held* (:meth:`StepValues.hold`) with an
owner code (the node's index times two: what it receives; plus one: what it passes on), not
reduced one by one, which would cost a kernel launch and Python calls per node. Held
gradients are normed together, the ones of one shape stacked as the rows of one tensor and
reduced by one row norm, when they pass ``BATCH`` elements (the memory the watch may keep)
and at the backward's end; one passed from a node to the next (the same tensor, held) is
normed once. A gradient over ``SMALL`` elements is normed at once, on its own.
On the host, the norms of one owner are combined (the norm of all its gradients together is
the root of the sum of their squares) and their NaN and inf counted: a NaN norm means the
gradient holds a NaN; an infinite one an inf, or values so large their norm overflows.
Counting them element by element would cost an elementwise pass per gradient, 10-30 times a
norm (measured on a CPU); the full trace armed by the ``nonfinite`` flag has the counts of
every tensor.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

SMALL = 1 << 16  # elements: gradients up to this size are reduced in batches
BATCH = 1 << 22  # elements held for a batch at most, then reduced (the memory it may keep)
STACKED = 4  # tensors of one shape at least, to be stacked (fewer: one foreach norm for all) ...
STACKED_NUMEL = 4096  # ... of this many elements at most (larger: the copy costs more than a call)
_LOW = (torch.float16, torch.bfloat16)  # normed in float32 (float16's largest value is 65504)


class StepValues:
    def __init__(self) -> None:
        self.size = 0
        self._chunks: list[tuple[list[int], torch.Tensor]] = []
        self._pair_slots: list[int] = []  # (slot, owner code): a gradient's norm counts for the owner
        self._pair_owners: list[int] = []
        self._held: list[torch.Tensor] = []
        self._held_slots: list[int] = []
        self._held_elements = 0
        self._seen: dict[int, int] = {}  # id of a held gradient -> its slot (held: the id is its own)

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

    def vector(self, t: torch.Tensor) -> list[int]:
        """The slots of a 1-D tensor's values (one chunk)."""
        start = self._reserve(t.numel())
        slots = list(range(start, start + t.numel()))
        self._chunks.append((slots, t.detach()))
        return slots

    def norms(self, tensors: list[torch.Tensor]) -> list[int]:
        """The slots of each tensor's 2-norm (stacked by shape; not bit-equal to ``t.norm()``:
        see :func:`exact_norms`)."""
        start = self._reserve(len(tensors))
        slots = list(range(start, start + len(tensors)))
        self._norm_into(tensors, slots, [t.numel() <= SMALL for t in tensors])
        return slots

    def hold(self, grads: Any, owner: int) -> None:
        """Keep the gradients ``grads`` (a node's tuple; None: no gradient) for ``owner``'s
        norm: small ones held to be normed together (a tensor held already, passed from one
        node to the next, is normed once), a large one normed now."""
        seen = self._seen
        for g in grads:
            if g is None:
                continue
            slot = seen.get(id(g))
            if slot is None:
                slot = self.size
                self.size += 1
                n = g.numel()
                if n > SMALL:
                    self._chunks.append(([slot], _norm(g)))
                else:
                    seen[id(g)] = slot
                    self._held.append(g)
                    self._held_slots.append(slot)
                    self._held_elements += n
            self._pair_slots.append(slot)
            self._pair_owners.append(owner)
        if self._held_elements > BATCH:
            self.reduce_held()

    def zeros(self, g: torch.Tensor) -> int:
        """The slot of the number of zeros in ``g`` (an elementwise pass: ReLU-like nodes only)."""
        return self.scalar((_plain(g) == 0).sum())

    def reduce_held(self) -> None:
        """Norm the held gradients now (called when they pass ``BATCH``, and at the read)."""
        if self._held:
            self._norm_into(self._held, self._held_slots, None)
        self._held = []
        self._held_slots = []
        self._held_elements = 0
        self._seen = {}

    def _norm_into(self, tensors: list[torch.Tensor], slots: list[int], small: list[bool] | None) -> None:
        groups: dict[Any, list[int]] = {}
        for i, t in enumerate(tensors):  # (small: None when every tensor is)
            groups.setdefault(t.shape if small is None or small[i] else i, []).append(i)
        few: list[int] = []  # (shapes of a few tensors: one foreach call for all of them)
        for idx in groups.values():
            if len(idx) < STACKED or tensors[idx[0]].numel() > STACKED_NUMEL:
                few.extend(idx)
                continue
            ts = [tensors[i] for i in idx]
            try:  # (one kernel for all the rows; a group that will not stack, one by one)
                rows = torch.stack(ts).reshape(len(ts), -1)
                self._chunks.append(
                    (
                        [slots[i] for i in idx],
                        torch.linalg.vector_norm(rows, dim=1, dtype=norm_dtype(rows.dtype)),
                    )
                )
            except (RuntimeError, TypeError):  # sparse, complex, on several devices
                few.extend(idx)
        if few:
            ts = [tensors[i] for i in few]
            try:
                low = any(t.dtype in _LOW for t in ts)  # (a dtype argument costs a copy: only where needed)
                norms = torch.stack(
                    torch._foreach_norm(ts, 2, dtype=torch.float32) if low else torch._foreach_norm(ts)
                )
                self._chunks.append(([slots[i] for i in few], norms))
                return
            except (RuntimeError, TypeError):
                pass
            for i, t in zip(few, ts, strict=True):
                self._chunks.append(([slots[i]], _norm(t)))

    def read(self) -> np.ndarray:
        """Every value of the step, on the host (float64, by slot): one copy per device."""
        self.reduce_held()
        out = np.zeros(self.size)
        per_device: dict[Any, tuple[list[int], list[torch.Tensor]]] = {}
        for slots, values in self._chunks:
            order, parts = per_device.setdefault(values.device, ([], []))
            order.extend(slots)
            parts.append(values)
        for device, (order, parts) in per_device.items():
            wide = torch.float32 if device.type == "mps" else torch.float64  # (MPS: no float64)
            out[np.asarray(order, dtype=np.int64)] = torch.cat([p.to(wide) for p in parts]).cpu().numpy()
        self._chunks = []
        return out

    def per_owner(self, values: np.ndarray, owners: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For owner codes ``0..owners-1``: the norm of all the owner's gradients together
        (0 where it had none), and how many of them hold a NaN, an inf (from ``read``'s values)."""
        code = np.asarray(self._pair_owners, dtype=np.int64)
        x = values[np.asarray(self._pair_slots, dtype=np.int64)]
        count = np.bincount(code, minlength=owners)
        single = np.zeros(owners)
        single[code] = x  # (an owner of one gradient: its norm as it is)
        with np.errstate(over="ignore", invalid="ignore"):
            norm = np.where(count == 1, single, np.sqrt(np.bincount(code, weights=x * x, minlength=owners)))
        nan = np.bincount(code, weights=np.isnan(x), minlength=owners).astype(np.int64)
        inf = np.bincount(code, weights=np.isinf(x), minlength=owners).astype(np.int64)
        return norm, nan, inf


def _norm(g: torch.Tensor) -> torch.Tensor:
    """``g``'s 2-norm alone, as a 1-element tensor on its device (see norm_dtype)."""
    p = _plain(g)
    return torch.linalg.vector_norm(p, dtype=norm_dtype(p.dtype)).reshape(1)


def _plain(g: torch.Tensor) -> torch.Tensor:
    """A dense real tensor with ``g``'s norm (a sparse gradient's values, a nested one's
    numbers, a complex one's magnitudes)."""
    if g.is_nested:
        g = g.values() if g.layout == torch.jagged else torch.cat([t.reshape(-1) for t in g.unbind()])
    elif g.layout != torch.strided:
        g = g.coalesce().values() if g.layout == torch.sparse_coo else g.to_dense()
    if g.is_complex():
        return g.abs()
    return g if g.is_floating_point() else g.to(torch.float32)


def norm_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a norm is computed in: float64 for float64, else float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def exact_norms(tensors: list[torch.Tensor], on_cpu: bool = False) -> list[torch.Tensor]:
    """Each tensor's 2-norm exactly as ``t.norm()`` gives it (0-dim tensors, on their devices):
    ``torch._foreach_norm`` on the CPU (one call; it is the same reduction there), one
    ``vector_norm`` per tensor elsewhere (a fused foreach kernel sums in another order).
    ``on_cpu``: the caller knows every tensor is on the CPU."""
    if on_cpu:
        try:  # (no per-tensor checks first: they cost as much as the norms of small tensors)
            return list(torch._foreach_norm(tensors))
        except RuntimeError:  # a sparse one
            pass
    dense = [t.to_dense() if t.layout != torch.strided else t for t in tensors]
    if dense and all(t.device.type == "cpu" for t in dense):
        return list(torch._foreach_norm(dense))
    return [torch.linalg.vector_norm(t) for t in dense]


def copied_rows(tensors: list[torch.Tensor]) -> list[tuple[list[torch.Tensor], torch.Tensor]]:
    """A copy of ``tensors``: those of one shape, device and dtype as the rows of one tensor
    (one copy per group), a large one alone."""
    groups: dict[Any, list[torch.Tensor]] = {}
    for t in tensors:
        groups.setdefault((t.shape, t.device, t.dtype) if t.numel() <= SMALL else id(t), []).append(t)
    return [
        (ts, torch.stack(ts).reshape(len(ts), -1) if len(ts) > 1 else ts[0].reshape(1, -1).clone())
        for ts in groups.values()
    ]
