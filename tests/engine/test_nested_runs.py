"""Engine runs nested in a traced pass: reentrant checkpoint recomputation (inside the
backward) and autograd.grad inside forward (a gradient penalty), plus a backward that starts
at a leaf. The oracles for "which nodes did the engine run", in runs without gradtrace:
plain ``Node.register_prehook`` on every node, and PyTorch's profiler (which also sees the
nodes a checkpoint recomputes inside the backward, where no outside hook can reach).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
import torch
from engine_checks import check_engine_order, check_node_states
from torch import nn
from torch.profiler import profile
from torch.utils.checkpoint import checkpoint

import gradtrace

EVALUATE = "autograd::engine::evaluate_function: "


def engine_ran(run: Any) -> Counter[str]:
    """Op names of every node the engine ran during ``run()`` (all engine runs)."""
    with profile() as prof:
        run()
    names = [e.name.removeprefix(EVALUATE) for e in prof.events() if e.name.startswith(EVALUATE)]
    return Counter(n.rsplit("::", 1)[-1] for n in names)


class PrehookOracle:
    """Plain register_prehook on every node reachable from given tensors (once per node)."""

    def __init__(self) -> None:
        self.ran: Counter[str] = Counter()
        self._hooked: set[Any] = set()
        self._handles: list[Any] = []

    def hook_all(self, tensor: torch.Tensor) -> None:
        stack = [tensor.grad_fn]
        while stack:
            node = stack.pop()
            if node is None or node in self._hooked:
                continue
            self._hooked.add(node)
            name = node.name().rsplit("::", 1)[-1]
            self._handles.append(node.register_prehook(lambda _g, name=name: self.ran.update([name])))
            stack.extend(fn for fn, _nr in node.next_functions)


def recorded_runs(doc: dict[str, Any]) -> Counter[str]:
    """Op names of the node_pre events of a trace, after checking each has its node_post."""
    ops = {n["id"]: n.get("op") for n in doc["graph"]["nodes"]}
    pre = Counter((e["pass_index"], e["node"]) for e in doc["events"] if e["kind"] == "node_pre")
    post = Counter((e["pass_index"], e["node"]) for e in doc["events"] if e["kind"] == "node_post")
    assert pre == post
    return Counter(ops[node] for (_pass, node), count in pre.items() for _ in range(count))


class Checkpointed(nn.Module):
    """Two reentrant checkpoint segments around a plain layer."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.a = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 5))
        self.b = nn.Linear(5, 5)
        self.c = nn.Sequential(nn.Linear(5, 3), nn.Sigmoid())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = checkpoint(self.a, x, use_reentrant=True)
        h = torch.relu(self.b(h))
        return checkpoint(self.c, h, use_reentrant=True)


def _loss(y: torch.Tensor) -> torch.Tensor:
    return (y**2).mean()


X = torch.tensor([[0.3, -1.2, 0.8, 2.0], [1.1, 0.4, -0.6, -0.2]], dtype=torch.float64)


def test_reentrant_checkpoint_recomputation_is_a_nested_pass_with_every_node() -> None:
    clean = Checkpointed().double()
    x = X.clone().requires_grad_()
    oracle = engine_ran(lambda: _loss(clean(x)).backward())
    assert oracle["CheckpointFunctionBackward"] == 2

    model = Checkpointed().double()
    traced_x = X.clone().requires_grad_()
    trace = gradtrace.trace(model, traced_x, _loss)
    doc = trace.to_dict()
    assert recorded_runs(doc) == oracle
    check_engine_order(trace.doc)
    check_node_states(trace.doc)

    backward = next(p for p in doc["passes"] if p["phase"] == "backward" and p["parent"] is None)
    nested = [p for p in doc["passes"] if p["parent"] is not None]
    assert len(nested) == 2
    for p in nested:
        assert p["parent"] == backward["index"] and "checkpoint recomputation" in p["label"]
        assert backward["first_seq"] < p["first_seq"] < p["last_seq"] < backward["last_seq"]
        inside = [e for e in doc["events"] if p["first_seq"] <= e["seq"] <= p["last_seq"]]
        assert all(e["pass_index"] == p["index"] for e in inside)
        assert any(e["kind"] == "grad_write" for e in inside)  # the segment's weights
    # the recomputed nodes were created inside the backward, each run once
    created_in_backward = {n["id"] for n in doc["graph"]["nodes"] if n["pass_index"] == backward["index"]}
    assert created_in_backward
    for name, p in clean.named_parameters():
        np.testing.assert_array_equal(trace.grads[name], p.grad.numpy(), err_msg=name)
        assert torch.equal(dict(model.named_parameters())[name].grad, p.grad), name
    np.testing.assert_array_equal(trace.grads["x"], x.grad.numpy())


