"""gradtrace.trace(model, inputs, loss_fn) on real nn.Modules, and the Trace object."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from engine_models import Seed002Net, seed002_loss
from torch import nn

import gradtrace
from gradtrace.engine import TraceError


def _oracle(model: nn.Module, inputs: tuple, loss_fn) -> dict[str, torch.Tensor]:  # noqa: ANN001
    leaves = dict(model.named_parameters())
    out = model(*inputs)
    loss = loss_fn(out) if loss_fn else out.sum()
    grads = torch.autograd.grad(loss, list(leaves.values()), allow_unused=True)
    return dict(zip(leaves, grads, strict=True))


def test_transformer_encoder_layer_grads_equal_oracle() -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)
    x = torch.randn(2, 5, 8)
    trace = gradtrace.trace(layer, x, lambda y: (y**2).mean())
    expected = _oracle(layer, (x,), lambda y: (y**2).mean())
    assert set(trace.grads) == set(expected)
    for name, grad in expected.items():
        np.testing.assert_array_equal(trace.grads[name], grad.numpy(), err_msg=name)
    doc = trace.doc
    ops = {n.op for n in doc.graph.nodes if n.kind == "op"}
    assert {"AccumulateGrad", "NativeLayerNormBackward0"} <= ops
    assert {m.path for m in doc.graph.modules} >= {"", "self_attn", "linear1", "linear2", "norm1"}
    # every op node in a module carries its path
    assert any(n.module == "self_attn" for n in doc.graph.nodes)
    assert all(r.matches for r in doc.analyses.linear)
    # the trace is strict JSON
    json.loads(trace.to_json(), parse_constant=lambda c: pytest.fail(f"bare {c} in JSON"))


def test_tensor_inputs_and_diagnostic_for_non_scalar_output() -> None:
    model = nn.Linear(3, 2)
    trace = gradtrace.trace(model, torch.ones(4, 3))
    assert [d.code for d in trace.doc.analyses.diagnostics][0] == "output_reduced"
    assert trace.grads["weight"].shape == (2, 3)
    np.testing.assert_allclose(trace.grads["bias"], [4.0, 4.0])
    # the input that does not require grad still appears, with a dashed no_grad edge
    x_node = next(n for n in trace.doc.graph.nodes if n.tensor == "x")
    assert x_node.role == "input" and x_node.kind == "tensor"
    assert any(e.source == x_node.id and e.kind == "no_grad" for e in trace.doc.graph.edges)
    assert trace.value("x").shape == (4, 3)


def test_tuple_inputs_are_named_x0_x1() -> None:
    class Two(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(2, 1)

        def forward(self, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return self.a(u * v).sum()

    u = torch.tensor([[1.0, 2.0]], requires_grad=True)
    v = torch.tensor([[3.0, 4.0]])
    model = Two()
    trace = gradtrace.trace(model, (u, v))
    np.testing.assert_allclose(trace.grads["x0"], (model.a.weight.detach() * v).numpy(), rtol=1e-6)
    assert set(trace.values) >= {"x0", "x1", "output", "loss"}
    assert "x1" not in trace.grads  # no grad required


def test_retain_grad_option_keeps_output_grad() -> None:
    trace = gradtrace.trace(nn.Linear(2, 2), torch.ones(1, 2), lambda y: (y * 3).sum(), retain_grad=True)
    np.testing.assert_array_equal(trace.grads["output"], [[3.0, 3.0]])


def test_max_nodes_refuses_before_backward() -> None:
    model = nn.Sequential(*[nn.Tanh() for _ in range(50)])
    with pytest.raises(TraceError) as raised:
        gradtrace.trace(model, torch.ones(2, requires_grad=True), max_nodes=20)
    assert raised.value.code == "too_many_nodes"
    assert raised.value.message == "the autograd graph has more than max_nodes=20 nodes"


def test_no_hook_left_behind_and_grad_mode_restored() -> None:
    net = Seed002Net()
    x = torch.tensor([0.3], requires_grad=True)
    # (under no_grad, a trace stops where a plain run stops, with PyTorch's error: issue 36)
    with torch.no_grad(), pytest.raises(RuntimeError, match="does not require grad"):
        gradtrace.trace(net, x, seed002_loss)
    assert torch.is_grad_enabled()
    for m in net.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks and not m._backward_hooks
    assert not x._post_accumulate_grad_hooks
    for p in net.parameters():
        assert not p._post_accumulate_grad_hooks
    assert not torch.overrides._get_current_function_mode_stack()
    # the same module traces again with identical results
    a = gradtrace.trace(Seed002Net(), torch.tensor([0.3], requires_grad=True), seed002_loss)
    b = gradtrace.trace(Seed002Net(), torch.tensor([0.3], requires_grad=True), seed002_loss)
    assert a.to_json() == b.to_json()


def test_bad_arguments_have_clear_errors() -> None:
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got int"):
        gradtrace.trace(3, torch.ones(1))
    with pytest.raises(TypeError, match=r"inputs must be tensors; inputs\[1\] is list"):
        gradtrace.trace(nn.Linear(1, 1), (torch.ones(1), [1.0]))
    with pytest.raises(ValueError, match=r"loss_fn\(output\) must return a scalar tensor, got shape \(2,\)"):
        gradtrace.trace(nn.Linear(1, 2), torch.ones(1), lambda y: y)


def test_non_finite_values_are_strings_and_stats_count_them() -> None:
    class Blow(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.tensor([1.0, 0.0, -1.0]))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x / self.w).sum()

    trace = gradtrace.trace(Blow(), torch.tensor([1.0, 1.0, 1.0]))
    text = trace.to_json()
    assert "NaN" not in text.replace('"NaN"', "") and "Infinity" not in text.replace(
        '"Infinity"', ""
    ).replace('"-Infinity"', "")
    grad = trace.doc.grads["w"]
    assert grad.values[1] in ("-Infinity", "Infinity", "NaN")
    assert grad.stats.inf + grad.stats.nan == 1 and grad.stats.numel == 3


def test_value_budget_governs_snapshots_only_final_grads_stay_exact() -> None:
    model = nn.Linear(64, 64)
    big = gradtrace.trace(model, torch.ones(32, 64))
    assert big.doc.grads["weight"].data is not None  # 4096 floats: base64
    arr = big.grads["weight"]
    assert arr.shape == (64, 64) and arr.dtype == np.float32
    small = gradtrace.trace(model, torch.ones(32, 64), value_budget=0)
    assert small.doc.limits.values_truncated > 0  # every per-event snapshot: stats only
    snapshots = [e.payload["after"] for e in small.events if e.kind == "grad_write"]
    assert snapshots and all(s["truncated"] and s["stats"]["numel"] for s in snapshots)
    # ... but the answer is kept, exactly, in memory and in the serialised trace
    assert np.array_equal(small.grads["weight"], model.weight.grad.numpy())
    assert np.array_equal(
        gradtrace.Trace.from_dict(small.to_dict()).grads["weight"], model.weight.grad.numpy()
    )
    assert not any(d.code == "final_values_truncated" for d in small.doc.analyses.diagnostics)


def test_a_model_too_big_for_the_final_limit_says_so_once(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(64, 64), nn.Linear(64, 64))
    trace = gradtrace.trace(model, torch.ones(2, 64), value_budget=0, final_value_limit=5000)
    [diag] = [d for d in trace.doc.analyses.diagnostics if d.code == "final_values_truncated"]
    assert "final_value_limit=5,000" in diag.message and diag.severity == "warning"
    cut = [name for name, v in trace.doc.grads.items() if v is not None and v.truncated]
    assert cut and trace.doc.limits.finals_truncated >= len(cut)
    for name, p in model.named_parameters():  # in memory: every gradient, exactly
        assert np.array_equal(trace.grads[name], p.grad.numpy()), name
    trace.save(tmp_path / "t.json")
    loaded = gradtrace.Trace.load(tmp_path / "t.json")
    with pytest.raises(ValueError, match="stats only"):
        loaded.grads  # noqa: B018 - not silently None


def test_import_gradtrace_does_not_import_torch() -> None:
    code = "import sys, gradtrace, gradtrace.trace; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_save_json_and_unknown_suffix(tmp_path) -> None:  # noqa: ANN001
    trace = gradtrace.trace(nn.Linear(1, 1), torch.ones(1))
    path = trace.save(tmp_path / "t.json")
    again = gradtrace.Trace.load(path)
    assert again.to_dict() == trace.to_dict()
    with pytest.raises(ValueError, match="cannot save a trace as '.txt'"):
        trace.save(tmp_path / "t.txt")


def test_a_saved_json_file_holds_the_bytes_to_json_bytes_gives(tmp_path) -> None:  # noqa: ANN001
    """Written block by block (a big trace is never whole in memory twice), the file is the
    very document: for the engine's blocks and for a loaded trace's."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))
    trace = gradtrace.trace(model, torch.randn(8, 64))
    assert len(trace.doc.tensor_data) > 1
    path = trace.save(tmp_path / "t.json")
    assert path.read_bytes() == trace.to_json_bytes()
    loaded = gradtrace.Trace.load(path)
    assert loaded.save(tmp_path / "again.json").read_bytes() == loaded.to_json_bytes() == path.read_bytes()


