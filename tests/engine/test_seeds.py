"""The seeds' numbers, through specs, against plain PyTorch written here (the oracle)."""

from __future__ import annotations

import pytest
import torch
from engine_models import Seed002Net, seed000_case, seed002_loss
from engine_specs import SEED000_MLP, SEED001_RETAIN, SEED001_TENSOR_HOOKS, seed002

import gradtrace


def _scalar(tv) -> float:  # noqa: ANN001
    assert tv is not None and tv.values is not None and len(tv.values) == 1
    return tv.values[0]


def _oracle_seed002(hook_type: str, scale: float | None) -> tuple[dict[str, float], list]:
    net = Seed002Net()
    seen: list = []

    def hook(_m, grad_input, grad_output):  # noqa: ANN001, ANN202
        seen.append((grad_input[0].item(), grad_output[0].item()))
        return None if scale is None else (grad_input[0] * scale,)

    register = (
        net.f1.register_full_backward_hook if hook_type == "full_backward" else net.f1.register_backward_hook
    )
    with pytest.warns(FutureWarning) if hook_type == "backward" else _nothing():
        register(hook)
        x = torch.tensor([0.3], requires_grad=True)
        seed002_loss(net(x)).backward()
    grads = {"x": x.grad.item(), **{n: p.grad.item() for n, p in net.named_parameters()}}
    return grads, seen


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: object) -> None:
        return None


@pytest.mark.parametrize(
    ("hook_type", "scale", "x_grad"),
    [("full_backward", 2, -0.2448), ("full_backward", None, -0.1224), ("backward", None, -0.1224)],
)
def test_seed002_grads_and_hook_payloads(hook_type: str, scale: float | None, x_grad: float) -> None:
    doc = gradtrace.trace_spec(seed002(hook_type, scale)).doc
    grads = {k: _scalar(v) for k, v in doc.grads.items()}
    oracle, seen = _oracle_seed002(hook_type, scale)
    assert grads == pytest.approx(oracle, abs=0)  # bit-identical to plain torch
    assert grads["x"] == pytest.approx(x_grad, abs=1e-4)
    assert grads["f1.f.weight"] == pytest.approx(-0.1938, abs=1e-4)
    assert grads["f1.f.bias"] == pytest.approx(-1.0199, abs=1e-4)
    factor = 1 if scale is None else scale
    assert grads["f0.weight"] == pytest.approx(-0.1224 * factor, abs=1e-4)
    assert grads["f0.bias"] == pytest.approx(-0.4080 * factor, abs=1e-4)
    [event] = [e for e in doc.events if e.kind == "module_backward"]
    grad_in = event.payload["grad_input"][0]["values"][0]
    grad_out = event.payload["grad_output"][0]["values"][0]
    assert (grad_in, grad_out) == pytest.approx(seen[0], abs=0)
    assert grad_out == pytest.approx(-1.8476, abs=1e-4)
    assert grad_in == pytest.approx(-0.4080 if hook_type == "full_backward" else -1.0199, abs=1e-4)
    actions = [e for e in doc.events if e.kind == "hook_action"]
    assert len(actions) == (0 if scale is None else 1)
    inserted = [n for n in doc.graph.nodes if n.inserted]
    if hook_type == "full_backward":
        assert [n.op for n in inserted] == ["BackwardHookFunctionBackward"] * 2
        assert {n.module for n in inserted} == {"f1"}
        # the module's hook fires inside its BackwardHookFunctionBackward node's pre/post pair
        node = event.node
        pre = next(e.seq for e in doc.events if e.kind == "node_pre" and e.target == node)
        post = next(e.seq for e in doc.events if e.kind == "node_post" and e.target == node)
        assert pre < event.seq < post
    else:
        assert inserted == []
        assert any("non-full backward hook" in d.message for d in doc.analyses.diagnostics)


def test_seed000_reconstruction_matches_wgrad_spec() -> None:
    doc = gradtrace.trace_spec(SEED000_MLP).doc
    recs = {r.weight: r for r in doc.analyses.linear}
    assert set(recs) == {"fc1.weight", "fc2.weight"}
    assert recs["fc1.weight"].a_shape == [5, 6, 4] and recs["fc1.weight"].delta_shape == [5, 6, 3]
    assert recs["fc2.weight"].a_shape == [5, 6, 3] and recs["fc2.weight"].delta_shape == [5, 6, 2]
    for r in recs.values():
        assert r.matches and r.max_error <= 1e-6


def test_seed000_reconstruction_module_matches_seed_code() -> None:
    model, x, y = seed000_case()
    trace = gradtrace.trace(model, x, lambda out: 0.5 * ((out - y) ** 2).sum())
    recs = {r.weight: r for r in trace.doc.analyses.linear}
    # the seed's own computation, without gradtrace
    model2, x2, y2 = seed000_case()
    (0.5 * ((model2(x2) - y2) ** 2).sum()).backward()
    for name in ("fc1.weight", "fc2.weight"):
        expected = dict(model2.named_parameters())[name].grad
        assert torch.equal(torch.tensor(trace.grads[name]), expected)
        assert recs[name].matches and recs[name].max_error <= 1e-6
    assert recs["fc1.weight"].a_shape == [5, 6, 4] and recs["fc1.weight"].delta_shape == [5, 6, 3]
    assert recs["fc2.weight"].a_shape == [5, 6, 3] and recs["fc2.weight"].delta_shape == [5, 6, 2]


def test_seed001_retain_graph_accumulates_then_fails() -> None:
    doc = gradtrace.trace_spec(SEED001_RETAIN).doc
    writes = [e for e in doc.events if e.kind == "grad_write"]
    assert [w.payload["after"]["values"][0] for w in writes] == [2.0, 4.0]
    assert [w.payload["accumulated"] for w in writes] == [False, True]
    assert writes[1].payload["before"]["values"] == [2.0]
    [error] = [e for e in doc.events if e.kind == "error"]
    x = torch.tensor(1.0, requires_grad=True)
    y = x**2
    y.backward()
    with pytest.raises(RuntimeError) as raised:
        y.backward()
    assert error.message == str(raised.value)
    assert error.message.startswith("Trying to backward through the graph a second time")
    assert error.payload == {"exception": "RuntimeError", "step": 2}
    assert doc.grads["x"].values == [4.0]
    assert not any(e.kind == "zero_grad" for e in doc.events)  # later steps skipped
    assert any(d.code == "steps_skipped" for d in doc.analyses.diagnostics)


def test_seed001_tensor_hook_vs_post_accumulate() -> None:
    doc = gradtrace.trace_spec(SEED001_TENSOR_HOOKS).doc
    fired = [
        (e.kind, e.payload["grad"]["values"][0])
        for e in doc.events
        if e.kind in ("tensor_hook", "post_accumulate_grad")
    ]
    assert fired == [
        ("tensor_hook", 2.0),
        ("post_accumulate_grad", 2.0),
        ("tensor_hook", 3.0),
        ("post_accumulate_grad", 5.0),
    ]
    assert doc.grads["w"].values == [5.0]
