"""What the renderer is sent: the trace without its base64 tensor numbers, drawing the same picture."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import gradtrace
from gradtrace.render import diagram
from gradtrace.render.node_tool import run_render
from gradtrace.render.options import DrawOptions
from gradtrace.render.source import drawing_json, trace_json


@pytest.fixture(scope="module")
def trace() -> gradtrace.Trace:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 24), nn.LayerNorm(24), nn.GELU(), nn.Linear(24, 1))
    # a non-finite gradient chip too (its flag comes from the stats, which stay)
    return gradtrace.trace(model, torch.randn(4, 6), lambda out: out.sum() * float("inf"))


def _tensor_values(node: object) -> list[dict]:
    if isinstance(node, list):
        return [v for item in node for v in _tensor_values(item)]
    if not isinstance(node, dict):
        return []
    if {"shape", "dtype", "stats"} <= node.keys():
        return [node]
    return [v for item in node.values() for v in _tensor_values(item)]


def test_the_numbers_are_left_out_and_everything_else_kept(trace: gradtrace.Trace) -> None:
    full = json.loads(trace_json(trace))
    slim_bytes = drawing_json(trace)
    slim = json.loads(slim_bytes)
    loaded = gradtrace.Trace.from_json(slim_bytes)  # still a valid trace
    assert full["tensor_data"] and slim["tensor_data"] == []
    assert {**slim, "tensor_data": full["tensor_data"]} == full  # nothing else changed
    # a value whose block is not in this copy reads as stats only
    value = next(v for v in _tensor_values(slim) if v["data"] is not None)
    with pytest.raises(ValueError, match="stats only"):
        loaded.array(value)
    assert len(slim_bytes) < len(trace_json(trace))


@pytest.mark.parametrize("animated", [False, True])
def test_the_picture_is_the_same_as_from_the_whole_trace(trace: gradtrace.Trace, animated: bool) -> None:
    args = DrawOptions(animated=animated).svg_args()
    whole = run_render(trace_json(trace), args).decode("utf-8")
    diagram._cache.clear()
    assert diagram.diagram_svg(trace, animated=animated) == whole


def test_only_the_documents_own_tensor_data_is_emptied_not_text_that_looks_like_it() -> None:
    # a title (any string) holding the field's spelling is escaped JSON text: it stays as it is
    doc = {"title": ',"tensor_data":["AAAA"]}', "limits": {}, "tensor_data": ["AAAAAAAA", "BBBB"]}
    slim = json.loads(drawing_json(json.dumps(doc, separators=(",", ":"))))
    assert slim == {**doc, "tensor_data": []}
    for other in (b'{"title":"none here"}', b'{"tensor_data":["AAAA"],"title":"not last"}'):
        assert drawing_json(other) == other
