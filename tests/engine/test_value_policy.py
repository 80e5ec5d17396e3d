"""The value policy on models nobody wrote for gradtrace (issue 8): with DEFAULT options,
every final gradient is present, equal to a clean run with no hooks (the oracle: plain
``torch.autograd.grad`` on an identical copy of the model), and present in the serialised
JSON exactly (``data`` decoded in its own dtype, compared bit for bit). Per-event snapshots
past the budget show as ``truncated: true`` objects with stats, never null.

The models run in float64, so "exact" means 1e-12, not float32's 1e-6.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from golden_util import inlined
from torch import nn

import gradtrace

torch.set_default_dtype(torch.float32)  # the models below ask for float64 themselves


class BasicBlock(nn.Module):
    """A resnet basic block: conv-bn-relu-conv-bn plus a (projected) shortcut."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNetStyle(nn.Module):
    """resnet18's layout (stem, four stages of two basic blocks, pool, fc) at any width."""

    def __init__(self, width: int = 64, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        stages, c_in = [], width
        for k, stride in enumerate((1, 2, 2, 2)):
            c_out = width * 2**k
            stages += [BasicBlock(c_in, c_out, stride), BasicBlock(c_out, c_out, 1)]
            c_in = c_out
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(c_in, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.stages(self.stem(x))
        return self.fc(features.mean(dim=(2, 3)))


class LSTMTagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 12, num_layers=2, batch_first=True)
        self.head = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _state = self.lstm(x)
        return self.head(out[:, -1])


def tiny_transformer() -> nn.Module:
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)


def chain(layers: int) -> nn.Module:
    """Linear layers near the identity: the gradient neither vanishes nor explodes over 2,000."""
    g = torch.Generator().manual_seed(5)
    model = nn.Sequential(*[nn.Linear(3, 3) for _ in range(layers)])
    with torch.no_grad():
        for layer in model:
            layer.weight.copy_(torch.eye(3) + 0.01 * torch.randn(3, 3, generator=g))
            layer.bias.copy_(0.01 * torch.randn(3, generator=g))
    return model


