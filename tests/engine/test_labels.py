"""What the graph calls things (the viewer review, issue 12 items 5 and 8): a retain_grad
intermediate's node says so, a tensor computed outside autograd carries the program's text,
and modules the spec built report the spec's type."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

import gradtrace

EXAMPLES = Path(gradtrace.__file__).parent / "examples"


def example(name: str) -> dict[str, Any]:
    return json.loads((EXAMPLES / f"{name}.json").read_text())


def nodes_named(trace: dict[str, Any], tensor: str) -> list[dict[str, Any]]:
    return [n for n in trace["graph"]["nodes"] if n["tensor"] == tensor]


def test_a_retain_grad_intermediate_node_says_retains_grad() -> None:
    trace = gradtrace.trace_spec(example("retain-grad-intermediate")).to_dict()
    [a0] = nodes_named(trace, "a0")
    assert a0["kind"] == "op" and a0["retains_grad"] is True
    assert [n["tensor"] for n in trace["graph"]["nodes"] if n["retains_grad"]] == ["a0"]
    library = gradtrace.trace(nn.Linear(2, 2), torch.ones(1, 2), retain_grad=True).to_dict()
    [output] = nodes_named(library, "output")
    assert output["retains_grad"] is True


def test_a_detached_term_is_labelled_with_its_program_text() -> None:
    trace = gradtrace.trace_spec(example("detach-stops-gradient")).to_dict()
    [leaf] = [n for n in trace["graph"]["nodes"] if n["kind"] == "tensor" and n["role"] == "input"]
    assert leaf["label"] == "d * 5" and leaf["tensor"] is None  # d * 5 has no program name
    spec = copy.deepcopy(example("detach-stops-gradient"))
    spec["forward"] = ["y = w * 3", "d = y.detach()", "z = d * y"]
    direct = gradtrace.trace_spec(spec).to_dict()
    [d] = [n for n in direct["graph"]["nodes"] if n["kind"] == "tensor" and n["role"] == "input"]
    assert d["label"] == "d" and d["tensor"] == "d"
    assert not [n for n in direct["graph"]["nodes"] if n["label"] == "tensor"]


def test_composite_modules_report_the_spec_type() -> None:
    trace = gradtrace.trace_spec(example("full-backward-hook")).to_dict()
    types = {m["path"]: m["type"] for m in trace["graph"]["modules"]}
    assert types["f1"] == "Module" and types["f0"] == "Linear" and types["f1.f"] == "Linear"
    assert "ProgramModule" not in types.values() and "SpecRoot" not in types.values()
