"""Stats of tensors' numbers (min, max, mean, std, norm, NaN/infinity counts), in numpy.

float64 over the finite elements, population std computed in two passes (no cancellation).
``stats_of`` takes one large array; ``block_stats`` many small ones of one size at once.
Both give rows of numbers in TensorStats' field order after ``numel`` (``StatsRow``):
thousands of small dicts cost more than the numpy calls that fill them.
"""

from __future__ import annotations

import functools
import math

import numpy as np

try:  # numpy's C einsum: np.einsum is a Python wrapper around it (stats_of calls it once per tensor)
    from numpy._core.multiarray import c_einsum as _einsum
except ImportError:  # (numpy 1.x keeps it elsewhere; the wrapper then)
    _einsum = np.einsum
# the ufuncs' reductions called directly: ndarray.sum/min/max go through numpy's Python
# wrappers (_methods._sum, _amin, _amax) to the same reductions: one layer less per call
_sum, _min, _max = np.add.reduce, np.minimum.reduce, np.maximum.reduce

_FLOAT32 = np.dtype(np.float32)
_HUGE = 1e150  # past this magnitude (or under its inverse) stats are computed scaled

# (min, max, mean, std, norm, nan, inf): the first five None when no element is finite
StatsRow = tuple[float | None, float | None, float | None, float | None, float | None, int, int]


def stats_of(arr: np.ndarray) -> StatsRow:
    """Stats of one (large) array of any shape: float64, over the finite elements, two-pass std.

    Past ``CHUNKED`` elements the same numbers come from float64 copies of a chunk at a time
    (``_stats_in_chunks``), where it can decide them.

    numpy with no BLAS call (np.dot goes to a multi-threaded BLAS, whose threads spin on a
    busy machine; torch's reductions pay a dispatch per call and sum in another order). One
    float64 copy, centred in place; the norm comes from the same sum of squares,
    ``|x|² = Σ(x-m)² + n·m²`` (two non-negative terms: no cancellation), so the elements
    are read as few times as the two-pass std needs.

    min and max come first: when both are finite and of moderate magnitude (the usual case)
    nothing below can overflow or meet a NaN, so no ``np.errstate`` is entered (a context
    per call, a real share of the whole for a small tensor); otherwise ``_stats_of_unusual``
    handles it.
    """
    if arr.size == 0:
        return (None, None, None, None, None, 0, 0)
    if arr.size > CHUNKED and _chunks_agree():
        row = _stats_in_chunks(arr)
        if row is not None:
            return row
    # a flat copy, even of float64 input: it is centred in place below (the order of the
    # elements does not matter: any layout, e.g. a transposed weight, is read as it lies)
    x = arr.astype(np.float64).ravel("K")  # (astype keeps the layout: ravel is then a view)
    # (NaN if any element is NaN.) float32's own min and max read half the bytes and are the
    # same numbers (float64 holds every float32 exactly, in the same order), but for which
    # zero, 0.0 or -0.0, a tie between them gives: that is left to float64's, as before (and
    # other dtypes' min and max come from the float64 copy: the zeros send them there)
    low, high = (float(_min(arr, None)), float(_max(arr, None))) if arr.dtype == _FLOAT32 else (0.0, 0.0)
    if low == 0.0 or high == 0.0:
        low, high = float(_min(x)), float(_max(x))
    extreme = max(-low, high)
    if not 1 / _HUGE <= extreme <= _HUGE and extreme != 0.0:  # (a NaN fails the range: unusual)
        return _stats_of_unusual(x)
    return _centred(x, low, high, float(_sum(x)))  # (the sum at most n·1e150: no overflow)


# ---- large arrays, a chunk at a time ------------------------------------------------------
# Past CHUNKED elements an array's stats are computed from float64 copies of CHUNK elements at a
# time (a few MB, reused from the allocator's free lists) instead of one float64 copy of the
# whole: an embedding's copy is hundreds of MB of fresh memory, every page of it faulted in, and
# held at once with the rest of the trace. The numbers are the very same bits: each reduction
# is split where numpy itself splits it (see _pairwise_in_chunks, _squares_in_chunks), and the
# agreement is checked once per process on numpy's own results (_chunks_agree), the whole-array
# path kept otherwise.
CHUNKED = 1 << 20  # elements: larger arrays go a chunk at a time
CHUNK = 1 << 18  # elements per float64 chunk (2 MB); a multiple of numpy's buffer size
_PAIRWISE_BLOCK = 128  # numpy's pairwise summation: below this, one unrolled loop; above, halves


