"""Stats of tensors' numbers (min, max, mean, std, norm, NaN/infinity counts), in numpy.

float64 over the finite elements, population std computed in two passes (no cancellation).
``stats_of`` takes one large flat array; ``segment_stats`` many small ones at once.
Both give rows of numbers in TensorStats' field order after ``numel`` (``StatsRow``):
thousands of small dicts cost more than the numpy calls that fill them.
"""

from __future__ import annotations

import math

import numpy as np

_HUGE = 1e150  # past this magnitude (or under its inverse) stats are computed scaled

# (min, max, mean, std, norm, nan, inf): the first five None when no element is finite
StatsRow = tuple[float | None, float | None, float | None, float | None, float | None, int, int]


def stats_of(arr: np.ndarray) -> StatsRow:
    """Stats of one (large) flat array: float64, over the finite elements, two-pass std.

    numpy with no BLAS call (np.dot went to a multi-threaded BLAS that spun ~9 ms a call on
    a busy box; torch.var_mean took ~200 µs for 16k elements). One float64 copy, centred in
    place; the norm comes from the same sum of squares, ``|x|² = Σ(x-m)² + n·m²`` (two
    non-negative terms: no cancellation), so ~2.5x fewer passes than before.
    """
    numel = int(arr.size)
    x = arr.astype(np.float64)  # a copy, even of float64 input: it is centred in place below
    nan = inf = 0
    with np.errstate(over="ignore", invalid="ignore"):  # a float64 sum past 1e308: redone scaled
        total = float(x.sum()) if numel else 0.0
    if not math.isfinite(total):  # some NaN or infinity, or a float64 sum past 1e308
        finite = np.isfinite(x)
        nan = int(np.isnan(x).sum())
        inf = numel - int(finite.sum()) - nan
        x = x[finite]
        with np.errstate(over="ignore", invalid="ignore"):
            total = float(x.sum())
    n = int(x.size)
    if n == 0:
        return (None, None, None, None, None, nan, inf)
    low, high = float(x.min()), float(x.max())
    # float64 magnitudes past ~1e154 overflow their squares (and their sum, past ~1e308): work
    # on x / scale then, exact in float64 (a power of two), and scale the results back
    scale = max(abs(low), abs(high))
    scale = math.ldexp(1.0, math.frexp(scale)[1] - 1) if scale > _HUGE or 0.0 < scale < 1 / _HUGE else 1.0
    if scale != 1.0:
        x /= scale
        total = float(x.sum())
    mean = total / n
    np.subtract(x, mean, out=x)
    squares = float(np.einsum("i,i->", x, x))  # Σ(x-m)², einsum's own loop (no BLAS)
    return (
        low,
        high,
        mean * scale,
        math.sqrt(squares / n) * scale,
        math.sqrt(squares + n * mean * mean) * scale,
        nan,
        inf,
    )


def segment_stats(arrays: list[np.ndarray]) -> list[StatsRow]:
    """Stats of many small flat arrays at once (float64, over the finite elements).

    A handful of ``reduceat`` calls instead of ~10 numpy calls per tensor: for the thousands
    of small tensors of a trace, per-call overhead dominated. Population std (a single
    element has std 0, not NaN), two-pass (no cancellation).
    """
    lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
    empty: StatsRow = (None, None, None, None, None, 0, 0)
    out: list[StatsRow] = [empty] * len(arrays)
    nonempty = np.flatnonzero(lengths)
    if nonempty.size == 0:
        return out
    # one concatenation, then one float64 conversion (numpy promotes mixed dtypes to one
    # that holds every value of each exactly)
    big = np.concatenate([arrays[i] for i in nonempty.tolist()]).astype(np.float64, copy=False)
    seg = lengths[nonempty]
    starts = np.concatenate(([0], np.cumsum(seg)[:-1]))
    finite = np.isfinite(big)
    if finite.all():  # the usual case: no masking passes
        n_finite, n_nan = seg, np.zeros_like(seg)
        x0, low, high = big, big, big
    else:
        n_finite = np.add.reduceat(finite.astype(np.int64), starts)
        n_nan = np.add.reduceat(np.isnan(big).astype(np.int64), starts)
        x0 = np.where(finite, big, 0.0)
        low, high = np.where(finite, big, np.inf), np.where(finite, big, -np.inf)
    counts = np.maximum(n_finite, 1)
    with np.errstate(over="ignore", invalid="ignore"):  # extreme float64: redone scaled below
        means = np.add.reduceat(x0, starts) / counts
        centred = x0 - np.repeat(means, seg)
        if x0 is not big:
            centred[~finite] = 0.0
        centred *= centred
        squares = np.add.reduceat(centred, starts)  # Σ(x-m)² per tensor
        # |x|² = Σ(x-m)² + n·m² (as stats_of): two non-negative terms, no cancellation
        norms = np.sqrt(squares + n_finite * means * means)
        stds = np.sqrt(squares / counts)
    mins = np.minimum.reduceat(low, starts)
    maxs = np.maximum.reduceat(high, starts)
    extremes = np.maximum(np.abs(mins), np.abs(maxs))
    n_inf = seg - n_finite - n_nan
    rows = zip(
        nonempty.tolist(),
        mins.tolist(),
        maxs.tolist(),
        means.tolist(),
        stds.tolist(),
        norms.tolist(),
        n_nan.tolist(),
        n_inf.tolist(),
        n_finite.tolist(),
        extremes.tolist(),
        strict=True,
    )
    for i, low_, high_, mean, std, norm, nan, inf, n_finite_, extreme in rows:
        if not n_finite_:
            out[i] = (None, None, None, None, None, nan, inf)
        elif extreme > _HUGE or 0.0 < extreme < 1 / _HUGE:  # squares over/underflow: scaled, alone
            out[i] = stats_of(arrays[i])
        else:
            out[i] = (low_, high_, mean, std, norm, nan, inf)
    return out