class GradientPenalty(nn.Module):
    """A WGAN-GP-style penalty: autograd.grad with create_graph inside forward."""

    def __init__(self, observe: Any = None) -> None:
        super().__init__()
        torch.manual_seed(5)
        self.net = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1))
        self.observe = observe  # the oracle's hook-everything, before the nested run

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        score = self.net(x).sum()
        if self.observe is not None:
            self.observe(score)
        (g,) = torch.autograd.grad(score, x, None, None, True)  # create_graph, positionally
        return score + ((g.norm(dim=1) - 1) ** 2).mean()


def test_gradient_penalty_inside_forward_is_a_nested_pass_and_its_graph_is_traced() -> None:
    oracle = PrehookOracle()
    clean = GradientPenalty(oracle.hook_all).double()
    x = X.clone().requires_grad_()
    loss = clean(x)
    oracle.hook_all(loss)  # the penalty's graph, double-backward nodes included
    loss.backward()

    model = GradientPenalty().double()
    trace = gradtrace.trace(model, X.clone().requires_grad_())
    doc = trace.to_dict()
    assert recorded_runs(doc) == oracle.ran
    check_engine_order(trace.doc)
    check_node_states(trace.doc)

    forward = doc["passes"][0]
    nested = [p for p in doc["passes"] if p["parent"] is not None]
    assert len(nested) == 1
    assert nested[0]["parent"] == forward["index"] == 0
    assert nested[0]["label"] == "nested autograd.grad inside forward #1"
    codes = [d["code"] for d in doc["analyses"]["diagnostics"]]
    assert codes.count("double_backward") == 1
    # the identity W.grad = Σ δ⊗a does not hold with a gradient penalty: said, not hidden
    assert doc["analyses"]["linear"] and not any(r["matches"] for r in doc["analyses"]["linear"])
    # the double-backward nodes create_graph built are in the graph and run in the backward
    created_in_nested = [n for n in doc["graph"]["nodes"] if n["pass_index"] == nested[0]["index"]]
    assert created_in_nested
    backward = next(p for p in doc["passes"] if p["phase"] == "backward" and p["parent"] is None)
    ran = {
        e["node"] for e in doc["events"] if e["kind"] == "node_pre" and e["pass_index"] == backward["index"]
    }
    assert {n["id"] for n in created_in_nested} & ran
    for name, p in clean.named_parameters():
        np.testing.assert_allclose(trace.grads[name], p.grad.numpy(), rtol=1e-12, atol=0, err_msg=name)
    np.testing.assert_allclose(trace.grads["x"], x.grad.numpy(), rtol=1e-12, atol=0)


def test_an_engine_run_inside_loss_fn_is_nested_and_a_loss_module_is_not_recorded() -> None:
    """trace()'s forward is declared: ``autograd.grad`` in ``loss_fn`` (outside every module)
    is a nested pass of it, as inside the model, and the loss module it calls is not one of
    the model's modules (record() would make both its own: a pass, ``MSELoss#0``)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 1)).double()
    twin = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 1)).double()
    twin.load_state_dict(model.state_dict())
    target = torch.zeros(2, 1, dtype=torch.float64)

    def penalised(out: torch.Tensor) -> torch.Tensor:
        (g,) = torch.autograd.grad(out.sum(), out, create_graph=True)
        return nn.MSELoss()(out, target) + (g**2).mean()

    x = X.clone()
    penalised(twin(x)).backward()
    trace = gradtrace.trace(model, X.clone(), penalised)
    doc = trace.to_dict()
    top = [p["label"] for p in doc["passes"] if p["parent"] is None]
    assert top == ["forward #1", "backward #1 of loss"]
    [nested] = [p for p in doc["passes"] if p["parent"] is not None]
    assert nested["parent"] == 0 and nested["label"] == "nested autograd.grad inside forward #1"
    assert [m["path"] for m in doc["graph"]["modules"]] == ["", "0", "1", "2"]
    for name, p in twin.named_parameters():
        assert torch.equal(torch.from_numpy(trace.grads[name]), p.grad), name


class LeafLoss(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor(3.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w


def test_a_backward_that_starts_at_a_leaf_records_its_pass_and_grad_write() -> None:
    model = LeafLoss()
    trace = gradtrace.trace(model, torch.ones(2))
    doc = trace.to_dict()
    assert model.w.grad is not None and float(model.w.grad) == 1.0
    np.testing.assert_array_equal(trace.grads["w"], np.float32(1.0))
    backward = next(p for p in doc["passes"] if p["phase"] == "backward")
    events = [e for e in doc["events"] if e["pass_index"] == backward["index"]]
    leaf = next(n for n in doc["graph"]["nodes"] if n["kind"] == "tensor" and n["tensor"] == "w")
    writes = [e for e in events if e["kind"] == "grad_write"]
    assert [w["target"] for w in writes] == [leaf["id"]]
    assert writes[0]["payload"]["after"]["values"] == [1.0]
    assert writes[0]["payload"]["before"] is None
    assert [e["kind"] for e in events if e["kind"] in ("node_pre", "node_post")] == ["node_pre", "node_post"]
    assert recorded_runs(doc) == engine_ran(lambda: LeafLoss().w.backward())


class FailingSegment(nn.Module):
    """A checkpointed segment whose recomputed graph fails inside the nested engine run."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 1)

    def segment(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.a(x))
        if h.requires_grad:  # only when recomputed (the first run is under no_grad)
            h.register_hook(self.refuse)
        return h

    @staticmethod
    def refuse(grad: torch.Tensor) -> None:
        raise RuntimeError("refused inside the recomputed segment")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(checkpoint(self.segment, x, use_reentrant=True))