def cross_entropy(y: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(y, torch.arange(y.shape[0]) % y.shape[1])


def square_mean(y: torch.Tensor) -> torch.Tensor:
    return y.square().mean()


def clean_grads(model: nn.Module, x: torch.Tensor, loss_fn: Callable) -> dict[str, np.ndarray]:
    """The oracle: plain autograd.grad on the model, no hooks, nothing of gradtrace."""
    named = dict(model.named_parameters())
    grads = torch.autograd.grad(loss_fn(model(x)), list(named.values()), allow_unused=True)
    return {n: g.numpy() for n, g in zip(named, grads, strict=True) if g is not None}


WIRE = {"float64": "<f8", "float32": "<f4"}


def decode(value: dict[str, Any], tensor_data: list[str]) -> np.ndarray:
    """A serialised TensorValue's numbers (``data``: an index into the document's
    ``tensor_data``), read independently of gradtrace's own decoder."""
    assert value.get("truncated") is False, "a final gradient is never cut at default options"
    wire = WIRE[value["dtype"]]
    if value.get("values") is not None:  # (event payloads are free-form: no null keys)
        flat = np.array(value["values"], dtype=wire)
    else:
        flat = np.frombuffer(base64.b64decode(tensor_data[value["data"]]), dtype=wire)
    return flat.reshape(value["shape"])


def check_every_final_grad(
    model: nn.Module, x: torch.Tensor, loss_fn: Callable, dtype: torch.dtype = torch.float64
) -> gradtrace.Trace:
    model = model.to(dtype)
    oracle_model = copy.deepcopy(model)  # same weights, same BatchNorm running stats
    trace = gradtrace.trace(model, x, loss_fn)  # DEFAULT options
    oracle = clean_grads(oracle_model, x, loss_fn)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert set(oracle) == set(names), "every parameter gets a gradient in these models"
    wire = json.loads(trace.to_json())
    for name in names:
        in_memory = trace.grads[name]
        assert in_memory is not None and in_memory.dtype == oracle[name].dtype, name
        atol = 1e-12 if dtype == torch.float64 else 1e-6
        np.testing.assert_allclose(in_memory, oracle[name], rtol=0, atol=atol, err_msg=name)
        serialised = decode(wire["grads"][name], wire["tensor_data"])
        assert serialised.tobytes() == in_memory.tobytes(), f"{name}: serialised bit for bit"
    assert not [d for d in wire["analyses"]["diagnostics"] if d["code"] == "final_values_truncated"]
    assert wire["limits"]["finals_truncated"] == 0
    return trace


def snapshots(wire: dict[str, Any]) -> list[dict[str, Any] | None]:
    """Every per-event TensorValue: node values, saved tensors, edge gradients."""
    out: list[dict[str, Any] | None] = []
    for node in wire["graph"]["nodes"]:
        out += [node["value"]] + [s["value"] for s in node["saved"] if s["value"] is not None]
    for edge in wire["graph"]["edges"]:
        out += [g["value"] for g in edge["grads"]]
    return out


def check_truncated_are_explicit(wire: dict[str, Any]) -> int:
    cut = 0
    for value in snapshots(wire):
        if value is None:
            continue
        assert value["stats"]["numel"] == int(np.prod(value["shape"]))
        if value["truncated"]:
            cut += 1
            assert value["data"] is None and value["values"] is None
            if value["stats"]["numel"]:
                assert value["stats"]["norm"] is not None or value["stats"]["nan"] + value["stats"]["inf"]
    return cut


def test_resnet_style_conv_net_with_batchnorm() -> None:
    x = torch.randn(2, 3, 32, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    trace = check_every_final_grad(ResNetStyle(width=16), x, cross_entropy)
    wire = trace.to_dict()
    # snapshots past the default budget are explicit stats-only objects, never null
    cut = check_truncated_are_explicit(wire)
    assert cut > 0 and wire["limits"]["values_truncated"] > 0
    data_edges = [e for e in wire["graph"]["edges"] if e["kind"] != "no_grad" and e["grads"]]
    assert data_edges and all(g["value"]["stats"] for e in data_edges for g in e["grads"] if g["value"])


def test_lstm() -> None:
    x = torch.randn(3, 5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    trace = check_every_final_grad(LSTMTagger(), x, cross_entropy)
    check_truncated_are_explicit(trace.to_dict())


def test_tiny_transformer_encoder() -> None:
    x = torch.randn(2, 7, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    trace = check_every_final_grad(tiny_transformer(), x, square_mean)
    check_truncated_are_explicit(trace.to_dict())


@pytest.mark.slow
def test_two_thousand_layer_chain() -> None:
    x = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    trace = check_every_final_grad(chain(2000), x, square_mean)
    assert len(trace.doc.grads) == 4000  # weights and biases (x does not require grad)
    first = trace.grads["0.weight"]
    assert np.abs(first).max() > 1e-3  # the first layer's gradient is a real, non-zero number


@pytest.mark.slow
def test_defaults_fit_resnet18_at_2x3x32x32() -> None:
    """resnet18's real widths (11.7 M parameters), float32 as trained: every final gradient
    serialised exactly and every edge's gradient with its stats, at default options."""
    x = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(6))
    trace = check_every_final_grad(ResNetStyle(width=64, classes=1000), x, cross_entropy, torch.float32)
    wire = trace.to_dict()
    check_truncated_are_explicit(wire)
    grads = [g["value"] for e in wire["graph"]["edges"] for g in e["grads"]]
    assert grads and all(v is None or v["stats"]["norm"] is not None for v in grads)


@pytest.mark.slow
def test_defaults_fit_a_12_layer_transformer_encoder() -> None:
    layer = nn.TransformerEncoderLayer(256, 8, dim_feedforward=1024, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=12, enable_nested_tensor=False)
    x = torch.randn(2, 16, 256, generator=torch.Generator().manual_seed(7))
    trace = check_every_final_grad(model, x, square_mean, torch.float32)
    check_truncated_are_explicit(trace.to_dict())


def test_to_dict_is_json_ready_and_a_copy() -> None:
    x = torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(4))
    trace = gradtrace.trace(tiny_transformer(), x, square_mean)
    data = trace.to_dict()
    assert json.loads(json.dumps(data, allow_nan=False)) == json.loads(trace.to_json())
    data["grads"].clear()
    assert trace.to_dict()["grads"]  # changing the copy does not change the trace
    loaded = gradtrace.Trace.from_dict(trace.to_dict())
    for name, grad in trace.grads.items():
        got = loaded.grads[name]
        assert (grad is None and got is None) or np.array_equal(got, grad), name


def test_a_version_1_trace_is_refused_clearly() -> None:
    data = gradtrace.trace(nn.Linear(2, 1), torch.ones(1, 2)).to_dict()
    data["schema_version"] = 1
    with pytest.raises(ValueError, match="schema_version 1.*record the trace again"):
        gradtrace.Trace.from_dict(data)


def _as_version_2(doc: dict[str, Any]) -> dict[str, Any]:
    """A schema-3 document as gradtrace 0.1 wrote it: each value's base64 in its own
    ``data``, no ``tensor_data``."""
    return {**inlined(doc), "schema_version": 2}


def test_a_version_2_trace_reads_as_the_version_3_trace_it_stands_for() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 2))
    trace = gradtrace.trace(model, torch.randn(4, 8), lambda out: out.pow(2).sum())
    new = trace.to_dict()
    old = _as_version_2(new)
    assert "tensor_data" not in old and isinstance(old["grads"]["0.weight"]["data"], str)
    saved_by_0_1 = json.dumps(old)
    loaded = gradtrace.Trace.from_json(saved_by_0_1)
    assert json.loads(saved_by_0_1) == old  # (the caller's data is not changed)
    for name, grad in trace.grads.items():
        assert np.array_equal(loaded.grads[name], grad), name
    # the same document, each distinct block once (indices in the order first met)
    assert loaded.doc.schema_version == 3
    assert sorted(loaded.doc.tensor_data) == sorted(set(new["tensor_data"]))
    node = next(n for n in loaded.doc.graph.nodes if n.value is not None and n.value.data is not None)
    assert loaded.array(node.value).shape == tuple(node.value.shape)