def _flat(arr: np.ndarray) -> np.ndarray | None:
    """``arr``'s elements in memory order, as a 1-D view (None when they are not one dense
    block: then there is no such view, and the whole-array path copies it)."""
    if any(stride < 0 for stride in arr.strides):  # (numpy's copy keeps such an array's order)
        return None
    flat = arr.ravel("K")
    return flat if np.may_share_memory(flat, arr) else None  # (ravel copies what it cannot view)


def _pairwise_in_chunks(flat: np.ndarray, start: int, n: int, leaf: int) -> float:
    """``_sum`` of the float64 copy of ``flat[start:start + n]``, bit for bit, without the copy:
    numpy sums a contiguous float64 array pairwise, halving it (the first half a multiple of 8)
    until a part is at most _PAIRWISE_BLOCK long; the same halving is done here down to parts
    of at most ``leaf`` elements, each summed by numpy from a copy of its own."""
    if n <= leaf:
        return float(_sum(flat[start : start + n].astype(np.float64)))
    half = n // 2
    half -= half % 8
    return _pairwise_in_chunks(flat, start, half, leaf) + _pairwise_in_chunks(
        flat, start + half, n - half, leaf
    )


def _squares_in_chunks(flat: np.ndarray, mean: float, chunk: int) -> float:
    """``_einsum("i,i->", x, x)`` of ``x`` = the float64 copy of ``flat`` minus ``mean``, bit
    for bit, without the copy: numpy's einsum goes through the array in buffers of
    ``np.getbufsize()`` elements, adding each buffer's sum of squares to the total in turn; here
    each such buffer's is a row of one einsum over a chunk, added in the same order."""
    block = np.getbufsize()
    total = 0.0
    for first in range(0, flat.size, chunk):
        x = flat[first : first + chunk].astype(np.float64)
        np.subtract(x, mean, out=x)
        whole = x.size - x.size % block
        rows = x[:whole].reshape(-1, block)
        for square in _einsum("ij,ij->i", rows, rows).tolist():
            total = total + square
        if whole < x.size:
            tail = x[whole:]
            total = total + float(_einsum("i,i->", tail, tail))
    return total


def _stats_in_chunks(arr: np.ndarray, chunk: int = CHUNK) -> StatsRow | None:
    """``stats_of(arr)`` a chunk at a time, the same bits; None where the whole-array path must
    decide: an array not one dense block, a NaN or an infinity, magnitudes past 1e150 or under
    1e-150, a min or max that is zero.

    The min and max are the array's own, read in its dtype (no copy): the float64 copy keeps
    the elements' order (its rounding of huge integers never swaps two), so its min and max
    are these, converted; but for which zero a tie between 0.0 and -0.0 gives, numpy's choice
    alone: an array whose min or max is zero goes whole."""
    flat = _flat(arr)
    if flat is None:
        return None
    low, high = float(_min(arr, None)), float(_max(arr, None))  # (NaN for both if one is NaN)
    extreme = max(-low, high)
    if low == 0.0 or high == 0.0 or not 1 / _HUGE <= extreme <= _HUGE:
        return None
    n = int(flat.size)
    mean = _pairwise_in_chunks(flat, 0, n, chunk) / n
    squares = _squares_in_chunks(flat, mean, chunk)
    return (low, high, mean, math.sqrt(squares / n), math.sqrt(squares + n * mean * mean), 0, 0)


@functools.cache
def _chunks_agree() -> bool:
    """Whether this numpy splits its sums where _pairwise_in_chunks and _squares_in_chunks
    assume: their results on a test array (small chunks, several levels of halving, a partial
    buffer) against the whole-array reductions. Checked once, when first needed."""
    block = np.getbufsize()
    values = (
        np.sin(np.arange(6 * block + 13) * 0.7) * 1e3 + 0.25
    )  # (no RNG: numpy.random loads a dozen modules)
    flat = values.astype(np.float32).ravel()
    whole = flat.astype(np.float64)
    total = float(_sum(whole))
    if _pairwise_in_chunks(flat, 0, flat.size, 2 * block) != total:
        return False
    centred = whole - total / whole.size
    return _squares_in_chunks(flat, total / whole.size, 2 * block) == float(
        _einsum("i,i->", centred, centred)
    )


