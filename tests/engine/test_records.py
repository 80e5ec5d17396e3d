"""The trace records are defined once (trace_schema, msgspec Structs): the engine builds a
TraceDoc, and what it writes is that document. For every example spec and a range of library
traces: the JSON reads back into an equal TraceDoc, ``to_dict`` is exactly the JSON's data,
every record's keys come in its field order, and the published JSON Schema accepts it."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any, get_args

import jsonschema
import msgspec
import numpy as np
import pytest
import torch
from torch import nn

import gradtrace
from gradtrace import trace_schema as ts
from gradtrace.engine import run_spec
from gradtrace.spec import SpecLimits, parse_spec
from gradtrace.trace_schema import TraceDoc, trace_json_schema

EXAMPLES = sorted((Path(gradtrace.__file__).parent / "examples").glob("*.json"))
VALIDATOR = jsonschema.Draft202012Validator(trace_json_schema())


def check_round_trip(trace: gradtrace.Trace) -> None:
    assert isinstance(trace.doc, TraceDoc)
    data = trace.to_json_bytes()
    # the engine's base64 blocks are written as they are: the bytes msgspec itself would write
    assert data == msgspec.json.encode(trace.doc) and trace.to_json() == data.decode()
    assert msgspec.json.decode(data, type=TraceDoc) == trace.doc
    assert trace.to_dict() == json.loads(data)
    assert json.loads(trace.to_json_bytes(indent=2)) == json.loads(data)
    assert gradtrace.Trace.from_dict(trace.to_dict()).doc == trace.doc
    VALIDATOR.validate(json.loads(data))
    doc = trace.to_dict()
    assert list(doc) == list(TraceDoc.__struct_fields__)
    assert list(doc["graph"]["nodes"][0]) == list(ts.GraphNode.__struct_fields__)
    assert list(doc["events"][0]) == list(ts.Event.__struct_fields__)
    for event in doc["events"]:  # each payload is its kind's record, written as that record writes it
        record = msgspec.convert(event["payload"], ts.EVENT_PAYLOADS[event["kind"]])
        assert msgspec.json.encode(record) == msgspec.json.encode(event["payload"])
    for edge in doc["graph"]["edges"]:
        assert list(edge) == list(ts.GraphEdge.__struct_fields__)
    for value in doc["grads"].values():
        if value is not None:
            assert list(value) == list(ts.TensorValue.__struct_fields__)
            # (``of`` is written only where it is set: complex tensors' stats of the magnitude)
            fields = [f for f in ts.TensorStats.__struct_fields__ if f != "of" or "of" in value["stats"]]
            assert list(value["stats"]) == fields


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_trace_reads_back_as_the_same_records(path: Path) -> None:
    check_round_trip(gradtrace.trace_spec(json.loads(path.read_text())))


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
def test_library_trace_reads_back_as_the_same_records(case: str) -> None:
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
        assert trace.doc.limits.values_truncated > 0
    elif case == "non_finite":
        x = torch.tensor([[1.0, float("nan")], [float("inf"), 2.0]], requires_grad=True)
        trace = gradtrace.trace(nn.Linear(2, 2), x)
        assert "NaN" in trace.to_json() and "Infinity" in trace.to_json()
    elif case == "conv":
        trace = gradtrace.trace(_conv_net(), torch.randn(2, 2, 4, 4), lambda y: y.pow(2).mean())
    elif case == "int_and_bool":
        emb = nn.Embedding(5, 3)
        trace = gradtrace.trace(emb, torch.tensor([[0, 4, 4]]), lambda y: (y * y).sum())
    else:
        layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
        trace = gradtrace.trace(layer, torch.randn(2, 3, 8), lambda y: y.square().mean())
    check_round_trip(trace)


def test_edits_to_the_doc_are_what_gets_saved() -> None:
    trace = gradtrace.trace(nn.Linear(2, 1), torch.ones(1, 2))
    untouched = trace.to_json()
    trace.doc.title = "edited"
    assert json.loads(trace.to_json())["title"] == "edited"
    assert trace.to_dict()["title"] == "edited"
    assert json.loads(untouched)["title"] != "edited"


def test_to_dict_is_a_copy() -> None:
    trace = gradtrace.trace(nn.Linear(2, 1), torch.ones(1, 2))
    data = trace.to_dict()
    data["graph"]["nodes"][0]["label"] = "changed"
    data["events"][0]["payload"]["extra"] = 1
    assert trace.doc.graph.nodes[0].label != "changed"
    assert "extra" not in trace.doc.events[0].payload


def test_saved_scalars_keep_their_python_type() -> None:
    """ConvolutionBackward0 saves `transposed=False` and `groups=1`: a bool stays a bool, an int an int."""
    conv = nn.Conv1d(2, 2, 3)
    trace = gradtrace.trace(conv, torch.randn(1, 2, 5))
    for doc in (trace.to_dict(), json.loads(trace.to_json())):
        saved = {s["name"]: s["scalar"] for n in doc["graph"]["nodes"] for s in n["saved"]}
        assert saved["_saved_transposed"] is False
        assert saved["_saved_groups"] == 1 and type(saved["_saved_groups"]) is int
        assert saved["_saved_stride"] == [1]


def _broken(edit: Any) -> dict[str, Any]:
    data = gradtrace.trace(nn.Linear(2, 1), torch.ones(1, 2)).to_dict()
    edit(data)
    return data


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda d: d["graph"]["nodes"][1].update(kind="leaf"), "$.graph.nodes[1].kind"),
        (lambda d: d["graph"]["edges"][0].update(colour="red"), "colour"),
        (lambda d: d["limits"].pop("max_nodes"), "max_nodes"),
    ],
)
def test_a_broken_trace_names_the_field(edit: Any, path: str) -> None:
    with pytest.raises(ValueError, match="not a valid trace") as caught:
        gradtrace.Trace.from_dict(_broken(edit))
    assert path in str(caught.value)


def test_json_data_goes_through_from_dict_not_the_constructor() -> None:
    data = gradtrace.trace(nn.Linear(2, 1), torch.ones(1, 2)).to_dict()
    with pytest.raises(TypeError, match="Trace.from_dict"):
        gradtrace.Trace(data)
    assert gradtrace.Trace.from_dict(data).to_dict() == data


def test_a_trace_of_another_schema_version_is_refused_by_name() -> None:
    data = gradtrace.trace(nn.Linear(2, 1), torch.ones(1, 2)).to_dict()
    data["schema_version"] = 1
    with pytest.raises(ValueError, match="schema_version 1"):
        gradtrace.Trace.from_dict(data)


def test_the_published_schema_is_made_from_the_records() -> None:
    schema = trace_json_schema()
    assert list(schema["properties"]) == list(TraceDoc.__struct_fields__)
    assert schema["additionalProperties"] is False
    assert list(schema["$defs"]["GraphNode"]["properties"]) == list(ts.GraphNode.__struct_fields__)


def test_every_event_kind_has_its_payload_record_and_the_schema_pins_it_by_kind() -> None:
    assert list(ts.EVENT_PAYLOADS) == list(get_args(ts.EventKind))
    events = VALIDATOR.evolve(schema={"$ref": "#/$defs/Event", "$defs": VALIDATOR.schema["$defs"]})
    event = {
        "seq": 0,
        "pass_index": 0,
        "phase": "backward",
        "kind": "node_pre",
        "payload": {"grad_outputs": [None]},
    }
    events.validate(event)
    wrong = [
        {"kind": "node_pre", "payload": {"grad": None}},  # another kind's payload
        {"kind": "node_created", "payload": {"grad_outputs": [None]}},  # (its payload is {})
        {"kind": "module_forward", "payload": {"inputs": []}},  # outputs missing
        {"kind": "grad_write", "payload": {"before": None, "after": None, "accumulated": 1}},
        {"kind": "error", "payload": {"exception": "RuntimeError", "step": None, "where": None}},
        {"kind": "tensor_hook", "payload": {"grad": None, "hook_name": "h", "extra": 1}},
    ]
    for edit in wrong:
        with pytest.raises(jsonschema.ValidationError):
            events.validate({**event, **edit})


def test_the_engine_builds_each_payload_as_its_kinds_record() -> None:
    """A TraceDoc straight from the engine (the service's path) holds the payload records;
    Trace.doc hands the reader plain data, the same keys in the same order."""
    spec = json.loads((EXAMPLES[0].parent / "sgd-training-step.json").read_text())
    doc = run_spec(parse_spec(spec), SpecLimits.local())
    kinds = {e.kind for e in doc.events}
    assert {"node_pre", "node_post", "grad_write", "module_forward", "zero_grad", "sgd_step"} <= kinds
    assert all(type(e.payload) is ts.EVENT_PAYLOADS[e.kind] for e in doc.events)
    written = [ts.payload_items(e.payload) for e in doc.events]
    read = gradtrace.Trace(doc).doc.events
    assert [list(e.payload) for e in read] == [[key for key, _ in items] for items in written]
    assert all(type(e.payload) is dict for e in read)


def test_a_fresh_trace_writes_the_same_json_before_and_after_its_payloads_are_read() -> None:
    """The engine leaves its TensorValue records in the event payloads; Trace.doc turns them
    into plain data when first read. Written before or after, the JSON is the same."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    trace = gradtrace.trace(model, torch.randn(3, 4), lambda y: y.square().mean())
    before, as_dict = trace.to_json_bytes(), trace.to_dict()
    payloads = [e.payload for e in trace.doc.events]  # read: plain data from here on
    assert trace.to_json_bytes() == before and json.loads(before) == as_dict
    forwards = [p for p in payloads if "outputs" in p]
    assert forwards and all(type(v) is dict for p in forwards for v in p["outputs"])
    # a module's output is the next module's input: one dict, shared, as the record was
    first, second = forwards[0], forwards[1]
    assert first["outputs"][0] is second["inputs"][0]


def test_the_engines_tensor_data_is_written_as_is_and_any_other_list_is_escaped() -> None:
    torch.manual_seed(0)
    trace = gradtrace.trace(nn.Linear(8, 4), torch.randn(5, 8))
    doc = trace.doc
    assert isinstance(doc.tensor_data, ts.Base64Blocks) and doc.tensor_data
    with pytest.raises(TypeError, match="assign a new list"):
        doc.tensor_data.append('"')
    with pytest.raises(TypeError, match="assign a new list"):
        doc.tensor_data[0] = '"'
    # a list of the reader's own: written by msgspec, escapes and all
    doc.tensor_data = [*doc.tensor_data, 'a "quoted" \\ block\n']
    data = trace.to_json_bytes()
    assert data == msgspec.json.encode(doc) and json.loads(data)["tensor_data"][-1] == 'a "quoted" \\ block\n'
    assert trace.to_json() == data.decode()


def test_to_json_bytes_holds_the_blocks_once_more_at_most() -> None:
    """The engine's blocks go into the JSON without a join of them all first (held with its
    encoding and the result, that was three copies of what is most of a big trace's bytes)."""
    torch.manual_seed(0)
    trace = gradtrace.trace(nn.Linear(8, 4), torch.randn(5, 8))
    doc = trace.doc
    blocks = ts.Base64Blocks([*doc.tensor_data, *(chr(65 + k) * 2_000_000 for k in range(8))])
    doc.tensor_data = blocks
    expected = msgspec.json.encode(msgspec.structs.replace(doc, tensor_data=list(blocks)))
    tracemalloc.start()
    try:
        data = trace.to_json_bytes()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert data == expected
    assert peak < 1.3 * len(data)  # the output (with its buffer's slack), not one more copy


def test_a_big_output_first_hands_freed_memory_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past _BIG_OUTPUT characters of blocks, to_json_bytes asks glibc to hand freed heap pages
    back first (where there is glibc); the bytes are the same."""
    torch.manual_seed(0)
    trace = gradtrace.trace(nn.Linear(8, 4), torch.randn(5, 8))
    before = trace.to_json_bytes()
    calls: list[int] = []
    monkeypatch.setattr(ts, "_MALLOC_TRIM", calls.append)
    assert trace.to_json_bytes() == before and calls == []  # (a small trace: nothing asked)
    monkeypatch.setattr(ts, "_BIG_OUTPUT", 0)
    assert trace.to_json_bytes() == before and calls == [0]


def test_the_passes_only_log_the_event_and_edge_gradient_records_come_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 32: inside a pass the hooks append plain entries; the Event records and the edges'
    gradients (EdgeGrad) are built after it. None is built while a module's forward or the
    autograd engine runs, and the trace has them all: each edge's gradients the ones PyTorch
    sent along it, pass by pass, at its target's ``node_post``."""
    from gradtrace.engine import recorder

    inside = {"forward": False}
    built_inside: list[str] = []

    def counted(record: Any) -> Any:
        def build(**fields: Any) -> Any:
            if inside["forward"] or torch._C._current_graph_task_id() != -1:
                built_inside.append(record.__name__)
            return record(**fields)

        return build

    monkeypatch.setattr(recorder, "Event", counted(ts.Event))
    monkeypatch.setattr(recorder, "EdgeGrad", counted(ts.EdgeGrad))

    class Flagged(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            inside["forward"] = True
            try:
                return self.inner(x)
            finally:
                inside["forward"] = False

    torch.manual_seed(0)
    model = Flagged()
    x = torch.randn(5, 3)
    with gradtrace.record() as rec:
        model(x).pow(2).mean().backward()
        first = model.inner[0].weight.grad.clone()
        model(x).pow(2).mean().backward()
    assert built_inside == []
    trace = rec.trace
    doc = trace.doc
    assert [e.seq for e in doc.events] == list(range(len(doc.events)))
    assert sum(e.kind == "node_post" for e in doc.events) > 0
    (acc,) = [
        n.id for n in doc.graph.nodes if n.op == "AccumulateGrad" and n.tensor == "model.inner.0.weight"
    ]
    # one edge per forward's graph (each iteration's TBackward0 -> the weight's AccumulateGrad)
    edges = [e for e in doc.graph.edges if e.source == acc and e.kind == "data"]
    backwards = [p.index for p in doc.passes if p.phase == "backward"]
    assert len(backwards) == 2 and [[g.pass_index for g in e.grads] for e in edges] == [
        [b] for b in backwards
    ]
    for edge in edges:
        post = doc.events[edge.grads[0].seq]
        assert (
            post.kind == "node_post"
            and post.node == edge.target
            and post.pass_index == edge.grads[0].pass_index
        )
    sent = [trace.array(e.grads[0].value) for e in edges]
    assert np.array_equal(sent[0], first.numpy())
    assert np.array_equal(sent[0] + sent[1], model.inner[0].weight.grad.numpy())
