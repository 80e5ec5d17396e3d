"""The engine does not validate its output on the hot path (engine/canonical.py): these tests
hold it to the schema instead. For every example spec and a range of library traces, the
engine's raw records validate against TraceDoc (extra="forbid": no stray field), and the
JSON sent from the canonical dict is byte-for-byte what TraceDoc.model_dump_json gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import gradtrace
from gradtrace.engine import canonical
from gradtrace.trace_schema import TraceDoc

EXAMPLES = sorted((Path(gradtrace.__file__).parent / "examples").glob("*.json"))


@pytest.fixture
def raw_docs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The raw dicts the session hands to canonical.trace_doc, captured."""
    seen: list[dict[str, Any]] = []
    real = canonical.trace_doc

    def spy(doc: dict[str, Any]) -> dict[str, Any]:
        seen.append(doc)
        return real(doc)

    monkeypatch.setattr(canonical, "trace_doc", spy)
    return seen


def check_same_as_validated(trace: gradtrace.Trace, raw: dict[str, Any]) -> None:
    validated = TraceDoc.model_validate(raw)  # raises on any field the schema does not know
    for indent in (None, 2):
        assert trace.to_json_bytes(indent) == validated.model_dump_json(indent=indent).encode()
    assert trace.to_dict() == json.loads(validated.model_dump_json())
    assert trace.doc == validated  # the lazy validation sees the same document


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_trace_is_exactly_its_validated_dump(path: Path, raw_docs: list) -> None:
    trace = gradtrace.trace_spec(json.loads(path.read_text()))
    check_same_as_validated(trace, raw_docs[-1])


def _conv_net() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(2, 3, 3, padding=1),
        nn.BatchNorm2d(3),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(12, 2),
    )


@pytest.mark.parametrize(
    "case", ["mlp_retained", "truncated", "non_finite", "conv", "int_and_bool", "encoder"]
)
def test_library_trace_is_exactly_its_validated_dump(case: str, raw_docs: list) -> None:
    torch.manual_seed(0)
    if case == "mlp_retained":
        trace = gradtrace.trace(
            nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)),
            torch.randn(3, 4, requires_grad=True),
            retain_grad=True,
        )
    elif case == "truncated":
        trace = gradtrace.trace(
            nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64)),
            torch.randn(40, 64),
            value_budget=5000,
        )
        assert trace.to_dict()["limits"]["values_truncated"] > 0
    elif case == "non_finite":
        x = torch.tensor([[1.0, float("nan")], [float("inf"), 2.0]], requires_grad=True)
        trace = gradtrace.trace(nn.Linear(2, 2), x)
    elif case == "conv":
        trace = gradtrace.trace(_conv_net(), torch.randn(2, 2, 4, 4), lambda y: y.pow(2).mean())
    elif case == "int_and_bool":
        emb = nn.Embedding(5, 3)
        trace = gradtrace.trace(emb, torch.tensor([[0, 4, 4]]), lambda y: (y * y).sum())
    else:
        layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
        trace = gradtrace.trace(layer, torch.randn(2, 3, 8), lambda y: y.square().mean())
    check_same_as_validated(trace, raw_docs[-1])


def test_canonical_key_order_is_the_schema_field_order() -> None:
    """Hard-coded orders in canonical.py, checked against the models they copy."""
    from gradtrace import trace_schema as ts

    value = {
        "shape": [1],
        "dtype": "float32",
        "stats": {"numel": 1, "min": 1.0, "max": 1.0, "mean": 1.0, "std": 0.0, "norm": 1.0},
    }
    assert list(canonical.tensor_value(value)) == list(ts.TensorValue.model_fields)
    assert list(canonical.stats(value["stats"])) == list(ts.TensorStats.model_fields)
    node = canonical.node({"id": "n0", "kind": "tensor", "label": "x"})
    assert list(node) == list(ts.GraphNode.model_fields)
    edge = canonical.edge({"id": "e0", "source": "n0", "target": "n1"})
    assert list(edge) == list(ts.GraphEdge.model_fields)
    assert list(canonical.module({"path": "", "type": "M", "parent": None})) == list(
        ts.ModuleInfo.model_fields
    )
    # events are not rebuilt: Recorder.emit writes them in the schema's order
    from gradtrace.engine.recorder import Recorder
    from gradtrace.engine.summarize import Summarizer

    recorder = Recorder(Summarizer(), 0, 10)
    recorder.begin_pass("forward", "forward #1", None)
    assert list(recorder.events[0]) == list(ts.Event.model_fields)


def test_edits_to_the_lazily_validated_doc_are_what_gets_saved() -> None:
    trace = gradtrace.trace(nn.Linear(2, 1), torch.ones(1, 2))
    untouched = trace.to_json()
    trace.doc.title = "edited"
    assert json.loads(trace.to_json())["title"] == "edited"
    assert trace.to_dict()["title"] == "edited"
    assert json.loads(untouched)["title"] != "edited"


def test_saved_scalars_keep_their_python_type() -> None:
    """ConvolutionBackward0 saves `transposed=False` and `groups=1`: a bool stays a bool, an int an int."""
    conv = nn.Conv1d(2, 2, 3)
    trace = gradtrace.trace(conv, torch.randn(1, 2, 5))
    for doc in (trace.to_dict(), json.loads(trace.doc.model_dump_json())):
        saved = {s["name"]: s["scalar"] for n in doc["graph"]["nodes"] for s in n["saved"]}
        assert saved["_saved_transposed"] is False
        assert saved["_saved_groups"] == 1 and type(saved["_saved_groups"]) is int
        assert saved["_saved_stride"] == [1]