def float64_spec() -> dict[str, Any]:
    return {
        "spec_version": 1,
        "title": "A float64 Linear, 64 x 64",
        "seed": 3,
        "dtype": "float64",
        "modules": {"fc": {"type": "Linear", "in_features": 64, "out_features": 64}},
        "inputs": {"x": {"shape": [8, 64], "init": "randn"}},
        "forward": ["y = fc(x)", "loss = (y ** 2).sum()"],
    }


def test_a_float64_spec_is_never_rounded_to_float32() -> None:
    """dL/dW = 2 yᵀx for loss = Σy²: rebuilt in numpy float64 from the trace's own exact x
    and y, it agrees to float64 precision (a float32 rounding anywhere would show ~1e-7)."""
    trace = gradtrace.trace_spec(float64_spec())
    wire = json.loads(trace.to_json())
    blocks = wire["tensor_data"]
    x, y = decode(wire["values"]["x"], blocks), decode(wire["values"]["y"], blocks)
    grad = decode(wire["grads"]["fc.weight"], blocks)
    assert grad.dtype == np.float64 and grad.tobytes() == trace.grads["fc.weight"].tobytes()
    np.testing.assert_allclose(grad, 2 * y.T @ x, rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(
        decode(wire["grads"]["fc.bias"], blocks), 2 * y.sum(axis=0), rtol=1e-13, atol=1e-12
    )
    [leaf] = [n["id"] for n in wire["graph"]["nodes"] if n["kind"] == "tensor" and n["tensor"] == "fc.weight"]
    [write] = [e for e in wire["events"] if e["kind"] == "grad_write" and e["target"] == leaf]
    after = write["payload"]["after"]  # the per-event snapshot is exact too (within the budget)
    assert decode({"truncated": False, **after}, blocks).tobytes() == grad.tobytes()


def test_final_grad_norms_are_torchs_norms_nan_included() -> None:
    """analyses.grad_norms' final entries (pass_index null) are read off the final values'
    stats; where a gradient holds NaN the norm is NaN, as torch says."""
    model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2)).double()
    oracle_model = copy.deepcopy(model)
    x = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2), requires_grad=True)
    trace = gradtrace.trace(model, x, square_mean)
    finals = {g.name: g.norm for g in trace.doc.analyses.grad_norms if g.pass_index is None}
    # the oracle: plain autograd.grad on an identical copy, no hooks
    named = dict(oracle_model.named_parameters())
    x_copy = x.detach().clone().requires_grad_()
    grads = torch.autograd.grad(square_mean(oracle_model(x_copy)), [*named.values(), x_copy])
    expected = dict(zip([*named, "x"], grads, strict=True))
    assert set(finals) == set(expected)
    for name, grad in expected.items():
        assert finals[name] == pytest.approx(float(torch.linalg.vector_norm(grad)), rel=1e-12), name
    nan_input = torch.tensor([[1.0, float("nan"), 0.0, 2.0]], dtype=torch.float64, requires_grad=True)
    trace = gradtrace.trace(model, nan_input, square_mean)
    finals = {g.name: g.norm for g in trace.doc.analyses.grad_norms if g.pass_index is None}
    assert finals["0.weight"] == "NaN" and finals["x"] == "NaN"
