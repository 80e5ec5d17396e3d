"""The tensor -> TensorValue crossing: levels of detail, budget, non-finite numbers, stats."""

from __future__ import annotations

import base64
import gc
import weakref

import msgspec
import numpy as np
import pytest
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from gradtrace.engine.summarize import BATCH_STATS, TINY_TENSOR, Summarizer
from gradtrace.trace import tensor_array
from gradtrace.trace_schema import TensorValue


def _summarized(*tensors: torch.Tensor, budget: int = 10**9) -> tuple[list[TensorValue], list[str]]:
    """The records of ``tensors``, and the tensor_data their ``data`` indexes."""
    s = Summarizer(budget)
    out = [s(t) for t in tensors]
    s.finalize()
    for value in out:
        assert isinstance(value, TensorValue)
        msgspec.convert(msgspec.to_builtins(value), TensorValue)  # and valid as JSON data
    return out, s.tensor_data


def _summaries(*tensors: torch.Tensor, budget: int = 10**9) -> list[TensorValue]:
    return _summarized(*tensors, budget=budget)[0]


def _expected_stats(t: torch.Tensor) -> dict:
    x = t.detach().double().reshape(-1).numpy()
    x = x[np.isfinite(x)]
    return {"min": x.min(), "max": x.max(), "mean": x.mean(), "std": x.std(), "norm": np.linalg.norm(x)}


@pytest.mark.parametrize("numel", [1, 7, TINY_TENSOR, TINY_TENSOR + 1, BATCH_STATS, BATCH_STATS + 1, 5000])
def test_levels_and_exact_numbers(numel: int) -> None:
    t = torch.randn(numel, generator=torch.Generator().manual_seed(numel), requires_grad=True)
    [v], tensor_data = _summarized(t)
    if numel <= TINY_TENSOR:
        assert v.values == t.detach().double().tolist()  # float32 exactly, as float64
        assert v.data is None and tensor_data == []
    else:
        assert v.data == 0 and len(tensor_data) == 1
        raw = np.frombuffer(base64.b64decode(tensor_data[v.data]), "<f4")
        assert np.array_equal(raw, t.detach().numpy())
        assert v.values is None
    for key, want in _expected_stats(t).items():
        assert getattr(v.stats, key) == pytest.approx(want, rel=1e-6, abs=1e-9), key
    assert v.stats.numel == numel and v.shape == [numel] and v.dtype == "float32"


def test_non_finite_numbers_are_named_and_counted() -> None:
    t = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 3.0])
    [v] = _summaries(t)
    assert v.values == [1.0, "NaN", "Infinity", "-Infinity", 3.0]
    assert v.stats.nan == 1 and v.stats.inf == 2
    assert v.stats.min == 1.0 and v.stats.max == 3.0 and v.stats.mean == 2.0
    [big] = _summaries(torch.cat([torch.full((2000,), float("nan")), torch.ones(10)]))
    assert big.stats.nan == 2000 and big.stats.mean == 1.0
    [allnan] = _summaries(torch.full((3,), float("nan")))
    assert allnan.stats.min is None and allnan.stats.nan == 3


def test_other_dtypes_and_empty() -> None:
    ints, flags, half, empty = _summaries(
        torch.arange(4),
        torch.tensor([True, False]),
        torch.tensor([0.5, 1.5], dtype=torch.float16),
        torch.zeros(0, 3),
    )
    assert ints.values == [0, 1, 2, 3] and ints.dtype == "int64" and ints.stats.mean == 1.5
    assert flags.values == [1, 0] and flags.dtype == "bool"
    assert half.values == [0.5, 1.5] and half.dtype == "float16"
    assert empty.shape == [0, 3] and empty.values == [] and empty.stats.min is None


def test_budget_counts_each_tensors_numbers_once_then_stats_only() -> None:
    s = Summarizer(value_budget=6000)
    big = torch.ones(5000)
    first = s(big)
    again = s(big.detach())  # the same numbers again: the same record, one block, no charge
    small = s(torch.ones(10))  # a list costs 4 per number: 40 fits in what is left
    other = s(torch.zeros(1000))  # 1000 more no longer fit: stats only
    s.finalize()
    assert again is first and first.data == 0 and s.tensor_data[0]
    assert small.values == [1.0] * 10
    assert other.truncated and other.data is None and other.stats.mean == 0.0
    assert s.values_truncated == 1 and s.budget_left == 6000 - 5000 - 40
    assert len(s.tensor_data) == 1  # (the list is inline; the cut one has no block)


