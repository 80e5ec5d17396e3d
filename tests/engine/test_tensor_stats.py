"""stats_of: one array's stats, on its usual path (finite, moderate magnitudes: no numpy error
state entered) and on the unusual one (NaN, infinities, magnitudes whose squares over/underflow),
checked against float64 numpy over the finite elements."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gradtrace.engine.tensor_stats import stats_of


def _oracle(arr: np.ndarray) -> tuple:
    x = arr.astype(np.float64).reshape(-1)
    finite = x[np.isfinite(x)]
    counts = (int(np.isnan(x).sum()), int(np.isinf(x).sum()))
    if finite.size == 0:
        return (None,) * 5 + counts
    scale = float(np.abs(finite).max()) or 1.0  # (numpy's own norm over/underflows at 1e±200)
    y = finite / scale
    return (
        float(finite.min()),
        float(finite.max()),
        float(y.mean()) * scale,
        float(y.std()) * scale,
        float(np.sqrt((y * y).sum())) * scale,
        *counts,
    )


_RNG = np.random.default_rng(11)
_NORMAL = _RNG.standard_normal(3000)


def _with(values: np.ndarray, special: float, every: int = 7) -> np.ndarray:
    out = values.copy()
    out[::every] = special
    return out


CASES = {
    "float32": _NORMAL.astype(np.float32),
    "float16": _NORMAL.astype(np.float16),
    "int8": (_NORMAL * 40).astype(np.int8),
    "bool": _NORMAL > 0,
    "zeros": np.zeros(2000),
    "negative zeros": -np.zeros(2000),
    "at 1e150": _with(_NORMAL, 1e150),  # the last magnitude of the usual path
    "past 1e150": _with(_NORMAL, 2e150),
    "at 1e-150": np.full(2000, 1e-150),
    "under 1e-150": np.full(2000, 5e-151),
    "near float64's limit": _with(_NORMAL, 1e305),  # (the norm, ~2e306, is still a float64)
    "nan": _with(_NORMAL, float("nan")),
    "float32 nan": _with(_NORMAL, float("nan")).astype(np.float32),
    "float32 inf": _with(_NORMAL, float("-inf")).astype(np.float32),
    "inf": _with(_NORMAL, float("inf")),
    "both infinities": _with(_with(_NORMAL, float("inf"), 5), float("-inf"), 3),
    "all nan": np.full(2000, float("nan")),
    "empty": np.zeros((0, 4), np.float32),
    "float32 zeros of both signs": np.where(_NORMAL > 0, np.float32(0.0), np.float32(-0.0)),
    "float32 with -0.0 and positives": np.where(_NORMAL > 1, _NORMAL, -0.0).astype(np.float32),
    "float32 with 0.0 and negatives": np.where(_NORMAL < -1, _NORMAL, 0.0).astype(np.float32),
    "transposed": _NORMAL.astype(np.float32).reshape(50, 60).T,
    "strided": _NORMAL.reshape(60, 50)[:, ::3],
}


@pytest.mark.parametrize("name", list(CASES))
def test_stats_of_matches_float64_numpy_over_the_finite_elements_without_warnings(name: str) -> None:
    arr = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would reach the trace's diagnostics
        got = stats_of(arr)
    want = _oracle(arr)
    # min, max (to the sign of a zero: float64's own, as numpy gives it) and counts: exactly
    assert repr(got[:2]) == repr(want[:2]) and got[5:] == want[5:]
    if want[0] is None:
        assert got[2:5] == (None, None, None)
        return
    # (a constant array's std is its mean's rounding error: ~1e-16 of its magnitude)
    tolerance = 1e-12 * max(abs(want[0]), abs(want[1]))
    assert got[2:5] == pytest.approx(want[2:5], rel=1e-12, abs=tolerance), "mean, std, norm"
    assert all(np.isfinite(v) for v in got[:5]), "finite stats for finite elements"


def test_stats_of_does_not_change_its_input() -> None:
    arr = _NORMAL.copy()
    stats_of(arr)
    assert np.array_equal(arr, _NORMAL)
