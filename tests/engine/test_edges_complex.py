"""Complex numbers in a trace: complex64/complex128 gradients and values serialised like every
other dtype (their own little-endian bytes; stats of the magnitude, ``stats.of``), against plain
PyTorch (the oracle: the same model run without gradtrace)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

import gradtrace


class _Phases(nn.Module):
    """Complex parameters of both sizes (a base64 block and a tiny JSON list), a complex
    Linear, and real parameters beside them."""

    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = nn.Parameter(torch.randn(40, dtype=dtype, generator=g))
        self.v = nn.Parameter(torch.randn(3, dtype=dtype, generator=g))
        self.mix = nn.Linear(40, 6, dtype=dtype)
        self.out = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.mix(x.to(self.w.dtype) * self.w)
        real = self.out(z.abs().float())
        return real.pow(2).sum() + (self.v * self.v.conj()).real.sum() + z.conj().imag.sum().float()


def _model(dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(1)
    return _Phases(dtype)


def _x() -> torch.Tensor:
    return torch.randn(5, 40, generator=torch.Generator().manual_seed(2))


def _bit_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=["complex64", "complex128"])
def test_complex_grads_round_trip_bit_equal(dtype: torch.dtype) -> None:
    model = _model(dtype)
    model(_x()).backward()
    plain = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    trace = gradtrace.trace(_model(dtype), _x())
    loaded = gradtrace.Trace.from_json(trace.to_json())
    again = gradtrace.Trace.from_dict(json.loads(trace.to_json_bytes()))
    wire = str(dtype).removeprefix("torch.")
    for name, grad in plain.items():
        assert _bit_equal(trace.grads[name], grad), name
        assert _bit_equal(loaded.grads[name], grad), name
        assert _bit_equal(again.grads[name], grad), name
        value = loaded.doc.grads[name]
        assert value is not None and not value.truncated
        if np.iscomplexobj(grad):
            assert value.dtype == wire and value.stats.of == "magnitude"
            magnitude = np.abs(grad.astype(np.complex128))
            assert value.stats.max == pytest.approx(float(magnitude.max()), rel=1e-6)
            assert value.stats.norm == pytest.approx(float(np.linalg.norm(magnitude)), rel=1e-6)
        else:
            assert "of" not in json.loads(trace.to_json())["grads"][name]["stats"]  # (not written)
    # the tiny one is a JSON list of (real, imaginary) pairs; the others base64 blocks
    assert loaded.doc.grads["v"].values is not None and len(loaded.doc.grads["v"].values) == 6
    assert loaded.doc.grads["w"].data is not None
    # per-event snapshots of complex tensors carry numbers too (the mix layer's output)
    complex_nodes = [n for n in loaded.doc.graph.nodes if n.dtype == wire and n.value is not None]
    assert complex_nodes and all(not n.value.truncated for n in complex_nodes)
    for node in complex_nodes:
        assert loaded.array(node.value).dtype == np.dtype(wire)
    # the final grad norm of a complex parameter is torch's
    norms = {g.name: g.norm for g in loaded.doc.analyses.grad_norms if g.pass_index is None}
    assert norms["w"] == pytest.approx(
        float(torch.linalg.vector_norm(torch.from_numpy(plain["w"]))), rel=1e-6
    )


def test_a_conjugated_view_has_its_own_numbers() -> None:
    """``z`` and ``z.conj()`` share memory, layout and version: each is summarized as itself."""
    from gradtrace.engine.summarize import Summarizer
    from gradtrace.trace import tensor_array

    z = torch.randn(30, dtype=torch.complex64, generator=torch.Generator().manual_seed(3))
    s = Summarizer()
    plain, conj = s(z), s(z.conj())
    s.finalize()
    assert _bit_equal(tensor_array(plain, s.tensor_data), z.numpy())
    assert _bit_equal(tensor_array(conj, s.tensor_data), z.conj().resolve_conj().numpy())


def test_compare_finds_the_factor_of_complex_gradients() -> None:
    def run(factor: float) -> gradtrace.Trace:
        return gradtrace.trace(_model(torch.complex64), _x(), lambda loss: loss * factor)

    diff = gradtrace.compare(run(1.0), run(2.0))
    by_name = {d.name: d for d in diff.grads}
    assert by_name["w"].status == "changed" and by_name["w"].ratio == pytest.approx(2.0)
    assert by_name["v"].ratio == 2.0