def test_a_final_value_and_a_later_snapshot_of_the_same_tensor_share_one_block() -> None:
    s = Summarizer(value_budget=100)
    t = torch.randn(500)
    final = s.final(t)
    snapshot = s(t)  # past the snapshot budget, but its numbers are on the wire already
    s.finalize()
    assert snapshot is final and final.data == 0 and len(s.tensor_data) == 1
    assert s.values_truncated == 0 and s.budget_left == 100


def test_snapshot_is_taken_at_capture_time() -> None:
    s = Summarizer()
    t = torch.zeros(3)
    before = s(t)
    t.add_(5.0)  # an in-place write after capture (bumps the version)
    after = s(t)
    s.finalize()
    assert before.values == [0.0, 0.0, 0.0] and after.values == [5.0, 5.0, 5.0]


def test_same_memory_through_another_tensor_object_is_summarized_once() -> None:
    s = Summarizer()
    t = torch.randn(3, 4)
    assert s(t) is s(t.detach()) and s(t) is not s(t.t())


def test_a_large_host_tensor_is_not_kept_alive_by_its_record() -> None:
    """Read where it is seen, nothing later needs its memory: a backward frees activations and
    gradients as it goes, and the trace must not hold them to its end (a big model's peak)."""
    s = Summarizer()
    t = torch.randn(BATCH_STATS + 1, requires_grad=True)
    alive = weakref.ref(t)
    storage = StorageWeakRef(t.untyped_storage())
    value = s(t)
    assert s(t) is value and s.final(t) is value and s(t.detach()) is value  # (found again while alive)
    del t
    gc.collect()
    assert alive() is None and storage.expired()
    s.finalize()
    assert value.stats.numel == BATCH_STATS + 1 and value.data is not None


def test_memory_freed_and_given_to_a_new_tensor_is_a_new_record() -> None:
    """Same address, shape, dtype and version (a new tensor starts at version 0) but other
    numbers: the entry of the freed tensor is stale, its record and stats are not reused."""
    s = Summarizer()
    for attempt in range(50):
        first = torch.full((64, 64), float(attempt))
        address = first.data_ptr()
        old = s(first)
        del first
        second = torch.full((64, 64), -1.0)
        if second.data_ptr() == address:
            break
    else:
        pytest.skip("the allocator never gave the freed memory to the next tensor")
    new = s(second)
    s.finalize()
    assert new is not old and new.stats is not old.stats
    assert new.stats.min == new.stats.max == -1.0 and old.stats.min == old.stats.max == float(attempt)
    assert np.array_equal(tensor_array(new, s.tensor_data), second.numpy())


DTYPES = [
    torch.float64,
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
]


@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d).removeprefix("torch.") for d in DTYPES])
@pytest.mark.parametrize("numel", [5, 100, 3000])  # a list; base64 batched; base64 alone
def test_numbers_travel_in_their_own_dtype_bit_for_bit(dtype: torch.dtype, numel: int) -> None:
    g = torch.Generator().manual_seed(numel)
    t = (torch.randn(numel, generator=g, dtype=torch.float64) * 100).to(dtype).reshape(-1, 1)
    if dtype.is_floating_point:
        t[0, 0] = float("nan")
        t[-1, 0] = -float("inf")
    [v], tensor_data = _summarized(t.t())  # transposed: the numbers still travel row-major
    assert v.dtype == str(dtype).removeprefix("torch.") and v.shape == [1, numel]
    assert (v.values is not None) == (numel <= TINY_TENSOR) and (v.data is not None) == (numel > TINY_TENSOR)
    if v.data is not None:  # the tensor's own bytes: 8 per float64 number, 2 per bfloat16, 1 per bool
        assert len(base64.b64decode(tensor_data[v.data])) == numel * t.element_size()
    decoded = tensor_array(v, tensor_data)
    want = t.t().float() if dtype == torch.bfloat16 else t.t()
    assert decoded.dtype == want.numpy().dtype and decoded.shape == (1, numel)
    assert np.array_equal(decoded, want.numpy(), equal_nan=dtype.is_floating_point)


