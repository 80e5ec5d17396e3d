"""``Trace``: the library's handle on one trace document (no torch needed to use it)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from gradtrace.render.options import takes_draw_options
from gradtrace.trace_schema import (
    SCHEMA_VERSION,
    WIRE_DTYPES,
    Diagnostic,
    Event,
    GradInTrace,
    TensorValue,
    TraceDoc,
    encode_doc,
    encode_doc_text,
    payload_items,
    write_doc,
)

if TYPE_CHECKING:
    from gradtrace.render.options import DrawOptions


class GradtraceWarning(UserWarning):
    """A diagnostic of a trace, issued as a Python warning (it is in the trace too, in
    ``trace.doc.analyses.diagnostics``): ``code`` (e.g. ``"output_reduced"``), ``severity``
    (``"info"``, ``"warning"``, ``"error"``) and the ``diagnostic`` record itself.

    Its own category, apart from the warnings the traced model itself raises:
    ``warnings.simplefilter("ignore", gradtrace.GradtraceWarning)`` silences gradtrace only.
    """

    def __init__(self, diagnostic: Diagnostic) -> None:
        # The record is the warning's one argument: a copy (pickle, pytest-xdist) is rebuilt from it.
        super().__init__(diagnostic)
        self.diagnostic = diagnostic
        self.code = diagnostic.code
        self.severity = diagnostic.severity

    def __str__(self) -> str:
        return f"{self.diagnostic.message} [{self.code}]"


# Diagnostics kept in the trace but not issued: this one restates PyTorch's rule for any
# intermediate output (its .grad is None unless retained), true of nearly every trace with a
# loss_fn, so as a warning it would only be noise.
# (torch_warning: the model's own warning, issued again as itself by trace())
QUIET_DIAGNOSTICS = frozenset({"grad_not_retained", "torch_warning"})


def diagnostic_warnings(doc: TraceDoc) -> list[GradtraceWarning]:
    """The trace's diagnostics that are issued as warnings, in the trace's order. The
    ``functorch_value`` ones (one per node or module that ran inside a torch.func transform:
    27 for the per-sample-gradients tutorial) are one warning per way they ran, naming the
    first places and counting the rest, where the first of them stands; the trace keeps each."""
    out: list[Diagnostic] = []
    places: dict[str, list[str]] = {}  # functorch_value: how it ran -> where, in order
    for d in doc.analyses.diagnostics:
        if _quiet(d):
            continue
        if d.code == "functorch_value":
            where, _, how = d.message.partition(" ran inside ")
            if how in places:
                places[how].append(where)
                continue
            places[how] = [where]
        out.append(d)
    for k, d in enumerate(out):
        where, _, how = d.message.partition(" ran inside ")
        if d.code == "functorch_value" and len(places[how]) > 1:
            named = places[how]
            listed = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
            out[k] = Diagnostic(code=d.code, severity=d.severity, message=f"{listed} ran inside {how}")
    return [GradtraceWarning(d) for d in out]


def _quiet(d: Diagnostic) -> bool:
    """Kept in the trace, not issued: a quiet code, or PyTorch's own warning text kept as a
    diagnostic (no module named: the hook-on-outputs warning as PyTorch words it), which
    ``trace()`` already issues again as the model's warning, in its own category."""
    return d.code in QUIET_DIAGNOSTICS or (d.code == "hook_on_outputs_only" and d.module is None)


def warn_diagnostics(doc: TraceDoc, stacklevel: int = 2) -> None:
    """Issue ``diagnostic_warnings(doc)``; ``stacklevel`` as ``warnings.warn`` would take it
    in the function calling this one (2: that function's caller)."""
    for warning in diagnostic_warnings(doc):
        warnings.warn(warning, stacklevel=stacklevel + 1)


_NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def tensor_array(value: TensorValue | dict[str, Any], tensor_data: Sequence[str] | None = None) -> Any:
    """A TensorValue (or its JSON dict) as a numpy array of its own dtype and shape.

    ``tensor_data``: the trace's (``doc.tensor_data``, or ``"tensor_data"`` of its JSON),
    where a value past 16 elements keeps its numbers (``Trace.array`` passes it).
    numpy has no bfloat16: bfloat16 values come back as float32 (exactly); complex64 and
    complex128 come back as themselves. A value the trace
    kept as stats only (``truncated``) raises ValueError: its numbers are not in the trace.
    """
    import numpy as np
    import pybase64

    if isinstance(value, TensorValue):
        dtype_name, shape, numbers, data = value.dtype, value.shape, value.values, value.data
    else:
        dtype_name, shape = value["dtype"], value["shape"]
        numbers, data = value.get("values"), value.get("data")
    wire = WIRE_DTYPES.get(dtype_name)
    if data is not None and tensor_data is None:
        raise ValueError(
            f"this {dtype_name} tensor of shape {tuple(shape)} keeps its numbers in the trace's "
            "tensor_data: pass it, tensor_array(value, doc.tensor_data), or use Trace.array(value)"
        )
    if data is not None and not 0 <= data < len(tensor_data or ()):
        data = None  # (a copy made only for drawing has no tensor_data: stats only)
    if numbers is None and data is None:
        raise ValueError(
            f"this {dtype_name} tensor of shape {tuple(shape)} was kept as stats only (truncated): "
            "its numbers are not in the trace"
        )
    if wire is None:
        raise ValueError(f"cannot decode numbers of dtype {dtype_name!r}")
    if numbers is not None:
        decoded = [_NON_FINITE[v] if isinstance(v, str) else v for v in numbers]
        if dtype_name.startswith("complex"):  # (real and imaginary parts in turn)
            parts = np.dtype(wire).char  # ("F" or "D": numpy's native complex64 or complex128)
            flat = np.array(decoded, dtype=parts.lower()).view(parts)
        else:
            flat = np.array(decoded, dtype=np.float32 if dtype_name == "bfloat16" else wire)
    else:
        assert data is not None
        assert tensor_data is not None
        flat = np.frombuffer(pybase64.b64decode(tensor_data[data]), dtype=wire)
        if dtype_name == "bfloat16":  # a bfloat16 is the top half of the float32 it rounds to
            flat = (flat.astype(np.uint32) << 16).view(np.float32)
        flat = flat.astype(flat.dtype.newbyteorder("="))  # native order, writable
    return flat.reshape(shape)


def _plain_payloads(events: list[Event]) -> None:
    """Turn the events' payloads into plain JSON data, in place, as a loaded trace has them.

    The engine leaves its records in the payloads, the payload records (trace_schema's
    EVENT_PAYLOADS) and the TensorValues in them (msgspec writes a record and its dict
    alike). A record that appears in many payloads (a module's output is the next
    module's input) becomes one dict they share, as it is one record wherever else the
    document holds it, not one dict per appearance (every dict made here is one more object
    the cyclic GC traverses for as long as the trace lives).
    """
    converted: dict[int, Any] = {}  # id(record) -> its dict (the records outlive this call)

    def plain(value: Any) -> Any:
        if isinstance(value, TensorValue):
            found = converted.get(id(value))
            if found is None:
                found = converted[id(value)] = msgspec.to_builtins(value)
            return found
        if isinstance(value, list | tuple):
            return [plain(item) for item in value]
        if isinstance(value, dict):
            return {key: plain(item) for key, item in value.items()}
        if value is None or isinstance(value, str | int | float):
            return value
        return msgspec.to_builtins(value)

    for event in events:
        event.payload = {key: plain(item) for key, item in payload_items(event.payload)}


def _check_version(data: Any) -> None:
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version not in (2, SCHEMA_VERSION):
        raise ValueError(
            f"this trace has schema_version {version!r}; this gradtrace reads versions 2 and {SCHEMA_VERSION} "
            "(in version 1 `data` was always float32): record the trace again"
        )


