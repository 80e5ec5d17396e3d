"""THE crossing from a torch.Tensor to a JSON TensorValue (see trace_schema.TensorValue).

Every tensor that ends up in a trace passes through :class:`Summarizer`. The wire format
decides the speed (DESIGN: ``.tolist()`` + json of big tensors is 60-500x slower than raw
base64), so: small tensors become a flat JSON list, larger ones base64 float32 little-endian
while the per-trace budget lasts, then stats only.

Output is a plain dict (validated once, at the end, by the TraceDoc model): building pydantic
objects per tensor would cost more than the capture itself.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import numpy as np
import torch

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


def _stats(arr: np.ndarray) -> dict[str, Any]:
    """Stats of one (large) flat array: float64, over the finite elements, two-pass std.

    numpy with no BLAS call (np.dot went to a multi-threaded BLAS that spun ~9 ms a call on
    a busy box; torch.var_mean took ~200 µs for 16k elements, this ~60 µs).
    """
    numel = int(arr.size)
    x = arr.astype(np.float64, copy=False)
    nan = inf = 0
    total = float(x.sum()) if numel else 0.0
    if not math.isfinite(total):  # some NaN or infinity (a finite float32 sum cannot overflow)
        finite = np.isfinite(x)
        nan = int(np.isnan(x).sum())
        inf = numel - int(finite.sum()) - nan
        x = x[finite]
        total = float(x.sum())
    if x.size == 0:
        return {"numel": numel, "min": None, "max": None, "mean": None, "std": None,
                "norm": None, "nan": nan, "inf": inf}
    mean = total / x.size
    return {"numel": numel, "min": float(x.min()), "max": float(x.max()), "mean": mean,
            "std": math.sqrt(float(np.square(x - mean).sum()) / x.size),
            "norm": math.sqrt(float(np.square(x).sum())), "nan": nan, "inf": inf}


def _segment_stats(arrays: list[np.ndarray]) -> list[dict[str, Any]]:
    """Stats of many small flat arrays at once (float64, over the finite elements).

    One concatenation and a handful of ``reduceat`` calls instead of ~10 numpy calls per
    tensor: for the thousands of small tensors of a trace, per-call overhead dominated.
    Population std (a single element has std 0, not NaN), two-pass (no cancellation).
    """
    lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
    out: list[dict[str, Any]] = [
        {"numel": int(n), "min": None, "max": None, "mean": None, "std": None, "norm": None,
         "nan": 0, "inf": 0} for n in lengths]
    nonempty = np.flatnonzero(lengths)
    if nonempty.size == 0:
        return out
    big = np.concatenate([arrays[i].astype(np.float64, copy=False) for i in nonempty])
    seg = lengths[nonempty]
    starts = np.concatenate(([0], np.cumsum(seg)[:-1]))
    finite = np.isfinite(big)
    n_finite = np.add.reduceat(finite.astype(np.int64), starts)
    n_nan = np.add.reduceat(np.isnan(big).astype(np.int64), starts)
    x0 = np.where(finite, big, 0.0)
    sums = np.add.reduceat(x0, starts)
    squares = np.add.reduceat(x0 * x0, starts)
    mins = np.minimum.reduceat(np.where(finite, big, np.inf), starts)
    maxs = np.maximum.reduceat(np.where(finite, big, -np.inf), starts)
    means = sums / np.maximum(n_finite, 1)
    centred = np.where(finite, big - np.repeat(means, seg), 0.0)
    variances = np.add.reduceat(centred * centred, starts) / np.maximum(n_finite, 1)
    for k, i in enumerate(nonempty.tolist()):
        stats = out[i]
        stats["nan"] = int(n_nan[k])
        stats["inf"] = int(seg[k] - n_finite[k] - n_nan[k])
        if n_finite[k]:
            stats.update(min=float(mins[k]), max=float(maxs[k]), mean=float(means[k]),
                         std=math.sqrt(float(variances[k])), norm=math.sqrt(float(squares[k])))
    return out


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


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
        self._pending: list[tuple[np.ndarray, dict[str, Any], bool]] = []
        # id(tensor) -> (tensor kept alive, version, its dict, numbers?)
        self._by_object: dict[int, tuple[torch.Tensor, int, dict[str, Any], bool]] = {}

    def __call__(self, t: Any) -> dict[str, Any] | None:
        if not isinstance(t, torch.Tensor):
            return None
        # fast path: this very tensor object, unchanged since it was summarized
        quick = self._by_object.get(id(t))
        if quick is not None and quick[0] is t and quick[1] == t._version:
            return self._reuse(quick[2], quick[3])
        # Same memory, layout, dtype and version: same numbers, even through another tensor
        # object (each read of a node's `_saved_*` returns a new one). The held reference
        # keeps the memory from being reused by another tensor.
        if t.layout == torch.strided:
            key: tuple = (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t._version,
                          t.device.type)
        else:  # sparse and other layouts have no single data pointer
            key = ("id", id(t), t._version)
        hit = self._cache.get(key)
        if hit is not None:
            self._by_object[id(t)] = (t, t._version, hit[1], hit[2])
            return self._reuse(hit[1], hit[2])
        value, numbers = self._snapshot(t)
        self._cache[key] = (t, value, numbers)
        self._by_object[id(t)] = (t, t._version, value, numbers)
        return value

    def repeat(self, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """The same summary appearing once more in the trace (charged to the budget again)."""
        if value is None:
            return None
        return self._reuse(value, not value.get("truncated", False))

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
        return {"shape": value["shape"], "dtype": value["dtype"], "stats": value["stats"],
                "truncated": True}

    def _snapshot(self, t: torch.Tensor) -> tuple[dict[str, Any], bool]:
        flat = t.detach()  # (no torch.no_grad() here: entering it cost ~200 µs per call)
        if flat.layout != torch.strided:
            flat = flat.to_dense()
        complex_ = flat.is_complex()
        if complex_:
            flat = flat.abs()  # complex tensors: stats of the magnitude, no numbers
        if flat.dtype == torch.bool:
            flat = flat.to(torch.uint8)
        elif flat.is_floating_point() and flat.dtype not in (torch.float32, torch.float64):
            flat = flat.to(torch.float32)  # float16/bfloat16: numpy-readable, exact
        arr = flat.reshape(-1).cpu().numpy()
        numel = int(arr.size)
        out: dict[str, Any] = {"shape": list(t.shape), "dtype": _dtype_name(t),
                               "stats": {"numel": numel}}
        cost = self._cost(numel)
        numbers = not complex_ and cost <= self.budget_left
        if numbers:
            self.budget_left -= cost
        else:
            out["truncated"] = True
            self.values_truncated += 1
        if numel > SMALL_TENSOR:
            # large: summarized now, one tensor at a time (batching them built huge
            # temporaries); no copy needed since nothing is deferred
            out["stats"].update(_stats(arr))
            if numbers:
                out["data"] = base64.b64encode(arr.astype("<f4", copy=False).tobytes()).decode("ascii")
        else:
            # small: snapshot (later in-place writes must not change what was seen), and
            # summarize all of them together in finalize()
            self._pending.append((arr.copy(), out, numbers))
        return out, numbers

    def finalize(self) -> None:
        """Fill the stats and numbers of every dict handed out so far (idempotent)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        all_stats = _segment_stats([arr for arr, _out, _numbers in pending])
        for (arr, out, numbers), stats in zip(pending, all_stats, strict=True):
            out["stats"].update(stats)
            if not numbers:
                continue
            if arr.dtype.kind != "f":
                out["values"] = arr.tolist()
            elif stats["nan"] == 0 and stats["inf"] == 0:
                # float64 holds every float32 value exactly: the last digit is true
                out["values"] = arr.astype(np.float64).tolist()
            else:
                out["values"] = [finite_or_name(v) for v in arr.astype(np.float64).tolist()]