class _ConstantsEverywhere(nn.Module):
    """Tensors outside autograd reaching ops as plain, list and keyword arguments."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor([[1.0, -2.0]]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.tensor([[3.0, 4.0]])
        pad = torch.tensor([[5.0, 6.0]])
        shift = torch.tensor([[7.0, 8.0]])
        h = self.w * scale  # a plain argument
        both = torch.cat([h, pad, x], dim=0)  # in a list argument, after the one needing grad
        return torch.add(both, other=torch.cat([shift, shift, shift], dim=0))  # a keyword one


def test_tensors_needing_no_grad_get_dashed_edges_whatever_way_they_are_passed() -> None:
    model = _ConstantsEverywhere()
    x = torch.tensor([[0.5, 0.25]])
    trace = gradtrace.trace(model, x, lambda out: out.sum())
    doc = trace.doc
    by_id = {n.id: n for n in doc.graph.nodes}
    dashed = [(by_id[e.source], by_id[e.target].op) for e in doc.graph.edges if e.kind == "no_grad"]
    # one dashed edge per tensor each op consumed that needs no grad, in argument order
    assert [(leaf.kind, leaf.role, op) for leaf, op in dashed] == [
        ("tensor", "input", "MulBackward0"),
        ("tensor", "input", "CatBackward0"),
        ("tensor", "input", "CatBackward0"),
        ("tensor", "input", "AddBackward0"),
    ]
    assert [leaf.value.values for leaf, _ in dashed] == [[3.0, 4.0], [5.0, 6.0], [0.5, 0.25], [7.0, 8.0] * 3]
    assert dashed[2][0].tensor == "x"  # the model's input, named
    expected = _oracle(model, (x,), lambda out: out.sum())
    np.testing.assert_array_equal(trace.grads["w"], expected["w"].numpy())


def test_an_input_computed_from_other_tensors_is_no_leaf_and_its_grad_is_never_read() -> None:
    # the output of an earlier stage fed to the model: its .grad stays None (not a leaf), and
    # reading it made PyTorch warn; the trace lists no final gradient for it
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    stage = torch.randn(4, 3, requires_grad=True)
    x = stage * 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trace = gradtrace.trace(model, x, lambda out: out.sum())
    assert sorted(trace.doc.grads) == ["bias", "weight"]
    expected = _oracle(model, (x,), lambda out: out.sum())
    for name in ("weight", "bias"):
        np.testing.assert_array_equal(trace.grads[name], expected[name].numpy())


def test_grads_come_in_the_order_the_model_is_written() -> None:
    """trace.grads in named_parameters() order (the module order a reader expects), then the
    other named tensors; the serialised trace keeps its own (sorted) order."""
    from collections import OrderedDict

    torch.manual_seed(0)
    model = nn.Sequential(OrderedDict(z_in=nn.Linear(3, 4), a_out=nn.Linear(4, 2)))
    x = torch.randn(2, 3, requires_grad=True)
    trace = gradtrace.trace(model, x)
    names = [n for n, _ in model.named_parameters()]
    assert (
        list(trace.grads)[: len(names)] == names == ["z_in.weight", "z_in.bias", "a_out.weight", "a_out.bias"]
    )
    assert set(trace.grads) == set(trace.doc.grads)
    model.zero_grad(set_to_none=True)  # (the traced run left its .grads, as a plain run does)
    model(x).sum().backward()  # the oracle: plain PyTorch
    for name, p in model.named_parameters():
        assert np.array_equal(trace.grads[name], p.grad.numpy()), name
