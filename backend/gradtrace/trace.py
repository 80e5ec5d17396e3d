"""``Trace``: the library's handle on one trace document (no torch needed to use it)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pydantic_core

from gradtrace.trace_schema import Event, TensorValue, TraceDoc

_NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def tensor_array(value: TensorValue) -> Any:
    """A TensorValue as a numpy array (None when only stats were kept)."""
    import numpy as np

    if value.values is not None:
        flat = np.array(
            [_NON_FINITE.get(v, v) if isinstance(v, str) else v for v in value.values], dtype=np.float64
        )
    elif value.data is not None:
        flat = np.frombuffer(base64.b64decode(value.data), dtype="<f4").astype(np.float32)
    else:
        return None
    return flat.reshape(value.shape)


class Trace:
    """A recorded trace: ``doc`` is the TraceDoc (trace_schema), the public format.

    Built from a TraceDoc, or from the engine's plain dict (already in TraceDoc's dumped
    shape, see engine/canonical.py): then ``to_json``/``to_dict``/``save`` use the dict
    directly and ``doc`` validates it on first access (validating a big trace costs more
    than capturing it, and the engine's output is held to the schema by tests); from then
    on ``doc`` is what gets serialised, edits included.
    """

    def __init__(self, doc: TraceDoc | dict[str, Any]) -> None:
        if isinstance(doc, TraceDoc):
            self._doc: TraceDoc | None = doc
            self._data: dict[str, Any] | None = None
        else:
            self._doc = None
            self._data = doc

    @property
    def doc(self) -> TraceDoc:
        if self._doc is None:
            self._doc = TraceDoc.model_validate(self._data)
        return self._doc

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        return cls(TraceDoc.model_validate(data))

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        return cls(TraceDoc.model_validate_json(Path(path).read_text(encoding="utf-8")))

    def to_dict(self) -> dict[str, Any]:
        """Strict JSON data, exactly what ``to_json`` says (non-finite tensor numbers are
        strings, "NaN"/"Infinity"; a non-finite max_error is None). A fresh copy: changing
        it does not change the trace."""
        return pydantic_core.from_json(self.to_json_bytes())

    def to_json_bytes(self, indent: int | None = None) -> bytes:
        """Strict JSON as UTF-8 bytes (what the service sends)."""
        if self._doc is None:  # once ``doc`` exists it is the truth (a caller may edit it)
            # the serialiser TraceDoc.model_dump_json uses, with TraceDoc's settings
            return pydantic_core.to_json(self._data, indent=indent, inf_nan_mode="null")
        return self.doc.model_dump_json(indent=indent).encode("utf-8")

    def to_json(self, indent: int | None = None) -> str:
        """Strict JSON text (pydantic's Rust serializer: ~5x faster than json.dumps of
        to_dict() on big traces; a non-finite float could only come out as null)."""
        if self._doc is None:
            return self.to_json_bytes(indent).decode("utf-8")
        return self.doc.model_dump_json(indent=indent)

    def save(self, path: str | Path, **options: Any) -> Path:
        """Save as ``.json`` here; ``.html``/``.svg``/``.png`` are drawn by gradtrace.render.

        Drawing options (``animated``, ``phase``, ``theme``, ``values``): see ``render.save``.
        """
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".json":
            path.write_text(self.to_json(), encoding="utf-8")
            return path
        if suffix in (".html", ".svg", ".png"):
            from gradtrace import render

            render.save(self, path, **options)
            return path
        raise ValueError(
            f"cannot save a trace as {suffix or 'a file without suffix'!r}: use .json, .html, .svg or .png"
        )

    def _repr_html_(self) -> str:
        from gradtrace import render

        return render.notebook_html(self)

    # ---- convenience --------------------------------------------------------------------
    @property
    def events(self) -> list[Event]:
        return self.doc.events

    @property
    def grads(self) -> dict[str, Any]:
        """Final ``.grad`` of every named leaf and retained tensor, as numpy arrays."""
        return {k: None if v is None else tensor_array(v) for k, v in self.doc.grads.items()}

    @property
    def values(self) -> dict[str, Any]:
        """Forward value of every named tensor, as numpy arrays."""
        return {k: tensor_array(v) for k, v in self.doc.values.items()}

    def value(self, name: str) -> Any:
        if name not in self.doc.values:
            raise KeyError(f"no tensor named {name!r}; named tensors: {sorted(self.doc.values)}")
        return tensor_array(self.doc.values[name])

    def __repr__(self) -> str:
        d = self.doc
        return (
            f"<gradtrace.Trace {d.title!r}: {len(d.graph.nodes)} nodes, "
            f"{len(d.graph.edges)} edges, {len(d.events)} events>"
        )