def _numbers_written_once(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-2 document (every TensorValue's ``data`` its own base64 string) as schema 3:
    each distinct string once in ``tensor_data``, the values holding its index."""
    blocks: dict[str, int] = {}

    def visit(item: Any) -> None:
        if isinstance(item, dict):
            block = item.get("data")
            if isinstance(block, str) and "stats" in item:
                index = blocks.get(block)
                item["data"] = blocks[block] = len(blocks) if index is None else index
            for child in item.values():
                if isinstance(child, dict | list):
                    visit(child)
        elif isinstance(item, list):
            for child in item:
                if isinstance(child, dict | list):
                    visit(child)

    upgraded = msgspec.json.decode(msgspec.json.encode(data))  # (a copy: the caller's data stays)
    visit(upgraded)
    upgraded["tensor_data"] = list(blocks)
    upgraded["schema_version"] = SCHEMA_VERSION
    return upgraded


def _read(data: dict[str, Any]) -> TraceDoc:
    """JSON data as a TraceDoc: its version checked first, then every field (a wrong one is
    named by its path, e.g. ``$.graph.nodes[3].kind``). A schema-2 trace (saved by gradtrace
    0.1) is read as the schema-3 document it stands for."""
    _check_version(data)
    if data["schema_version"] == 2:
        data = _numbers_written_once(data)
    try:
        return msgspec.convert(data, TraceDoc)
    except msgspec.ValidationError as error:
        raise ValueError(f"not a valid trace: {error}") from error


class Trace:
    """A recorded trace: ``doc`` is the TraceDoc (trace_schema), the public format.

    The engine builds the TraceDoc itself; ``to_json``/``to_dict``/``save`` encode it with
    msgspec, in the records' field order. ``doc`` may be edited: what is serialised is
    always the current ``doc``.
    """

    def __init__(self, doc: TraceDoc, grads: dict[str, Any] | None = None) -> None:
        # the final gradients as numpy arrays, straight from the model (gradtrace.trace):
        # exact whatever the serialised trace could keep; None for a loaded trace
        if not isinstance(doc, TraceDoc):
            raise TypeError(
                f"Trace() takes a TraceDoc, not a {type(doc).__name__}: "
                "read JSON data with Trace.from_dict, a file with Trace.load"
            )
        # (a GradInTrace among them is decoded from these blocks when first read: the engine's,
        # which refuse changes, kept here whatever is later done to doc)
        self._grads = grads
        self._blocks = doc.tensor_data
        self._doc = doc
        self._payloads_plain = False  # (see doc)

    @property
    def doc(self) -> TraceDoc:
        """The TraceDoc, its event payloads plain JSON data (dicts and lists, as in a loaded
        trace). A fresh trace's payloads still hold the engine's records: they are converted
        here, once, when the document is first read (serialising it does not need that)."""
        if not self._payloads_plain:
            _plain_payloads(self._doc.events)
            self._payloads_plain = True
        return self._doc

    @doc.setter
    def doc(self, doc: TraceDoc) -> None:
        self._doc = doc
        self._payloads_plain = False

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        return cls._loaded(_read(data))

    @classmethod
    def _loaded(cls, doc: TraceDoc) -> Trace:
        """A trace read from JSON data: its payloads are plain data already."""
        trace = cls(doc)
        trace._payloads_plain = True
        return trace

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        return cls.from_json(Path(path).read_bytes())

    @classmethod
    def from_json(cls, data: bytes | str) -> Trace:
        """A trace from its JSON text (what ``to_json`` wrote, or what the service answered)."""
        return cls._loaded(_read(msgspec.json.decode(data)))

    def to_dict(self) -> dict[str, Any]:
        """Strict JSON data, exactly what ``to_json`` says (non-finite tensor numbers are
        strings, "NaN"/"Infinity"), ready for ``json.dumps``. A fresh copy (no JSON round
        trip): changing it does not change the trace."""
        data: dict[str, Any] = msgspec.to_builtins(self._doc)
        return data

    def to_json_bytes(self, indent: int | None = None, *, numbers: bool = True) -> bytes:
        """Strict JSON as UTF-8 bytes (what the service sends). ``numbers=False``: with an
        empty ``tensor_data`` (what a drawing reads: values past 16 elements read as stats only)."""
        data = encode_doc(self._doc, numbers=numbers)
        return data if indent is None else msgspec.json.format(data, indent=indent)

    def to_json(self, indent: int | None = None) -> str:
        """Strict JSON text (a non-finite float could only come out as null)."""
        if indent is None:
            return encode_doc_text(self._doc)
        return self.to_json_bytes(indent).decode("utf-8")

    @takes_draw_options
    def save(self, path: str | Path, options: DrawOptions | None = None, **changes: Any) -> Path:
        """Save as ``.json`` here; ``.html``/``.svg``/``.png`` are drawn by gradtrace.render.

        ``options``: a ``gradtrace.render.DrawOptions``, or its fields as keyword arguments
        (``trace.save("b.svg", animated=True, phase="backward", theme="dark")``), checked
        once. ``values``: a ``.json`` or ``.html`` file keeps up to
        ``render.FILE_VALUE_BUDGET`` tensor numbers (final gradients and values first; the rest
        as statistics, marked ``truncated`` and told in a ``file_values_summarised``
        diagnostic), ``"all"`` every one; ``trace.grads`` in memory stays exact either way. For
        pictures, ``values`` is the value and gradient chips (True, False). The drawing options
        (not for ``.json``): ``animated`` (SVG), ``phase``, ``theme`` (for ``.html`` None
        follows the reader's colour scheme), and for ``.svg``/``.png`` ``depth`` and
        ``direction``: see ``DrawOptions``.
        """
        from gradtrace.render.options import draw_options

        path = Path(path)
        drawn = draw_options(options, **changes)
        suffix = path.suffix.lower()
        if suffix == ".json":
            from gradtrace.render.source import file_summary

            small = None if drawn.values == "all" else file_summary(self)
            if small is not None:
                path.write_bytes(small)
                return path
            with path.open("wb") as out:  # (UTF-8 as encoded, block by block: see write_doc)
                write_doc(self._doc, out)
            return path
        if suffix in (".html", ".svg", ".png"):
            from gradtrace import render

            render.save(self, path, drawn)
            return path
        raise ValueError(
            f"cannot save a trace as {suffix or 'a file without suffix'!r}: use .json, .html, .svg or .png"
        )

    def show(self) -> None:
        """Show the player in a notebook cell now, as ``gradtrace.show(trace)`` does; outside
        IPython it raises ``RenderUnavailable`` (save an HTML file instead)."""
        from gradtrace.render.notebook import display_trace

        display_trace(self)

    def _repr_html_(self) -> str:
        from gradtrace import render

        return render.notebook_html(self)

    # ---- convenience --------------------------------------------------------------------
    @property
    def events(self) -> list[Event]:
        return self.doc.events

    @property
    def grads(self) -> dict[str, Any]:
        """Final ``.grad`` of every named leaf and retained tensor, as numpy arrays of its own
        dtype (bfloat16 as float32); ``None`` where ``.grad`` is None at the end: no
        gradient, or (a ``grad_cleared`` diagnostic names it) a gradient a hook or the model
        set back to None, e.g. an optimizer stepped in a post-accumulate-grad hook.

        A traced model's are the real gradients, kept in memory whatever the serialised
        trace could hold; a loaded trace's are decoded from it (a gradient the trace kept
        as stats only raises ValueError)."""
        grads = self._grads
        if grads is not None:
            for name, grad in grads.items():
                if isinstance(grad, GradInTrace):
                    grads[name] = tensor_array(grad._asdict(), self._blocks)
            return dict(grads)
        return {k: None if v is None else self.array(v) for k, v in self._doc.grads.items()}

    @property
    def values(self) -> dict[str, Any]:
        """Forward value of every named tensor, as numpy arrays."""
        return {k: self.array(v) for k, v in self._doc.values.items()}

    def value(self, name: str) -> Any:
        values = self._doc.values
        if name not in values:
            raise KeyError(f"no tensor named {name!r}; named tensors: {sorted(values)}")
        return self.array(values[name])

    def array(self, value: TensorValue | dict[str, Any]) -> Any:
        """Any TensorValue of this trace (a node's value, an event payload's, an edge's
        gradient) as a numpy array: see ``tensor_array``."""
        return tensor_array(value, self._doc.tensor_data)

    def __repr__(self) -> str:
        d = self._doc
        return (
            f"<gradtrace.Trace {d.title!r}: {len(d.graph.nodes)} nodes, "
            f"{len(d.graph.edges)} edges, {len(d.events)} events>"
        )
