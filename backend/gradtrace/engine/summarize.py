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

import torch

SMALL_TENSOR = 1024  # elements: up to this, a JSON list a curl reader can see
DEFAULT_VALUE_BUDGET = 1_000_000  # float32 elements in base64 `data` across one trace (~5 MB)


def finite_or_name(x: float) -> float | str:
    """A float as JSON allows it: non-finite numbers become "NaN"/"Infinity"/"-Infinity"."""
    if math.isfinite(x):
        return x
    if math.isnan(x):
        return "NaN"
    return "Infinity" if x > 0 else "-Infinity"


def _stats(flat: torch.Tensor) -> dict[str, Any]:
    """Stats over the finite elements, in float64, with counts of NaN and infinities."""
    numel = flat.numel()
    if not (flat.is_floating_point() or flat.is_complex()):
        finite = flat.to(torch.float64)
        nan = inf = 0
    else:
        flat64 = flat.to(torch.float64)
        mask = torch.isfinite(flat64)
        finite = flat64[mask]
        nan = int(torch.isnan(flat64).sum())
        inf = numel - int(mask.sum()) - nan
    if finite.numel() == 0:
        return {"numel": numel, "min": None, "max": None, "mean": None, "std": None,
                "norm": None, "nan": nan, "inf": inf}
    # population std (correction=0): a single element has std 0, not NaN
    std, mean = torch.std_mean(finite, correction=0)
    return {
        "numel": numel,
        "min": float(finite.min()),
        "max": float(finite.max()),
        "mean": float(mean),
        "std": float(std),
        "norm": float(torch.linalg.vector_norm(finite)),
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
    Every appearance of ``data`` in the trace is charged to the budget (the JSON repeats it),
    so the budget bounds the size of the trace on the wire.
    """

    def __init__(self, value_budget: int = DEFAULT_VALUE_BUDGET) -> None:
        self.value_budget = value_budget
        self.budget_left = value_budget
        self.values_truncated = 0
        self._cache: dict[tuple[int, int], tuple[torch.Tensor, dict[str, Any]]] = {}

    def __call__(self, t: Any) -> dict[str, Any] | None:
        if not isinstance(t, torch.Tensor):
            return None
        key = (id(t), t._version)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is t:
            return self._reuse(hit[1])
        value = self._summarize(t)
        self._cache[key] = (t, value)
        return value

    def _reuse(self, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("data") is None:
            return value
        numel = value["stats"]["numel"]
        if numel <= self.budget_left:
            self.budget_left -= numel
            return value
        self.values_truncated += 1
        return {**value, "data": None, "truncated": True}

    def _summarize(self, t: torch.Tensor) -> dict[str, Any]:
        with torch.no_grad():
            flat = t.detach()
            if flat.is_complex():
                flat = flat.abs()  # complex tensors: stats of the magnitude, no numbers
                complex_ = True
            else:
                complex_ = False
            flat = flat.reshape(-1)
            if flat.dtype == torch.bool:
                flat = flat.to(torch.uint8)
            out: dict[str, Any] = {
                "shape": list(t.shape),
                "dtype": _dtype_name(t),
                "stats": _stats(flat),
            }
            numel = flat.numel()
            if complex_:
                out["truncated"] = True
                self.values_truncated += 1
            elif numel <= SMALL_TENSOR:
                if flat.is_floating_point():
                    # float64 holds every float32/float16 value exactly: the last digit is true
                    out["values"] = [finite_or_name(v) for v in flat.to(torch.float64).tolist()]
                else:
                    out["values"] = flat.tolist()
            elif numel <= self.budget_left:
                self.budget_left -= numel
                raw = flat.to(torch.float32).contiguous().numpy().astype("<f4", copy=False)
                out["data"] = base64.b64encode(raw.tobytes()).decode("ascii")
            else:
                out["truncated"] = True
                self.values_truncated += 1
            return out
