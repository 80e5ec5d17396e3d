"""THE crossing from a torch.Tensor to a JSON TensorValue (see trace_schema.TensorValue).

Every tensor that ends up in a trace passes through :class:`Summarizer`. The wire format
decides the speed (DESIGN: ``.tolist()`` + json of big tensors is 60-500x slower than raw
base64), so: small tensors become a flat JSON list, larger ones base64 float32 little-endian
while the per-trace budget lasts, then stats only.

Output is a plain dict (never validated on the hot path, see canonical.py): building
pydantic objects per tensor would cost more than the capture itself.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np
import torch

from gradtrace.engine.tensor_stats import segment_stats, stats_of

SMALL_TENSOR = 1024  # elements: up to this, a JSON list a curl reader can see
# float32 elements in base64 `data` across one trace (~5.3 MB of base64). JSON `values` lists
# are charged too, LIST_COST per number (~20 bytes in JSON vs ~5.3 in base64), and every
# appearance of a tensor counts: the budget bounds the size of the trace on the wire.
DEFAULT_VALUE_BUDGET = 1_000_000
LIST_COST = 4


def finite_or_name(x: float) -> float | str:
    """A float as JSON allows it: non-finite numbers become "NaN"/"Infinity"/"-Infinity"."""
    if math.isfinite(x):
        return x
    if math.isnan(x):
        return "NaN"
    return "Infinity" if x > 0 else "-Infinity"


_NUMPY_READY = frozenset(
    {torch.float32, torch.float64, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8}
)
_DTYPE_NAMES: dict[torch.dtype, str] = {}


def _dtype_name(t: torch.Tensor) -> str:
    name = _DTYPE_NAMES.get(t.dtype)
    if name is None:
        name = _DTYPE_NAMES[t.dtype] = str(t.dtype).removeprefix("torch.")
    return name


class Summarizer:
    """Turns tensors into TensorValue dicts, spending one trace's value budget.

    The same memory at the same version (``_version`` bumps on in-place writes) is
    summarized once and the dict reused: a module's output is also the next module's input
    and some node's value. Every appearance of numbers (``values`` or ``data``) in the trace
    is charged to the budget (the JSON repeats them), so the budget bounds the size of the
    trace on the wire; past it, tensors are stats only (``truncated``).

    Capture only snapshots the numbers (a copy: later in-place writes must not change what
    was seen) and returns the dict; :meth:`finalize` fills every pending dict at the end, with
    the stats of all tensors computed together.
    """

    def __init__(self, value_budget: int = DEFAULT_VALUE_BUDGET) -> None:
        self.value_budget = value_budget
        self.budget_left = value_budget
        self.values_truncated = 0
        # key -> (tensor kept alive, its dict, whether the dict carries the numbers)
        self._cache: dict[tuple, tuple[torch.Tensor, dict[str, Any], bool]] = {}
        # small tensors to finish in finalize(): (snapshot, dict, numbers?, stats to compute?)
        self._pending: list[tuple[np.ndarray, dict[str, Any], bool, bool]] = []
        # id(tensor) -> (tensor kept alive, version, its dict, numbers?)
        self._by_object: dict[int, tuple[torch.Tensor, int, dict[str, Any], bool]] = {}
        # the same elements in another layout (weight and the weight.t() a node saved):
        # (first element's address, numel, dtype, version, device) -> the shared stats dict
        self._stats_by_memory: dict[tuple, dict[str, Any]] = {}

    def __call__(self, t: Any) -> dict[str, Any] | None:
        if not isinstance(t, torch.Tensor):
            return None
        # fast path: this very tensor object, unchanged since it was summarized
        quick = self._by_object.get(id(t))
        version = t._version
        if quick is not None and quick[0] is t and quick[1] == version:
            return self._reuse(quick[2], quick[3])
        # Same memory, layout, dtype and version: same numbers, even through another tensor
        # object (each read of a node's `_saved_*` returns a new one). The held reference
        # keeps the memory from being reused by another tensor.
        strided = t.layout == torch.strided
        if strided:
            key: tuple = (
                t.data_ptr(),
                tuple(t.shape),
                t.stride(),
                t.dtype,
                version,
                t.is_cpu or t.device.type,
            )  # (is_cpu: 7x cheaper than device.type)
        else:  # sparse and other layouts have no single data pointer
            key = ("id", id(t), version)
        hit = self._cache.get(key)
        if hit is not None:
            self._by_object[id(t)] = (t, version, hit[1], hit[2])
            return self._reuse(hit[1], hit[2])
        value, numbers = self._snapshot(t, strided)
        self._cache[key] = (t, value, numbers)
        self._by_object[id(t)] = (t, version, value, numbers)
        return value

    def repeat(self, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """The same summary appearing once more in the trace (charged to the budget again)."""
        if value is None:
            return None
        return self._reuse(value, not value.get("truncated", False))

    def known(self, t: torch.Tensor) -> dict[str, Any] | None:
        """The summary already made of this very tensor at its current version (no charge)."""
        quick = self._by_object.get(id(t))
        if quick is not None and quick[0] is t and quick[1] == t._version:
            return quick[2]
        return None

    def like_new(self, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """A summary standing for a copy of its tensor (same numbers), accounted as a fresh
        snapshot of that copy would be: charged, or counted in ``values_truncated``."""
        if value is None:
            return None
        if value.get("truncated", False):
            self.values_truncated += 1
            return value
        return self._reuse(value, True)

    @staticmethod
    def _cost(numel: int) -> int:
        return numel * LIST_COST if numel <= SMALL_TENSOR else numel

    def _reuse(self, value: dict[str, Any], numbers: bool) -> dict[str, Any]:
        if not numbers:
            return value
        cost = self._cost(value["stats"]["numel"])
        if cost <= self.budget_left:
            self.budget_left -= cost
            return value
        self.values_truncated += 1
        # the stats dict is shared: finalize() fills it for both
        return {"shape": value["shape"], "dtype": value["dtype"], "stats": value["stats"], "truncated": True}

    @staticmethod
    def _dense_order(t: torch.Tensor) -> list[int] | None:
        """Dims ordered so that ``t.permute(order)`` is contiguous ([]: t already is; None:
        no such order).

        A transposed weight, a permuted activation: the same block of memory, the same
        elements in another order, so the same stats, readable without a copy.
        """
        if t.is_contiguous():
            return []  # already in order: no permute needed
        strides = t.stride()
        order = sorted(range(t.dim()), key=lambda d: -strides[d])
        return order if t.permute(order).is_contiguous() else None

    def _snapshot(self, t: torch.Tensor, strided: bool) -> tuple[dict[str, Any], bool]:
        # detached first: a permute of a tensor that requires grad would make an autograd
        # node (and shift every later node's creation order). No torch.no_grad() here:
        # entering it cost ~200 µs per call.
        t = t.detach()
        numel = t.numel()
        complex_ = t.is_complex()
        out: dict[str, Any] = {"shape": list(t.shape), "dtype": _dtype_name(t), "stats": {"numel": numel}}
        cost = self._cost(numel)
        numbers = not complex_ and cost <= self.budget_left
        if numbers:
            self.budget_left -= cost
        else:
            out["truncated"] = True
            self.values_truncated += 1
        order = self._dense_order(t) if strided and numel else None
        memory = (
            (t.data_ptr(), numel, t.dtype, t._version, t.is_cpu or t.device.type)
            if order is not None
            else None
        )
        known = self._stats_by_memory.get(memory) if memory is not None else None
        if known is not None:
            out["stats"] = known  # filled now, or by finalize() with its first owner
            if not numbers:
                return out, numbers
        elif memory is not None:
            self._stats_by_memory[memory] = out["stats"]
        # row-major numbers are needed for values/data; stats alone read any dense order
        arr = self._flat(t.permute(order) if order and not numbers else t)
        if numel > SMALL_TENSOR:
            # large: summarized now, one tensor at a time (batching them built huge
            # temporaries); no copy needed since nothing is deferred
            if known is None:
                out["stats"].update(stats_of(arr))
            if numbers:
                out["data"] = base64.b64encode(arr.astype("<f4", copy=False).tobytes()).decode("ascii")
        else:
            # small: snapshot (later in-place writes must not change what was seen), and
            # summarize all of them together in finalize()
            self._pending.append((arr.copy(), out, numbers, known is None))
        return out, numbers

    @staticmethod
    def _flat(t: torch.Tensor) -> np.ndarray:
        """The numbers of a detached tensor as a flat numpy array (a view where possible)."""
        if t.is_cpu and t.dtype in _NUMPY_READY and t.layout == torch.strided:
            # numpy reads torch's strides itself and flattens row-major like torch.reshape,
            # at half the cost per call (thousands of calls per trace)
            return t.numpy().reshape(-1)
        flat = t
        if flat.layout != torch.strided:
            flat = flat.to_dense()
        if flat.is_complex():
            flat = flat.abs()  # complex tensors: stats of the magnitude, no numbers
        if flat.dtype == torch.bool:
            flat = flat.to(torch.uint8)
        elif flat.is_floating_point() and flat.dtype not in (torch.float32, torch.float64):
            flat = flat.to(torch.float32)  # float16/bfloat16: numpy-readable, exact
        return flat.reshape(-1).cpu().numpy()

    def finalize(self) -> None:
        """Fill the stats and numbers of every dict handed out so far (idempotent)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        owners = [(arr, out) for arr, out, _numbers, owner in pending if owner]
        for (_arr, out), stats in zip(owners, segment_stats([arr for arr, _ in owners]), strict=True):
            out["stats"].update(stats)
        for arr, out, numbers, _owner in pending:
            if not numbers:
                continue
            stats = out["stats"]
            if arr.dtype.kind != "f":
                out["values"] = arr.tolist()
            elif stats["nan"] == 0 and stats["inf"] == 0:
                # float64 holds every float32 value exactly: the last digit is true
                out["values"] = arr.astype(np.float64).tolist()
            else:
                out["values"] = [finite_or_name(v) for v in arr.astype(np.float64).tolist()]
