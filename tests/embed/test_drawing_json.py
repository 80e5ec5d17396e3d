"""What the renderer is sent: the trace without its base64 tensor numbers, drawing the same picture."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

import gradtrace
from gradtrace.render import diagram
from gradtrace.render.node_tool import run_render
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


def test_base64_numbers_are_left_out_as_truncated_values_and_the_rest_kept(trace: gradtrace.Trace) -> None:
    full = json.loads(trace_json(trace))
    slim_bytes = drawing_json(trace)
    slim = json.loads(slim_bytes)
    gradtrace.Trace.from_json(slim_bytes)  # still a valid trace
    before, after = _tensor_values(full), _tensor_values(slim)
    assert len(before) == len(after) and any(v["data"] for v in before)
    for a, b in zip(before, after, strict=True):
        if a["data"] is not None:
            assert b["data"] is None and b["truncated"] is True
            assert {**b, "data": a["data"], "truncated": False} == a
        else:
            assert a == b  # numbers in JSON lists (up to 16) and truncated values: as they were
    assert len(slim_bytes) < len(trace_json(trace))
    assert [n["id"] for n in slim["graph"]["nodes"]] == [n["id"] for n in full["graph"]["nodes"]]
    assert len(slim["events"]) == len(full["events"]) and slim["spec"] == full["spec"]


@pytest.mark.parametrize("animated", [False, True])
def test_the_picture_is_the_same_as_from_the_whole_trace(trace: gradtrace.Trace, animated: bool) -> None:
    args = diagram.svg_args(animated, "both", "light", True)
    whole = run_render(trace_json(trace), args).decode("utf-8")
    diagram._cache.clear()
    assert diagram.diagram_svg(trace, animated=animated) == whole


def test_only_real_data_fields_are_left_out_not_text_that_looks_like_one() -> None:
    # a title (any string) holding the field's spelling is escaped JSON text: it stays as it is
    lookalike = '"data":"AAAA","truncated":false'
    doc = {
        "title": lookalike,
        "a": {"data": "AAAAAAAA", "truncated": False},
        "b": {"data": None, "truncated": True},
        "c": {"data": "BBBB", "truncated": False},
    }
    slim = json.loads(drawing_json(json.dumps(doc, separators=(",", ":"))))
    assert slim == {**doc, "a": {"data": None, "truncated": True}, "c": {"data": None, "truncated": True}}
    assert drawing_json(b'{"title":"none here"}') == b'{"title":"none here"}'
