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


# ---- large arrays, a chunk at a time: the same bits as the whole-array path -----------------
_BLOCK = np.getbufsize()  # (numpy's buffer: the chunked sums split where numpy's own do)
_SMALL_CHUNK = 2 * _BLOCK  # (small chunks: many levels of halving and many buffers on test sizes)


def _whole(arr: np.ndarray) -> tuple:
    """stats_of on its whole-array path (the chunked one switched off)."""
    from gradtrace.engine import tensor_stats

    chunked, tensor_stats.CHUNKED = tensor_stats.CHUNKED, arr.size  # (only larger arrays go in chunks)
    try:
        return stats_of(arr)
    finally:
        tensor_stats.CHUNKED = chunked


def _large_cases() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    n = 13 * _BLOCK + 77  # (a partial last buffer, a halving that is not a power of two)
    normal = rng.standard_normal(n)
    return {
        "float32": (normal * 3 + 0.5).astype(np.float32),
        "float64": normal * 1e-3 - 7.0,
        "float16": normal.astype(np.float16),
        "float32 transposed": normal[: 97 * 1000].astype(np.float32).reshape(97, 1000).T,
        "float32 permuted": normal[: 24 * 4096].astype(np.float32).reshape(4, 6, 4096).transpose(2, 0, 1),
        "one buffer exactly": normal[: 4 * _BLOCK].astype(np.float32),
        "a large mean": (normal + 1e6).astype(np.float32),
        "int64 past 2**53": (np.abs(normal) * 1e17 + 2**60).astype(np.int64),
    }


@pytest.mark.parametrize("name", list(_large_cases()))
def test_a_large_array_a_chunk_at_a_time_gives_the_whole_arrays_bits(name: str) -> None:
    from gradtrace.engine.tensor_stats import _stats_in_chunks

    arr = _large_cases()[name]
    for chunk in (_SMALL_CHUNK, 3 * _BLOCK, 1 << 18):
        assert _stats_in_chunks(arr, chunk) == _whole(arr), chunk


@pytest.mark.parametrize(
    "values",
    [
        np.abs(np.random.default_rng(1).standard_normal(9 * _BLOCK)).astype(np.float32)
        * (np.arange(9 * _BLOCK) % 5 > 0),
        np.where(np.arange(9 * _BLOCK) == 17, np.nan, 1.0),
        np.full(9 * _BLOCK, 1e151),
        np.random.default_rng(2).standard_normal((300, 200))[:, ::2],
        np.random.default_rng(4).standard_normal(9 * _BLOCK)[::-1],
    ],
    ids=["a zero minimum", "a NaN", "past 1e150", "not one dense block", "a negative stride"],
)
def test_a_large_array_the_chunks_cannot_decide_goes_whole(values: np.ndarray) -> None:
    from gradtrace.engine.tensor_stats import _stats_in_chunks

    assert _stats_in_chunks(values, _SMALL_CHUNK) is None


def test_stats_of_a_large_array_takes_the_chunks_and_agrees() -> None:
    from gradtrace.engine import tensor_stats

    assert tensor_stats._chunks_agree()  # (this numpy splits its sums where the chunks assume)
    arr = np.random.default_rng(3).standard_normal(tensor_stats.CHUNKED + 12_345).astype(np.float32)
    assert stats_of(arr) == _whole(arr) == tensor_stats._stats_in_chunks(arr)


def test_the_chunked_sum_splits_where_numpys_pairwise_sum_does() -> None:
    """(The stats above hide a sum's last bits in the mean's rounding: the sum itself, over
    numbers of many magnitudes, where every change of order shows.)"""
    from gradtrace.engine.tensor_stats import _pairwise_in_chunks

    rng = np.random.default_rng(8)
    for n in (9 * _BLOCK + 5, 21 * _BLOCK + 13, 3 * _BLOCK):
        values = rng.standard_normal(n) * 10.0 ** rng.uniform(-6, 6, n)
        whole = float(np.add.reduce(values))
        for chunk in (_BLOCK, _SMALL_CHUNK, 5 * _BLOCK + 8):
            assert _pairwise_in_chunks(values, 0, n, chunk) == whole, (n, chunk)