def test_float64_is_never_rounded_to_float32() -> None:
    t = torch.randn(64, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) / 3
    [v], tensor_data = _summarized(t)
    assert np.array_equal(tensor_array(v, tensor_data), t.numpy())  # 0 error, not float32's ~1e-8


def test_final_values_are_exact_whatever_the_snapshot_budget() -> None:
    s = Summarizer(value_budget=0, final_value_limit=5000)
    t = torch.randn(3000)
    snapshot = s(t)
    final = s.final(t)
    too_many = s.final(torch.randn(3000))  # 3000 + 3000 > 5000: stats only, counted
    s.finalize()
    assert snapshot.truncated and snapshot.data is None and s.values_truncated == 1
    assert np.array_equal(tensor_array(final, s.tensor_data), t.numpy()) and not final.truncated
    assert too_many.truncated and too_many.stats.numel == 3000 and s.finals_truncated == 1
    with pytest.raises(ValueError, match="stats only"):
        tensor_array(too_many, s.tensor_data)


@pytest.mark.parametrize("magnitude", [1e307, 1e200, 1e-200, 1e-300])
@pytest.mark.parametrize("numel", [3, 2000])  # batched stats, and one tensor alone
def test_float64_stats_of_extreme_magnitudes_stay_finite_and_right(magnitude: float, numel: int) -> None:
    """Squares of 1e200 overflow float64 (and of 1e-200 underflow): the stats are computed
    scaled, so a finite tensor never gets an infinite norm or a zero std."""
    base = torch.linspace(-1, 1, numel, dtype=torch.float64) + 0.5
    t = base * magnitude
    [v] = _summaries(t)
    stats = v.stats
    exact = {  # the same numbers at an ordinary scale, times the magnitude
        "mean": float(base.mean()) * magnitude,
        "std": float(base.std(unbiased=False)) * magnitude,
        "norm": float(torch.linalg.vector_norm(base)) * magnitude,
    }
    for key, want in exact.items():
        assert getattr(stats, key) == pytest.approx(want, rel=1e-9), key
    assert stats.min == float(t.min()) and stats.max == float(t.max())


def test_a_complex_final_value_keeps_its_numbers_and_the_stats_of_its_magnitude() -> None:
    s = Summarizer()
    z = torch.tensor([3 + 4j, 0j])
    value = s.final(z)
    s.finalize()
    assert not value.truncated and value.values == [3.0, 4.0, 0.0, 0.0]  # (re, im) in turn
    assert value.stats.max == 5.0 and value.stats.of == "magnitude"  # the magnitude's stats
    assert np.array_equal(tensor_array(value), z.numpy()) and s.finals_truncated == 0


def test_many_small_tensors_summarized_in_blocks_each_get_their_own_stats() -> None:
    """Small tensors are summarized together, a block per dtype and size (several blocks when
    there are many): each still gets its own stats and numbers, the odd ones (NaN, infinity,
    extreme magnitudes) among plain ones included."""
    g = torch.Generator().manual_seed(7)
    tensors = [torch.randn(1000, generator=g) * (k + 1) for k in range(600)]  # > one block
    tensors[3][5] = float("nan")
    tensors[400][0] = float("inf")
    tensors += [torch.randn(40, dtype=torch.float64, generator=g) * 1e200, torch.arange(40).reshape(8, 5)]
    summaries, tensor_data = _summarized(*tensors)
    for t, v in zip(tensors, summaries, strict=True):
        x = t.double().reshape(-1).numpy()
        assert v.stats.nan == int(np.isnan(x).sum()) and v.stats.inf == int(np.isinf(x).sum())
        scale = 1e200 if v.stats.max > 1e100 else 1.0  # (numpy's own norm overflows there)
        for key, want in _expected_stats(t / scale).items():
            assert getattr(v.stats, key) / scale == pytest.approx(want, rel=1e-9, abs=1e-12), key
        assert np.array_equal(tensor_array(v, tensor_data), t.numpy(), equal_nan=True)


@pytest.mark.parametrize("numel", [5, 100])  # a list; base64 (both copied at capture, finished later)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_numbers_are_copied_at_capture_even_when_a_write_skips_the_version(
    numel: int, requires_grad: bool
) -> None:
    s = Summarizer()
    t = torch.zeros(numel, requires_grad=requires_grad)
    before = s(t)
    t.data.add_(5.0)  # a write through .data: t._version does not move
    s.finalize()
    assert np.array_equal(tensor_array(before, s.tensor_data), np.zeros(numel, np.float32))
    assert before.stats.max == 0.0 and before.stats.norm == 0.0


