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
    """Stats over the finite elements, in float64, with counts of NaN and infinities.

    numpy, not torch: for the small tensors of a trace, torch's per-op overhead dominated.
    """
    numel = int(arr.size)
    nan = inf = 0
    if arr.dtype.kind == "f":
        mask = np.isfinite(arr)
        if not mask.all():
            nan = int(np.isnan(arr).sum())
            inf = numel - int(mask.sum()) - nan
            arr = arr[mask]
    if arr.size == 0:
        return {"numel": numel, "min": None, "max": None, "mean": None, "std": None,
                "norm": None, "nan": nan, "inf": inf}
    x = arr.astype(np.float64, copy=False)
    mean = float(x.sum()) / x.size
    centred = x - mean
    return {
        "numel": numel,
        "min": float(x.min()),
        "max": float(x.max()),
        "mean": mean,
        # population std (a single element has std 0, not NaN); two-pass, no cancellation
        "std": math.sqrt(float(np.dot(centred, centred)) / x.size),
        "norm": math.sqrt(float(np.dot(x, x))),
        "nan": nan,
        "inf": inf,
    }


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


class Summarizer:
    """Turns tensors into TensorValue dicts, spending one trace's ``data`` budget.

    The same tensor object at the same version (``_version`` bumps on in-place writes) is
    summarized once and the dict reused: a module's output is also the next module's input
    and some node's value. References to cached tensors are held so ``id()`` cannot be reused.
    Every appearance of numbers (``values`` or ``data``) in the trace is charged to the
    budget (the JSON repeats them), so the budget bounds the size of the trace on the wire;
    past it, tensors are stats only (``truncated``).
    """

    def __init__(self, value_budget: int = DEFAULT_VALUE_BUDGET) -> None:
        self.value_budget = value_budget
        self.budget_left = value_budget
        self.values_truncated = 0
        self._cache: dict[tuple, tuple[torch.Tensor, dict[str, Any]]] = {}

    def __call__(self, t: Any) -> dict[str, Any] | None:
        if not isinstance(t, torch.Tensor):
            return None
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
            return self._reuse(hit[1])
        value = self._summarize(t)
        self._cache[key] = (t, value)
        return value

    @staticmethod
    def _cost(numel: int) -> int:
        return numel * LIST_COST if numel <= SMALL_TENSOR else numel

    def _reuse(self, value: dict[str, Any]) -> dict[str, Any]:
        numbers = value.get("data") is not None or value.get("values") is not None
        if not numbers:
            return value
        cost = self._cost(value["stats"]["numel"])
        if cost <= self.budget_left:
            self.budget_left -= cost
            return value
        self.values_truncated += 1
        return {"shape": value["shape"], "dtype": value["dtype"], "stats": value["stats"],
                "truncated": True}

    def _summarize(self, t: torch.Tensor) -> dict[str, Any]:
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
        out: dict[str, Any] = {"shape": list(t.shape), "dtype": _dtype_name(t), "stats": _stats(arr)}
        numel = int(arr.size)
        cost = self._cost(numel)
        if complex_ or cost > self.budget_left:
            out["truncated"] = True
            self.values_truncated += 1
            return out
        self.budget_left -= cost
        if numel <= SMALL_TENSOR:
            if arr.dtype.kind != "f":
                out["values"] = arr.tolist()
            elif np.isfinite(arr).all():
                # float64 holds every float32 value exactly: the last digit is true
                out["values"] = arr.astype(np.float64).tolist()
            else:
                out["values"] = [finite_or_name(v) for v in arr.astype(np.float64).tolist()]
        else:
            raw = arr.astype("<f4", copy=False)
            out["data"] = base64.b64encode(raw.tobytes()).decode("ascii")
        return out
