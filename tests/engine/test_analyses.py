"""The analyses behind one interface (engine/analysis.py), listed in one place
(engine/analyses.py): an analysis added to the list observes every capture through the
interface alone, and adds its records after the passes."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import gradtrace
from gradtrace.engine import analyses
from gradtrace.engine.analysis import Analysis, Backward, Finished
from gradtrace.trace_schema import Analyses


class _Probe(Analysis):
    """Notes every call the capture makes to it."""

    keeps_calls_of = (nn.Linear,)
    wants_saved = True

    def __init__(self, calls: list[tuple]) -> None:
        self.calls = calls

    def weights_found(self, weights: dict[str, torch.Tensor]) -> None:
        self.calls.append(("weights", sorted(weights)))

    def saved(self, node_id: str, node: Any, seq: int, tensors: list[tuple[str, torch.Tensor]]) -> None:
        self.calls.append(("saved", node_id))

    def backward_starting(self, backward: Backward) -> None:
        self.calls.append(("start", backward.pass_index))

    def backward_ended(self, backward: Backward, ok: bool) -> None:
        self.calls.append(("end", backward.pass_index, ok))
        # (its events so far, its own included: the last one is its node's post hook)
        kinds = [e.kind for e in backward.events[backward.first_seq :]]
        self.calls.append(("ended with", kinds[0], ok and kinds[-1] == "node_post", sorted(backward.params)))

    def add(self, done: Finished, out: Analyses) -> None:
        self.calls.append(("add", sorted(done.final_grads)))
        with pytest.raises(TypeError):  # (read-only: the capture's own dict, not the analysis's)
            done.env["loss"] = None  # type: ignore[index]

    def add_after_values(self, done: Finished, out: Analyses) -> None:
        self.calls.append(("after values", out.grad_norms is not None))


def test_an_analysis_in_the_list_observes_each_backward_and_adds_after_the_passes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple] = []
    monkeypatch.setattr(analyses, "ANALYSES", (*analyses.ANALYSES, lambda: _Probe(calls)))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2), nn.Tanh())
    x = torch.randn(4, 3)
    with gradtrace.record() as rec:
        loss = model(x).pow(2).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        with pytest.raises(RuntimeError):  # (the graph is freed: PyTorch's error, a pass that raised)
            loss.backward()
    backwards = [p.index for p in rec.trace.doc.passes if p.phase == "backward"]
    assert len(backwards) == 3
    assert [c for c in calls if c[0] in ("start", "end")] == [
        ("start", backwards[0]),
        ("end", backwards[0], True),
        ("start", backwards[1]),
        ("end", backwards[1], True),
        ("start", backwards[2]),
        ("end", backwards[2], False),
    ]
    params = ["model.0.bias", "model.0.weight"]
    assert [c[1:] for c in calls if c[0] == "ended with"] == [
        ("pass_start", True, params),
        ("pass_start", True, params),
        ("pass_start", False, params),
    ]
    assert ("weights", ["model.0.weight"]) in calls
    saved = {c[1] for c in calls if c[0] == "saved"}
    assert saved and saved <= {n.id for n in rec.trace.doc.graph.nodes if n.saved}
    assert calls[-2:] == [("add", ["model.0.bias", "model.0.weight"]), ("after values", True)]
    # the listed analyses' records are there as without the probe
    assert {r.weight for r in rec.trace.doc.analyses.linear} == {"model.0.weight"}
    assert [g.pass_index for g in rec.trace.doc.analyses.grad_norms if g.name == "model.0.bias"] == [
        backwards[0],
        backwards[1],
        None,
    ]