def _views(base: torch.Tensor) -> list[torch.Tensor]:
    return [
        base,
        base.permute(2, 0, 1),
        base.transpose(0, 2),
        base.reshape(6, 4),
        base[:, :, :2],  # not dense: a gap after every second element
        base[:1],  # dense, but fewer elements
        base.unsqueeze(1).permute(3, 1, 0, 2),  # a dim of size 1 with any stride
        base[0, 0, :1].expand(3, 3),  # stride 0: the same element again
    ]


def test_views_of_the_same_elements_share_their_stats_and_others_have_their_own() -> None:
    base = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(3))
    s = Summarizer()
    summaries = [s(v) for v in _views(base)]
    s.finalize()
    for view, summary in zip(_views(base), summaries, strict=True):
        order = sorted(range(view.dim()), key=lambda d: -view.stride()[d])
        dense = view.permute(order).is_contiguous() and view.numel() == base.numel()
        assert (summary.stats is summaries[0].stats) == dense, (view.shape, view.stride())
        x = view.double()
        assert summary.stats.mean == pytest.approx(x.mean().item(), rel=1e-12)
        assert summary.stats.norm == pytest.approx(x.norm().item(), rel=1e-12)
        assert np.array_equal(tensor_array(summary, s.tensor_data), view.numpy())


def test_a_sparse_tensor_is_summarized_as_its_dense_numbers() -> None:
    dense = torch.tensor([[0.0, 2.0], [3.0, 0.0]])
    [v] = _summaries(dense.to_sparse())
    assert v.values == [0.0, 2.0, 3.0, 0.0] and v.shape == [2, 2]
    assert v.stats.mean == 1.25 and v.stats.max == 3.0


@pytest.mark.parametrize("numel", [12, 300, 3000])  # a list; base64 (small, then large)
def test_a_lazily_negated_view_has_its_own_numbers_not_those_of_its_memory(numel: int) -> None:
    """``z.conj().imag`` is ``z.imag``'s memory with a negation pending: the same address,
    layout, dtype and version, other numbers. Each gets its own record, both right."""
    z = torch.randn(numel, dtype=torch.complex64, generator=torch.Generator().manual_seed(numel))
    plain, negated = z.imag, z.conj().imag
    assert negated.is_neg() and negated.data_ptr() == plain.data_ptr()
    s = Summarizer()
    records = [s(plain), s(negated), s(negated.reshape(-1, 1).t())]  # and a view of the view
    s.finalize()
    for t, v in zip([plain, negated, negated.reshape(-1, 1).t()], records, strict=True):
        assert np.array_equal(tensor_array(v, s.tensor_data), t.resolve_neg().numpy())
        assert v.stats.mean == pytest.approx(t.double().mean().item(), rel=1e-12)
        assert v.stats.min == t.min().item() and v.stats.max == t.max().item()
    assert records[0].stats.mean == -records[1].stats.mean


