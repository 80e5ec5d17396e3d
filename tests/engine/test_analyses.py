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
from gradtrace.engine.analysis import Analysis, Finished
from gradtrace.engine.session import TraceSession
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

    def backward_starting(self, session: TraceSession, pass_index: int) -> None:
        self.calls.append(("start", pass_index))

    def backward_ended(self, session: TraceSession, pass_index: int, ok: bool) -> None:
        self.calls.append(("end", pass_index, ok))

    def add(self, done: Finished, out: Analyses) -> None:
        self.calls.append(("add", sorted(done.final_grads)))

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
