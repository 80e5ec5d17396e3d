"""THE crossing from a torch.Tensor to a JSON TensorValue (see trace_schema.TensorValue).

Every tensor that ends up in a trace passes through :class:`Summarizer`. The value policy
(README "What a trace keeps"):

* **Final values come first and exactly** (:meth:`Summarizer.final`): the final ``.grad`` of
  every named leaf, parameter and retained tensor and the forward value of every named tensor
  carry their numbers in their own dtype. They are charged to ``final_value_limit`` (sized so
  that real models — resnet18, a 12-layer TransformerEncoder — fit); past it they are stats
  only and the session adds one ``values_truncated`` diagnostic.
* **Per-event snapshots** (node values, saved tensors, hook payloads, edge gradients:
  :meth:`Summarizer.__call__`) spend ``value_budget``, in the order they were captured
  (the forward first, then the backward events in engine order): stats always, the numbers
  while the budget lasts, then ``{shape, dtype, stats, truncated: true}`` — never null. A
  tensor's numbers are charged once, when first written: the same tensor at the same
  version appearing again is the same record, its numbers one block of the wire.
* The numbers: a JSON list ``values`` for scalars and tiny tensors (up to ``TINY_TENSOR``
  elements: what a person reads, e.g. seed 002's gradients in a ``curl`` answer), otherwise
  ``data``: the index of a block in the trace's ``tensor_data``, base64 of the tensor's own
  little-endian bytes (float64 stays float64; bfloat16 is its 16-bit pattern, bool one byte
  per element), each block written once. The wire format decides the speed: ``.tolist()`` +
  json of big tensors is far slower than raw base64 (BENCHMARKS.md).
* When: the passes only keep copies on the tensors' own devices; every read to the host
  (stats, lists, base64) happens after them (:meth:`Summarizer.settle` as each pass ends,
  :meth:`Summarizer.finalize`). One exception: a large tensor already in host memory is read
  where it is seen (see ``Summarizer.large_host_tensors_now``).

Output is the trace's own record, :class:`~gradtrace.trace_schema.TensorValue` (a msgspec
Struct: about as cheap to build as a dict).
"""

from __future__ import annotations

import functools
import math
import sys
import weakref
from collections.abc import Iterator
from typing import Any, NamedTuple, overload

import numpy as np
import pybase64
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from gradtrace.engine.errors import UnreadableTensor
from gradtrace.engine.tensor_stats import StatsRow, block_stats, stats_of
from gradtrace.trace_schema import (
    DEFAULT_FINAL_VALUE_LIMIT,
    DEFAULT_VALUE_BUDGET,
    NonFinite,
    TensorStats,
    TensorValue,
)

TINY_TENSOR = 16  # elements: up to this, a JSON list `values` a person (a curl reader) sees
BATCH_STATS = 1024  # elements: up to this, stats of all such tensors are computed together
# float64 elements per block of small tensors summarized at once in finalize(): bounds the
# temporaries (a model with 100k small tensors must not build one 800 MB array)
_BLOCK_ELEMENTS = 1 << 18
LIST_COST = 4


def _cost(numel: int) -> int:
    """What a tensor's numbers charge to the snapshot budget: LIST_COST per number as a JSON
    list (tiny), one per number as base64."""
    return numel * LIST_COST if numel <= TINY_TENSOR else numel


def finite_or_name(x: float) -> float | NonFinite:
    """A float as JSON allows it: non-finite numbers become "NaN"/"Infinity"/"-Infinity"."""
    if math.isfinite(x):
        return x
    if math.isnan(x):
        return "NaN"
    return "Infinity" if x > 0 else "-Infinity"


# dtypes numpy holds as they are (their numpy array's bytes are the tensor's own bytes), with
# numpy's name of each
_NUMPY_NATIVE: dict[torch.dtype, np.dtype] = {
    dtype: np.dtype(name)
    for dtype, name in [
        (torch.float64, "float64"),
        (torch.float32, "float32"),
        (torch.float16, "float16"),
        (torch.int64, "int64"),
        (torch.int32, "int32"),
        (torch.int16, "int16"),
        (torch.int8, "int8"),
        (torch.uint8, "uint8"),
        (torch.uint16, "uint16"),
        (torch.uint32, "uint32"),
        (torch.uint64, "uint64"),
        (torch.bool, "bool"),
    ]
}
# other dtypes (bfloat16, the float8s): their bytes read through an unsigned int of their size
_BITS = {1: torch.uint8, 2: torch.uint16, 4: torch.uint32, 8: torch.uint64}
_BIG_ENDIAN = sys.byteorder == "big"
_STRIDED = torch.strided
_COMPLEX = frozenset((torch.complex32, torch.complex64, torch.complex128))
_TENSOR = torch.Tensor  # (a module constant: no attribute lookup on torch per isinstance)
_WEAK_REF = weakref.ref  # (the class of what _by_object holds of a weakly cached tensor)