def test_a_model_reading_the_imaginary_part_of_a_conjugate_traces_with_torchs_numbers() -> None:
    """A real tensor with a pending negation flows through a model: the trace keeps its
    numbers (numpy cannot read such a tensor as it lies) and the gradients are PyTorch's."""
    import gradtrace

    class ConjImag(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            z = torch.view_as_complex(self.lin(x).reshape(-1, 4, 2))
            return z.conj().imag * 2

    torch.manual_seed(0)
    model, x = ConjImag(), torch.randn(300, 8)
    trace = gradtrace.trace(model, x, lambda y: (y**2).sum())
    out = model(x)
    assert np.array_equal(trace.values["output"], out.detach().numpy())
    want = torch.autograd.grad((out**2).sum(), list(model.parameters()))
    for (name, _), grad in zip(model.named_parameters(), want, strict=True):
        assert np.allclose(trace.grads[name], grad.numpy(), rtol=1e-5, atol=1e-6), name


def test_exact_arrays_apply_a_pending_negation_or_conjugation() -> None:
    from gradtrace.engine.summarize import exact_array

    z = torch.tensor([1 + 2j, 3 - 4j])
    assert np.array_equal(exact_array(z.conj()), np.array([1 - 2j, 3 + 4j]))
    assert np.array_equal(exact_array(z.conj().imag), np.array([-2.0, 4.0], np.float32))


@pytest.mark.parametrize("rows", [8, 64])  # 8x32 and its transpose: small; 64x32: large
def test_parameters_and_their_transposes_travel_row_major_with_their_own_numbers(rows: int) -> None:
    """A tensor that requires grad (a weight, its ``.t()`` saved by Linear) is read through
    numpy as it lies in memory: its numbers row-major, its stats those of its elements."""
    w = torch.nn.Parameter(torch.randn(rows, 32, generator=torch.Generator().manual_seed(rows)))
    records, tensor_data = _summarized(w, w.t())
    for t, v in zip([w, w.t()], records, strict=True):
        assert v.data is not None and v.shape == list(t.shape)
        assert np.array_equal(tensor_array(v, tensor_data), t.detach().numpy())
        want = _expected_stats(t)
        assert v.stats.min == want["min"] and v.stats.max == want["max"]
        assert v.stats.mean == pytest.approx(want["mean"], rel=1e-12)
        assert v.stats.norm == pytest.approx(want["norm"], rel=1e-12)


def test_the_exact_array_of_a_tensor_that_requires_grad_is_a_copy() -> None:
    from gradtrace.engine.summarize import exact_array

    w = torch.nn.Parameter(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    got = exact_array(w.t())
    with torch.no_grad():
        w.mul_(10)  # a later write does not reach the copy
    assert got.dtype == np.float32 and np.array_equal(got, np.array([[1.0, 3.0], [2.0, 4.0]]))


def test_the_summarizer_reads_no_memory_but_the_tensors_own() -> None:
    """No view of the process's address space: the engine does not import ctypes, and a
    small tensor's snapshot is its own bytes, also when it requires grad."""
    import gradtrace.engine.summarize as summarize

    assert "ctypes" not in vars(summarize) and not hasattr(summarize, "_MEMORY")
    w = torch.nn.Parameter(torch.arange(20, dtype=torch.float64))
    (summary,), data = _summarized(w)
    assert base64.b64decode(data[summary.data]) == w.detach().numpy().tobytes()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_strided_views_read_in_place_carry_torchs_numbers_row_major(dtype: torch.dtype) -> None:
    """Non-contiguous views (transposed, permuted, stepped, expanded: zero strides), small
    and large, read through numpy's view of their memory: the same bytes and stats as torch's
    own row-major copy."""
    from gradtrace.engine.summarize import _own_array

    base = (torch.arange(4 * 40 * 30) % 13 - 6).to(dtype).reshape(4, 40, 30)
    views = [
        base.permute(2, 0, 1),
        base[:, ::3, 1::2],
        base[0].t(),
        base[:1, :1].expand(5, 7, 30),
        base[1, :3, :4].t(),
    ]
    own = np.dtype(str(dtype).removeprefix("torch."))
    for view in views:
        assert not view.is_contiguous()
        array = _own_array(view, view.numel(), False)
        assert array.dtype == own and array.tobytes() == view.contiguous().numpy().tobytes()
        (summary,), data = _summarized(view)
        if summary.data is not None:
            assert base64.b64decode(data[summary.data]) == view.contiguous().numpy().tobytes()
        else:
            assert (
                summary.values == view.reshape(-1).to(torch.uint8 if dtype == torch.bool else dtype).tolist()
            )


def test_exact_arrays_of_views_are_writable_row_major_copies_of_torchs_numbers() -> None:
    from gradtrace.engine.summarize import exact_array

    base = torch.randn(6, 4, requires_grad=True)
    tensors = [base, base.t(), base[::2, 1:], base[:1].expand(3, 6, 4), torch.tensor(2.5), torch.zeros(0, 3)]
    tensors += [torch.arange(6).reshape(2, 3).t(), torch.ones(2, 3, dtype=torch.bool)]
    for t in tensors:
        expected = t.detach().contiguous().numpy().copy()
        array = exact_array(t)
        assert array.dtype == expected.dtype and array.shape == expected.shape
        assert array.tobytes() == expected.tobytes()
        assert array.flags.writeable and array.flags.c_contiguous
    array = exact_array(base)
    with torch.no_grad():
        base.add_(1.0)
    assert not np.array_equal(array, base.detach().numpy())  # a copy, not a view