def test_an_error_inside_a_nested_run_is_recorded_once_in_that_pass() -> None:
    # raised from trace() as PyTorch raises it, the partial trace attached
    with pytest.raises(RuntimeError, match="^refused inside the recomputed segment$") as raised:
        gradtrace.trace(FailingSegment(), X.float().clone().requires_grad_())
    doc = raised.value.gradtrace_trace.to_dict()  # type: ignore[attr-defined]
    errors = [e for e in doc["events"] if e["kind"] == "error"]
    assert [e["message"] for e in errors] == ["refused inside the recomputed segment"]
    nested = next(p for p in doc["passes"] if p["parent"] is not None)
    assert errors[0]["pass_index"] == nested["index"]
    assert nested["first_seq"] < errors[0]["seq"] < nested["last_seq"]
    # the enclosing backward was interrupted: the checkpoint node never finished
    ops = {n["id"]: n.get("op") for n in doc["graph"]["nodes"]}
    finished = {ops[e["node"]] for e in doc["events"] if e["kind"] == "node_post"}
    assert "CheckpointFunctionBackward" not in finished


def test_a_spec_backward_of_an_input_leaf_records_its_grad_write() -> None:
    spec = {
        "spec_version": 1,
        "title": "backward of a leaf",
        "modules": {},
        "inputs": {
            "w": {"value": [2.0], "requires_grad": True},
            "v": {"value": [1.0], "requires_grad": True},
        },
        "forward": ["y = v * 3"],
        "steps": [{"do": "backward", "of": "w"}],
    }
    doc = gradtrace.trace_spec(spec).to_dict()
    leaf = next(n for n in doc["graph"]["nodes"] if n["kind"] == "tensor" and n["tensor"] == "w")
    writes = [e for e in doc["events"] if e["kind"] == "grad_write"]
    assert [(w["target"], w["payload"]["after"]["values"]) for w in writes] == [(leaf["id"], [1.0])]
    assert doc["grads"]["w"]["values"] == [1.0] and doc["grads"]["v"] is None


def test_a_post_accumulate_hook_inside_a_checkpoint_segment_runs_after_the_recorded_write() -> None:
    """The model's own post-accumulate hook on a weight the recomputation reaches: gradtrace
    puts its recording hook first from inside the nested run (where the discovery mode
    watches hook registrations) without it counting as a model hook; the write recorded
    is PyTorch's (autograd.grad as oracle), the model's hook then doubles it."""
    model = Checkpointed().double()
    weight = model.c[0].weight
    ref = Checkpointed().double()  # the same computation without checkpoints
    oracle = torch.autograd.grad(_loss(ref.c(torch.relu(ref.b(ref.a(X))))), ref.c[0].weight)[0]
    fired: list[str] = []

    def double(p: torch.Tensor) -> None:
        fired.append("double")
        p.grad.mul_(2)

    handle = weight.register_post_accumulate_grad_hook(double)
    trace = gradtrace.trace(model, X, _loss)
    handle.remove()
    assert fired == ["double"]
    assert not weight._post_accumulate_grad_hooks  # nothing of gradtrace's left behind
    leaf = next(n.id for n in trace.doc.graph.nodes if n.tensor == "c.0.weight")
    kinds = [
        e.kind
        for e in trace.doc.events
        if e.node == leaf and e.kind in ("grad_write", "post_accumulate_grad")
    ]
    assert kinds == ["grad_write", "post_accumulate_grad"]
    assert {e.hook for e in trace.doc.events if e.hook is not None} == {0}  # the model's only hook
    write = next(e for e in trace.doc.events if e.node == leaf and e.kind == "grad_write")
    np.testing.assert_allclose(trace.array(write.payload["after"]), oracle.numpy(), rtol=1e-12)
    assert torch.allclose(weight.grad, 2 * oracle)