def _freed(holder: Any) -> bool:
    """Whether what a cache entry holds (see Summarizer._holder) no longer keeps its memory:
    a weak reference whose storage was freed. Such an entry is stale: another tensor may have
    been given that address at the same version. (A plain function: on the hot path.)"""
    return holder.__class__ is StorageWeakRef and holder.expired()


def _is_held(held: Any, t: torch.Tensor) -> bool:
    """Whether what _by_object holds of a tensor (the tensor, or a weak reference to it) is
    ``t`` itself. (A plain function: on the hot path.)"""
    return held is t or (held.__class__ is _WEAK_REF and held() is t)


def _own_dtype(key: tuple, kind: _DtypeKind) -> np.dtype | None:
    """numpy's dtype of a tensor (its cache ``key``, its dtype's ``kind``) whose elements lie
    in CPU memory as numpy holds them (strided, on the CPU, not negated, a dtype numpy has):
    read as they lie, with none of native_and_numeric's checks. None for any other tensor."""
    return kind.raw if key[0] is not None and key[5] is True and not key[6] else None


def _own_array(t: torch.Tensor, numel: int, contiguous: bool) -> np.ndarray:
    """numpy's view, in place, of a tensor with an ``_own_dtype`` (through ``Tensor.numpy``:
    the tensor's own storage, nothing else of the process): flat when contiguous, else in
    torch's layout (whose ``tobytes()`` reads it row-major).

    Inside a torch.func transform, ``detach`` would wrap its result again (a tensor without
    storage): there the tensor is read with the transforms set aside."""
    try:
        array = (t.detach() if t.requires_grad else t).numpy()
    except RuntimeError:
        with torch._C._DisableFuncTorch():
            array = (t.detach() if t.requires_grad else t).numpy()
    return array.reshape(numel) if contiguous else array


class _DtypeKind(NamedTuple):
    """What the summarizer needs to know of a dtype, decided once per dtype."""

    name: str  # the trace's name: "float32", "bfloat16", "bool", …
    raw: np.dtype | None  # numpy's dtype when the memory of such a tensor is numpy's own bytes
    size: int  # bytes per element
    complex: bool


_KINDS: dict[torch.dtype, _DtypeKind] = {}


def _kind(dtype: torch.dtype) -> _DtypeKind:
    """A dtype's facts, decided on first sight (the hot path reads ``_KINDS`` first)."""
    kind = _KINDS.get(dtype)
    if kind is None:
        kind = _KINDS[dtype] = _DtypeKind(
            name=str(dtype).removeprefix("torch."),
            raw=None if _BIG_ENDIAN else _NUMPY_NATIVE.get(dtype),
            size=dtype.itemsize,
            complex=dtype.is_complex,
        )
    return kind


def dtype_name(t: torch.Tensor) -> str:
    """The trace's name of a tensor's dtype: "float32", "bfloat16", "bool", …"""
    return _kind(t.dtype).name