def _centred(
    x: np.ndarray, low: float, high: float, total: float, scale: float = 1.0, nan: int = 0, inf: int = 0
) -> StatsRow:
    """The stats row of a flat float64 copy ``x`` of finite numbers summing to ``total``
    (``x`` is centred in place): mean, two-pass std and the norm from the same sum of
    squares, times ``scale`` (``x`` already divided by it)."""
    n = int(x.size)
    mean = total / n
    np.subtract(x, mean, out=x)
    squares = float(_einsum("i,i->", x, x))  # Σ(x-m)², einsum's own loop (no BLAS)
    return (
        low,
        high,
        mean * scale,
        math.sqrt(squares / n) * scale,
        math.sqrt(squares + n * mean * mean) * scale,
        nan,
        inf,
    )


def _stats_of_unusual(x: np.ndarray) -> StatsRow:
    """``stats_of`` of a flat float64 copy ``x`` holding a NaN or an infinity, or magnitudes
    past 1e150 or under 1e-150 (whose squares, and sums, over/underflow): over the finite
    elements, scaled by a power of two where needed."""
    numel = int(x.size)
    nan = inf = 0
    with np.errstate(over="ignore", invalid="ignore"):  # a float64 sum past 1e308: redone scaled
        total = float(_sum(x))
    if not math.isfinite(total):  # some NaN or infinity, or a float64 sum past 1e308
        finite = np.isfinite(x)
        nan = int(np.isnan(x).sum())
        inf = numel - int(finite.sum()) - nan
        x = x[finite]
        with np.errstate(over="ignore", invalid="ignore"):
            total = float(_sum(x))
    n = int(x.size)
    if n == 0:
        return (None, None, None, None, None, nan, inf)
    low, high = float(_min(x)), float(_max(x))
    # float64 magnitudes past ~1e154 overflow their squares (and their sum, past ~1e308): work
    # on x / scale then, exact in float64 (a power of two), and scale the results back
    scale = max(abs(low), abs(high))
    scale = math.ldexp(1.0, math.frexp(scale)[1] - 1) if scale > _HUGE or 0.0 < scale < 1 / _HUGE else 1.0
    if scale != 1.0:
        x /= scale
        total = float(_sum(x))
    return _centred(x, low, high, total, scale, nan, inf)


def block_stats(block: np.ndarray) -> list[StatsRow]:
    """Stats of each row of a 2-D array: many small tensors of one dtype and one size.

    Each step is one numpy call over the whole block (a row per tensor) instead of ~10 calls
    per tensor: for the thousands of small tensors of a trace, per-call overhead dominated.
    Rows that are not plain (a NaN or an infinity, a float64 sum past 1e308, magnitudes whose
    squares over/underflow) are redone alone by ``stats_of``, which handles them.
    """
    count, numel = block.shape
    if numel == 0:
        return [(None, None, None, None, None, 0, 0)] * count
    x = block.astype(np.float64)  # a copy, even of float64 input: it is centred in place below
    with np.errstate(over="ignore", invalid="ignore"):  # such rows are redone by stats_of
        sums = _sum(x, 1)
        lows, highs = _min(x, 1), _max(x, 1)
        means = sums / numel
        x -= means[:, None]
        np.square(x, out=x)
        squares = _sum(x, 1)  # Σ(x-m)² per row
        # |x|² = Σ(x-m)² + n·m² (as stats_of): two non-negative terms, no cancellation
        norms = np.sqrt(squares + numel * means * means)
        stds = np.sqrt(squares / numel)
        extremes = np.maximum(np.abs(lows), np.abs(highs))
        plain = np.isfinite(sums) & (extremes <= _HUGE) & ((extremes >= 1 / _HUGE) | (extremes == 0.0))
    zeros = [0] * count
    rows: list[StatsRow] = list(
        zip(
            lows.tolist(),
            highs.tolist(),
            means.tolist(),
            stds.tolist(),
            norms.tolist(),
            zeros,
            zeros,
            strict=True,
        )
    )
    if not plain.all():
        for i in np.flatnonzero(~plain).tolist():
            rows[i] = stats_of(block[i])
    return rows