def native_and_numeric(t: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """A detached tensor as numpy arrays of its shape (views where possible): ``(native, numeric)``.

    ``native``'s bytes are the tensor's own, little-endian (what ``data`` carries; a complex
    tensor's real and imaginary parts in turn); ``numeric`` is what stats and ``values`` lists
    are made of: the same array where numpy has the dtype (on a little-endian machine), else
    float32 (exact for bfloat16 and float8) or, for complex tensors, the magnitude (their
    stats are the magnitude's; their ``values`` come from ``native``: see _pairs). Both keep
    torch's strides: ``tobytes()`` reads them row-major, as ``data`` is. (``exact_array``
    reads a tensor with an ``_own_dtype`` through ``_own_array``, with none of these checks.)
    """
    if t.layout != torch.strided:
        t = t.to_dense()
    if not t.is_cpu:
        t = t.cpu()
    if t.is_neg():  # a lazily negated view: numpy sees memory, so the negation is applied first
        t = t.resolve_neg()
    if t.is_conj():  # (a lazily conjugated view, likewise)
        t = t.resolve_conj()
    if t.dtype in _NUMPY_NATIVE:
        numeric = t.numpy()
        if _BIG_ENDIAN:
            return numeric.astype(numeric.dtype.newbyteorder("<")), numeric
        return numeric, numeric
    complex_ = t.is_complex()
    if complex_ and t.dtype is not torch.complex32:
        native = t.numpy()
        little = native.astype(native.dtype.newbyteorder("<")) if _BIG_ENDIAN else native
        return little, np.abs(native)
    # (complex32, which numpy lacks: its bits, and the magnitude of it as complex64, exact)
    numeric = np.abs(t.to(torch.complex64).numpy()) if complex_ else t.to(torch.float32).numpy()
    bits = t.view(_BITS[t.element_size()]).numpy()
    return bits.astype(bits.dtype.newbyteorder("<")) if _BIG_ENDIAN else bits, numeric


def _pairs(t: torch.Tensor) -> np.ndarray:
    """A complex CPU tensor's numbers as its real and imaginary parts in turn (its last
    dimension doubled), as numpy holds them here (complex32's as float32, exactly): what its
    ``values`` list is made of."""
    z = t.resolve_conj().resolve_neg()
    if z.dtype is torch.complex32:
        z = z.to(torch.complex64)
    parts = torch.view_as_real(z.contiguous()).numpy()
    return parts.reshape(*parts.shape[:-2], -1)


def base64_of(raw: bytes | memoryview) -> str:
    """base64 of a contiguous buffer's bytes (bytes, or a contiguous array's memory).

    pybase64's SIMD encoder rather than ``binascii``: every number a trace keeps goes through
    here, and the standard library's encoder was a visible share of a whole trace
    (BENCHMARKS.md)."""
    return pybase64.b64encode_as_string(raw)


def json_lists(block: np.ndarray) -> list[list[Any]]:
    """Each row of a 2-D array as a JSON list: exact (a float32/float16 value is exactly a
    float64), bools as 0/1, non-finite numbers as "NaN"/"Infinity"/"-Infinity"."""
    kind = block.dtype.kind
    if kind == "b":
        return block.astype(np.uint8).tolist()
    if kind != "f":
        return block.tolist()
    rows: list[list[Any]] = block.astype(np.float64).tolist()
    finite = np.isfinite(block).all(axis=1)
    if not finite.all():
        for i in np.flatnonzero(~finite).tolist():
            rows[i] = [finite_or_name(v) for v in rows[i]]
    return rows


def _fill(stats: TensorStats, row: StatsRow) -> None:
    """Write computed stats into a TensorStats handed out before they were known."""
    stats.min, stats.max, stats.mean, stats.std, stats.norm, stats.nan, stats.inf = row


def _key(t: torch.Tensor, version: int) -> tuple:
    """The Summarizer's cache key of a tensor at a version. Same memory, layout, dtype,
    version and negation: same numbers, even through another tensor object (each read of a
    node's `_saved_*` returns a new one): ``(first element's address, shape, strides, dtype,
    version, True on the CPU or the device type, negated)``, which ``Summarizer._snapshot``
    reads back. Negated: a lazily negated view (``z.conj().imag``) shares its memory with the
    unnegated one (``z.imag``) but not its numbers. Sparse and other layouts have no single
    data pointer: keyed by the object instead, ``(None, shape, id, dtype, version, device,
    negated)``. A complex tensor may be lazily conjugated too (``z.conj()``): its last field is
    then ``negated + 2 * conjugated`` (0 when neither, as False). (A plain function: looked up
    faster than a method on the hot path.)"""
    # (torch.Size hashes as the tuple it is; is_cpu: a flag, where device.type builds a device)
    dtype = t.dtype
    lazy = t.is_neg() if dtype not in _COMPLEX else t.is_neg() + 2 * t.is_conj()
    if t.layout is not _STRIDED:
        if t.is_nested:
            _refuse(t)
        return (None, t.shape, id(t), dtype, version, t.is_cpu or t.device.type, lazy)
    address = t.data_ptr()
    if not address and t.numel() and not t._is_zerotensor():
        _refuse(t)  # (no storage of its own: a __torch_dispatch__ wrapper subclass)
    return (address, t.shape, t.stride(), dtype, version, t.is_cpu or t.device.type, lazy)


def _refuse(t: torch.Tensor) -> None:
    """A tensor whose numbers gradtrace cannot read as one block of memory: a nested tensor
    (its rows of different lengths), a ``__torch_dispatch__`` wrapper subclass (its numbers
    are whatever its own tensors mean to it). The trace stops there, refused by name (the
    partial trace is attached to the refusal: see run.py). A ZeroTensor (forward-mode AD's
    zero tangent) has no storage either, but its numbers are known: zeros (see _copy)."""
    what = (
        f"a nested tensor (layout {str(t.layout).removeprefix('torch.')})"
        if t.is_nested
        else f"a {type(t).__name__} (a __torch_dispatch__ wrapper subclass, with no storage of its own)"
    )
    raise UnreadableTensor(
        "unreadable_tensor",
        f"gradtrace cannot read the numbers of {what}, of dtype {dtype_name(t)}: "
        "it records every tensor's numbers, so this model cannot be traced past the point where "
        "the tensor first reached the trace",
    )


def version_of(t: torch.Tensor) -> int:
    """``t._version``; -1 for an inference tensor (made under ``torch.inference_mode``), which
    has no version counter and cannot be written in place outside inference mode: PyTorch
    itself refuses it where autograd would need it, and gradtrace's reads must not refuse it
    first."""
    try:
        return t._version
    except RuntimeError:
        if t.is_inference():
            return -1
        raise


@functools.lru_cache(maxsize=4096)
def _is_dense(shape: torch.Size, strides: tuple[int, ...]) -> bool:
    """Whether the elements of a tensor of this shape and strides fill one block of memory
    from its first element (in some order of its dims): a transposed weight, a permuted
    activation. Such tensors with the same first element, numel, dtype and version hold
    the same elements, so the same stats. (What ``t.permute(dims by decreasing stride)
    .is_contiguous()`` answers, from the key's numbers: no tensor, no autograd node.)
    Remembered per layout: a model repeats a few layouts many times, and a lookup costs
    far less than the sort and the check.
    """
    expected = 1
    for stride, size in sorted(zip(strides, shape, strict=True)):
        if size != 1:  # (a dim of size 1 can have any stride)
            if stride != expected:
                return False
            expected *= size
    return True


def _stride_order(strides: tuple[int, ...]) -> list[int]:
    """A view's dims from the largest stride to the smallest, ties in order: the order in
    which numpy lays out a copy of a view that is not dense (``astype``, ``ravel("K")``)."""
    return sorted(range(len(strides)), key=lambda dim: -abs(strides[dim]))


_FUNCTORCH = torch._C._functorch


def functorch_unwrapped(t: torch.Tensor) -> tuple[torch.Tensor, str] | None:
    """What a torch.func wrapper tensor wraps (the innermost plain tensor) and how it was
    wrapped; None for any other tensor.

    Inside ``vmap``, ``grad``, ``jacrev``, ``vjp``… the model's tensors are functorch wrappers
    with no storage of their own: their numbers are the wrapped tensor's. A grad-tracking
    wrapper holds the same numbers; a batched one (``vmap``) stands for one lane of the
    tensor it wraps, which has the batch dimension too: that whole tensor is what is read."""
    if not _FUNCTORCH.is_functorch_wrapped_tensor(t):
        return None
    layers: list[str] = []
    while _FUNCTORCH.is_functorch_wrapped_tensor(t):
        inner = _FUNCTORCH.get_unwrapped(t)
        if _FUNCTORCH.is_batchedtensor(t):
            dim = _FUNCTORCH.maybe_get_bdim(t)
            layers.append(f"vmap (batch dim {dim} of size {inner.shape[dim]})")
        elif _FUNCTORCH.is_gradtrackingtensor(t):
            layers.append("a grad transform")
        else:
            layers.append("functionalize")
        t = inner
    return t, ", inside ".join(layers)


def exact_array(t: torch.Tensor) -> np.ndarray:
    """A tensor as a numpy array of its own dtype and shape, copied (later writes to the
    tensor do not change it). numpy has no bfloat16 (nor float8): those become float32,
    which holds every one of their values exactly."""
    key = _key(t, 0)
    if not key[0] and t._is_zerotensor():  # (no storage: zeros)
        t = torch.zeros(t.shape, dtype=t.dtype, device=t.device)
    own = _own_dtype(key, _kind(key[3]))
    if own is not None:  # (as in Summarizer._snapshot: none of the checks and conversions below)
        return _own_array(t, t.numel(), t.is_contiguous()).reshape(tuple(key[1])).copy()
    if t.requires_grad:  # (.numpy() refuses it)
        t = t.detach()
    # a lazy negation or conjugation applied first: numpy sees the memory as it lies (asked
    # first: the two checks cost less than resolving a plain tensor, which returns it as is)
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    if t.layout != torch.strided:
        t = t.to_dense()
    if not t.is_cpu:
        t = t.cpu()
    if t.dtype not in _NUMPY_NATIVE and not t.is_complex():
        t = t.to(torch.float32)
    return t.numpy().copy()


class Summarizer:
    """Turns tensors into TensorValues: final values exactly, snapshots on a budget.

    The same memory at the same version (``_version`` bumps on in-place writes) is
    summarized once and the record reused: a module's output is also the next module's input
    and some node's value. A new record's numbers are charged to ``value_budget`` and, past
    16 elements, become one block of :attr:`tensor_data` (the record's ``data`` is its
    index); the record appearing again costs nothing (the wire holds its numbers once, and
    ``values`` lists are short). Past the budget, new snapshots are stats only
    (``truncated``).

    While the passes run, a new record only keeps a copy of the tensor on its own device
    (later in-place writes must not change what was seen) and is returned unfilled: no host
    transfer, no device sync and no numpy in a hook, so a GPU pass is not made to wait node
    by node (a large CPU tensor is the exception: see ``large_host_tensors_now``). :meth:`finalize` fills every pending record after the passes, small tensors in
    groups (one stacked tensor and one transfer per dtype, shape and device).

    Capture calls this thousands of times per trace, so the hot paths are written for speed:
    the same tensor object again costs one dict lookup; a new tensor reads each of its
    attributes once.
    """

    # A large tensor already in host memory is read where it is seen, during the pass: that
    # is no transfer and no device sync, and a copy kept to the end of its pass would cost as
    # much memory again as the activations and gradients of a big model (GPT-2 small under
    # record(): 1.40 of its memory bound with False, 0.98 with True), for no time saved (the
    # reads are compute, not per-call overhead: batched after the pass they cost the same;
    # BENCHMARKS.md, issue 32). False: kept like a device tensor's, read as its pass ends (the
    # path every non-CPU tensor takes; the no-host-transfer test runs it on the CPU).
    large_host_tensors_now: bool = True

    def __init__(
        self, value_budget: int = DEFAULT_VALUE_BUDGET, final_value_limit: int = DEFAULT_FINAL_VALUE_LIMIT
    ) -> None:
        self.value_budget = value_budget
        self.budget_left = value_budget
        self.values_truncated = 0  # per-event snapshots reduced to stats only
        self.final_value_limit = final_value_limit
        self.final_left = final_value_limit
        self.finals_truncated = 0  # final values reduced to stats only (model too big)
        # the trace's tensor_data: base64 blocks, one per record with ``data`` (its index)
        self.tensor_data: list[str] = []
        # key (see _key) -> (what keeps the key's memory from being reused, its record): the
        # tensor itself, or a weak reference to the storage of a tensor read where it was seen
        # (see _read_now): that memory may be freed, and the entry is stale once it is
        self._cache: dict[tuple, tuple[torch.Tensor | StorageWeakRef, TensorValue]] = {}
        # what finalize() completes, from what the capture kept of each tensor (see _kept):
        # small tensors grouped by (dtype, shape, device), as parallel lists: what is kept,
        # the stats to compute (None: shared with another record), the record to give its
        # JSON list (tiny, with numbers), the index of its base64 block (else None)
        self._small: dict[tuple, tuple[list[torch.Tensor], list, list, list]] = {}
        # large tensors, one at a time: (what is kept, stats to compute or None, block index or None)
        self._large: list[tuple[torch.Tensor, TensorStats | None, int | None]] = []
        # copies on the tensors' own devices while the passes run; the tensors themselves after
        self.copying = True
        # id(tensor) -> (the tensor, or a weak reference to it when its cache entry is weak;
        # its version; its record)
        self._by_object: dict[int, tuple[torch.Tensor | weakref.ref, int, TensorValue]] = {}
        # the same elements in another layout (weight and the weight.t() a node saved):
        # (first element's address, numel, dtype, version, device) -> the shared stats, and the
        # weak reference to its storage when the memory may be freed (else None: held by _cache)
        self._stats_by_memory: dict[tuple, tuple[TensorStats, StorageWeakRef | None]] = {}
        # one shape list per distinct shape, shared by the records (read-only, as the records
        # themselves are shared): a trace holds tens of thousands of records and few shapes,
        # and each list is one more object the cyclic GC traverses
        self._shapes: dict[torch.Size, list[int]] = {}
        # id(record) -> (record, how it was wrapped): records of torch.func wrapper tensors,
        # read from the tensors they wrap (see functorch_unwrapped)
        self.wrapped: dict[int, tuple[TensorValue, str]] = {}
        self._keep: list[torch.Tensor] = []  # the tensors those records were read from

    @overload
    def __call__(self, t: torch.Tensor) -> TensorValue: ...
    @overload
    def __call__(self, t: Any) -> TensorValue | None: ...
    def __call__(self, t: Any) -> TensorValue | None:
        """A per-event snapshot of ``t`` (its numbers while ``value_budget`` lasts)."""
        if not isinstance(t, _TENSOR):
            return None
        try:
            version = t._version
        except RuntimeError:
            version = version_of(t)
        # fast path: this very tensor object, unchanged since it was summarized (held weakly,
        # it is alive here, so the memory its record was read from is too)
        seen = self._by_object.get(id(t))
        if seen is not None and seen[1] == version and _is_held(seen[0], t):
            return seen[2]
        # The held reference keeps the memory from being reused by another tensor.
        try:
            key = _key(t, version)
        except RuntimeError:  # (no storage: a torch.func wrapper, or not ours to read)
            return self._wrapped(t, final=False)
        cached = self._cache.get(key)
        if cached is None or _freed(cached[0]):
            cached = self._new(t, key)
        # (a tensor whose cache entry is weak is held weakly here too)
        self._by_object[id(t)] = (
            weakref.ref(t) if cached[0].__class__ is StorageWeakRef else t,
            version,
            cached[1],
        )
        return cached[1]

    def _new(self, t: torch.Tensor, key: tuple) -> tuple[torch.Tensor | StorageWeakRef, TensorValue]:
        """The snapshot of a tensor not summarized before (at this version), its numbers
        charged now while the budget lasts; with what its cache entry holds."""
        numel = t.numel()
        cost = _cost(numel)
        kind = _KINDS.get(key[3]) or _kind(key[3])
        numbers = cost <= self.budget_left
        if numbers:
            self.budget_left -= cost
        else:
            self.values_truncated += 1
        holder = self._holder(t, key, numel)
        entry = self._cache[key] = (holder, self._snapshot(t, key, numel, numbers, kind, holder))
        return entry

    def _read_now(self, key: tuple, numel: int) -> bool:
        """Whether the tensor of ``key`` is summarized where it is seen (see
        ``large_host_tensors_now``): nothing read later needs its memory."""
        return numel > BATCH_STATS and key[5] is True and self.large_host_tensors_now

    def _holder(self, t: torch.Tensor, key: tuple, numel: int) -> torch.Tensor | StorageWeakRef:
        """What a cache entry of ``t`` holds. A tensor read where it was seen is held
        weakly: a bare backward frees activations and gradients as it goes, and a cache
        keeping them alive to the end of the trace would hold a big model's intermediates
        all at once (BENCHMARKS.md, "Big models"). Its entries are stale once its storage
        is freed (see _freed)."""
        if key[0] is not None and self._read_now(key, numel):
            return StorageWeakRef(t.untyped_storage())
        return t

    @overload
    def final(self, t: torch.Tensor) -> TensorValue: ...
    @overload
    def final(self, t: Any) -> TensorValue | None: ...
    def final(self, t: Any) -> TensorValue | None:
        """A final value (a leaf's ``.grad``, a named tensor's forward value): its exact
        numbers, charged to ``final_value_limit`` instead of the snapshot budget."""
        if not isinstance(t, _TENSOR):
            return None
        numel = t.numel()
        # already summarized with its numbers, at this version: usually this very object (a
        # grad seen at its grad_write, a named output), found without building its key
        known = self.known(t)
        if known is None or known.truncated:
            try:
                key = _key(t, version_of(t))
            except RuntimeError:  # (see __call__)
                return self._wrapped(t, final=True)
            hit = self._cache.get(key)
            known = None if hit is None or _freed(hit[0]) else hit[1]
        if known is not None and not known.truncated:
            self.final_left -= min(numel, self.final_left)
            return known
        kind = _kind(key[3])
        numbers = numel <= self.final_left
        if numbers:
            self.final_left -= numel
        else:
            self.finals_truncated += 1  # past the limit: the model is too big (a diagnostic)
        holder = self._holder(t, key, numel)
        value = self._snapshot(t, key, numel, numbers, kind, holder)
        if numbers:  # (a snapshot of it made later shares it, numbers and all)
            self._cache[key] = (holder, value)
        return value

    def forget(self, t: torch.Tensor) -> None:
        """``t``'s numbers changed behind its version counter (written through ``.data``, which
        has a counter of its own): the records made of it stay as they were (what was seen
        then), and the next summary of it or of an alias of it (same memory and layout), a
        final value too, reads its memory again. The by-object shortcut is emptied rather than
        searched for aliases (rare: each object found again by its key, in ``_cache``, which
        holds the memory of every key but this one)."""
        key = _key(t, version_of(t))
        self._by_object.clear()
        self._cache.pop(key, None)
        if key[0] is not None:
            self._stats_by_memory.pop((key[0], t.numel(), key[3], key[4], key[5], key[6]), None)

    def _wrapped(self, t: torch.Tensor, final: bool) -> TensorValue:
        """The record of a torch.func wrapper tensor: a snapshot (``final``: a final value)
        of what it wraps, a record of its own noted in :attr:`wrapped` (the session names
        where such records appear). Any other tensor without storage: the error reading it
        raised, again."""
        found = functorch_unwrapped(t)
        if found is None:
            _key(t, version_of(t))  # (raises what it raised)
        assert found is not None
        inner, how = found
        # (not the inner tensor's cached record: that one's other appearances, where the plain
        # tensor was read, would be marked as wrapped too)
        key = _key(inner, version_of(inner))
        kind = _kind(key[3])
        numel = inner.numel()
        cost = numel if final else _cost(numel)
        numbers = cost <= (self.final_left if final else self.budget_left)
        if numbers and final:
            self.final_left -= cost
        elif numbers:
            self.budget_left -= cost
        elif final:
            self.finals_truncated += 1
        else:
            self.values_truncated += 1
        value = self._snapshot(inner, key, numel, numbers, kind, inner)
        self._keep.append(inner)  # (its memory is not reused by another tensor before finalize)
        self.wrapped[id(value)] = (value, how)
        return value

    def known(self, t: torch.Tensor) -> TensorValue | None:
        """The summary already made of this very tensor at its current version."""
        seen = self._by_object.get(id(t))
        return seen[2] if seen is not None and seen[1] == version_of(t) and _is_held(seen[0], t) else None

    @overload
    def like_new(self, value: TensorValue) -> TensorValue: ...
    @overload
    def like_new(self, value: None) -> None: ...
    def like_new(self, value: TensorValue | None) -> TensorValue | None:
        """A summary standing for a copy of its tensor (same numbers, so the same record): a
        truncated one is counted in ``values_truncated``, as a snapshot of the copy would be."""
        if value is not None and value.truncated:
            self.values_truncated += 1
        return value

    def passes_over(self) -> None:
        """The passes are over: nothing writes the model's tensors any more (what follows is
        the trace's own assembly), so later records keep the tensors themselves instead of
        copies, read as they are by :meth:`finalize`."""
        self.copying = False

    def _kept(
        self, t: torch.Tensor, key: tuple, row_major: bool, numpy_order: bool = False, copy: bool = True
    ) -> torch.Tensor:
        """What :meth:`finalize` reads of ``t`` (its cache ``key``): a copy made now on the
        tensor's own device (later in-place writes must not change what was seen; no host
        transfer, no sync), row-major when ``row_major`` (small tensors are stacked a row
        each), else laid out as ``t`` is: a large tensor's stats sum its elements in the
        order numpy reads them, which follows the layout (a dense one's strides are kept; a
        view that is not dense, ``numpy_order``, is copied in the order of its strides, as
        numpy orders such a view). After :meth:`passes_over`, the tensor itself where it
        needs no conversion; with ``copy`` false, always (a tensor read before anything can
        write it).

        Inside a torch.func transform a torch call on a plain tensor may return a wrapper
        (no storage): there the copy is made again with the transforms set aside."""
        copy = copy and self.copying
        kept = self._copy(t, key, row_major, numpy_order, copy)
        if _FUNCTORCH.is_functorch_wrapped_tensor(kept):
            with torch._C._DisableFuncTorch():
                kept = self._copy(t, key, row_major, numpy_order, copy)
        return kept

    def _copy(
        self, t: torch.Tensor, key: tuple, row_major: bool, numpy_order: bool, copying: bool
    ) -> torch.Tensor:
        """(see _kept)"""
        if t.requires_grad:  # (the copy must not join the graph)
            t = t.detach()
        if key[0] is None:  # sparse and other layouts: a dense tensor of their numbers (new)
            t = t.to_dense()
            copying = False
        elif not key[0] and t._is_zerotensor():  # (no storage: its numbers are zeros, made here)
            t = torch.zeros(t.shape, dtype=t.dtype, device=t.device)
            copying = False
        elif key[6]:  # a lazy negation or conjugation, applied: a new tensor of its own
            t = t.resolve_conj().resolve_neg()
            copying = False
        if row_major and not t.is_contiguous():
            return t.clone(memory_format=torch.contiguous_format)
        if not copying:
            return t
        if numpy_order:
            order = _stride_order(key[2])
            inverse = sorted(range(len(order)), key=order.__getitem__)
            return t.permute(order).clone(memory_format=torch.contiguous_format).permute(inverse)
        # (clone keeps the strides of a dense tensor, e.g. a transposed weight; of another
        # view, torch's dense layout in the order of its strides, which the conversions of
        # dtypes numpy lacks follow too)
        return t.clone()

    def _snapshot(
        self,
        t: torch.Tensor,
        key: tuple,
        numel: int,
        numbers: bool,
        kind: _DtypeKind,
        holder: torch.Tensor | StorageWeakRef,
    ) -> TensorValue:
        """The record of ``t`` (its cache ``key``, its dtype's ``kind``; ``holder``: what keeps
        its memory from being reused, see _holder) now: stats always, its numbers if
        ``numbers``; both written by :meth:`finalize`, from what is kept of ``t`` now (see
        _kept)."""
        stats = TensorStats(numel=numel, min=None, max=None, mean=None, std=None, norm=None)
        if kind.complex:
            stats.of = "magnitude"
        size = key[1]
        shape = self._shapes.get(size)
        if shape is None:
            shape = self._shapes[size] = list(size)
        out = TensorValue(shape=shape, dtype=kind.name, stats=stats, truncated=not numbers)
        owner: TensorStats | None = stats  # the stats computed for this record (None: shared)
        contiguous = key[0] is not None and t.is_contiguous()  # (no data pointer: never copied by address)
        if numel and key[0] is not None and (contiguous or _is_dense(key[1], key[2])):
            # (first element's address, numel, dtype, version, device, negated), from the key
            memory = (key[0], numel, key[3], key[4], key[5], key[6])
            weak = holder if holder.__class__ is StorageWeakRef else None
            known, known_weak = self._stats_by_memory.setdefault(memory, (stats, weak))
            if _freed(known_weak):  # (that memory was freed)
                known = stats
                self._stats_by_memory[memory] = (stats, weak)
            if known is not stats:
                out.stats = known  # filled by finalize() with its first owner
                if not numbers:
                    return out
                owner = None
        data = None
        if numbers and numel > TINY_TENSOR:
            out.data = data = self._block("")  # (written by finalize())
        if numel > BATCH_STATS:  # large: summarized alone, by settle() or now
            if self._read_now(key, numel):
                # in host memory already: read where it is seen (no transfer, no copy kept)
                self._finish_large(self._kept(t, key, False, copy=False), owner, data)
                return out
            numpy_order = kind.raw is not None and key[0] is not None and not _is_dense(key[1], key[2])
            self._large.append((self._kept(t, key, False, numpy_order), owner, data))
            return out
        # small: finished by finalize() with all the others of its dtype, shape and device
        group_key = (key[3], size, True if key[5] is True else t.device)
        group = self._small.get(group_key)
        if group is None:
            group = self._small[group_key] = ([], [], [], [])
        group[0].append(self._kept(t, key, True))
        group[1].append(owner)
        group[2].append(out if numbers and numel <= TINY_TENSOR else None)
        group[3].append(data)
        return out

    def _block(self, text: str) -> int:
        """A new block of ``tensor_data`` (base64): its index."""
        self.tensor_data.append(text)
        return len(self.tensor_data) - 1

    def finalize(self) -> None:
        """Fill the stats and numbers of every record handed out so far (idempotent): the
        host work of the whole trace, after its passes. Small tensors in groups of one dtype,
        shape and device (one stacked tensor, one transfer and a few numpy calls per group),
        large ones one at a time; each group's copies are dropped once read."""
        small, self._small = self._small, {}
        while small:
            _key, (copies, owners, lists, data) = small.popitem()
            stacked = torch.stack(copies)
            copies.clear()
            self._finish_small(stacked.reshape(len(owners), -1), owners, lists, data)
        self.settle()

    def settle(self) -> None:
        """Fill the records of the large tensors copied so far, and drop their copies: called
        as each pass ends, so that what is kept of large tensors is one pass's, not the whole
        trace's (a model's parameters and their gradients, on a big model)."""
        large, self._large = self._large, []
        large.reverse()  # (popped from the end: in the order they were seen)
        while large:
            kept, owner, index = large.pop()
            self._finish_large(kept, owner, index)
            del kept

    def _finish_large(self, kept: torch.Tensor, owner: TensorStats | None, index: int | None) -> None:
        """A large tensor's record, from what is kept of it: its stats (``owner``, unless shared
        with another record) and its base64 block (``index``, when it has numbers)."""
        native, numeric = native_and_numeric(kept)
        if owner is not None:
            _fill(owner, stats_of(numeric))
        if index is not None:
            self.tensor_data[index] = base64_of(np.ascontiguousarray(native).data)

    def _finish_small(
        self,
        stacked: torch.Tensor,
        owners: list[TensorStats | None],
        lists: list[TensorValue | None],
        data: list[int | None],
    ) -> None:
        """A group of small tensors, a row each of ``stacked``: the stats of each row that
        owns some (``owners``), the JSON lists of the tiny ones with numbers (``lists``), the
        base64 blocks of the others with numbers (``data``: their indices)."""
        host = stacked if stacked.is_cpu else stacked.cpu()  # (the group's one transfer)
        native, numeric = native_and_numeric(host)
        numel = numeric.shape[1]
        rows = max(1, _BLOCK_ELEMENTS // max(numel, 1))  # (bounds the float64 temporaries)
        for part in _chunks([(i, s) for i, s in enumerate(owners) if s is not None], rows):
            block = numeric[[i for i, _s in part]]
            for (_i, stats), row in zip(part, block_stats(block), strict=True):
                _fill(stats, row)
        wanted = [(i, out) for i, out in enumerate(lists) if out is not None]
        if wanted:
            source = numeric
            if host.is_complex():  # (two numbers an element: see _pairs)
                source = _pairs(host).reshape(len(lists), -1)
            for part in _chunks(wanted, rows):
                block = source[[i for i, _out in part]]
                for (_i, out), numbers in zip(part, json_lists(block), strict=True):
                    out.values = numbers
        tensor_data = self.tensor_data
        for i, index in enumerate(data):
            if index is not None:
                tensor_data[index] = base64_of(np.ascontiguousarray(native[i]).data)


def _chunks(items: list, size: int) -> Iterator[list]:
    """``items`` in lists of at most ``size``."""
    for first in range(0, len(items), size):
        yield items[first : first + size]
