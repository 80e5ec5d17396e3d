"""Final gradients written behind their version counter, and the memory custom Functions save,
against plain PyTorch (the oracle: the same model run without gradtrace)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from engine_checks import packed_storage_bytes
from torch import nn

import gradtrace
from gradtrace.engine.memory import is_wrapped_number


def _triple_through_data(p: torch.Tensor) -> None:
    """A post-accumulate hook that scales ``.grad`` through ``.data`` (no version bump)."""
    assert p.grad is not None
    p.grad.data.mul_(3)


def _double_through_data(g: torch.Tensor) -> None:
    """A tensor hook that doubles the gradient through ``.data`` and returns None."""
    g.data.mul_(2)


def _mlp(hook: Callable[[torch.Tensor], None] | None) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 1))
    if hook is not None:
        for p in model.parameters():
            p.register_post_accumulate_grad_hook(hook)
    return model


def _plain_grads(model: nn.Module, x: torch.Tensor) -> dict[str, np.ndarray]:
    model(x).sum().backward()
    return {name: p.grad.numpy().copy() for name, p in model.named_parameters() if p.grad is not None}


def _bit_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("rows", [1, 40])  # tiny gradients (JSON lists) and base64 blocks
def test_a_grad_written_through_data_is_the_final_grad_in_json(rows: int) -> None:
    x = torch.randn(rows, 4, generator=torch.Generator().manual_seed(1))
    plain = _plain_grads(_mlp(_triple_through_data), x)
    trace = gradtrace.trace(_mlp(_triple_through_data), x)
    loaded = gradtrace.Trace.from_json(trace.to_json())
    for name, grad in plain.items():
        assert _bit_equal(trace.grads[name], grad), name
        assert _bit_equal(loaded.grads[name], grad), name
    # every firing says it changed .grad; its "grad" payload is what the hook was given (a third)
    fired = [e for e in loaded.events if e.kind == "post_accumulate_grad"]
    assert len(fired) == len(plain)
    for event in fired:
        assert event.payload["changed"] is True
        before = loaded.array(event.payload["grad"])
        assert _bit_equal(before * 3, plain[event.target])  # (×3 of a float is exact here)
    # the engine's own write event shows the value written, before the hook
    writes = {
        loaded.doc.graph.nodes[int(e.target[1:])].tensor: e for e in loaded.events if e.kind == "grad_write"
    }
    assert _bit_equal(loaded.array(writes["0.weight"].payload["after"]) * 3, plain["0.weight"])


def test_a_hook_that_leaves_grad_alone_is_unchanged() -> None:
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(2))
    seen: list[float] = []
    plain = _plain_grads(_mlp(None), x)
    trace = gradtrace.trace(_mlp(lambda p: seen.append(float(p.grad.sum()))), x)
    loaded = gradtrace.Trace.from_json(trace.to_json())
    assert all(_bit_equal(loaded.grads[n], g) for n, g in plain.items())
    assert [e.payload["changed"] for e in loaded.events if e.kind == "post_accumulate_grad"] == [False] * 6


def test_a_tensor_hook_writing_through_data_on_an_input() -> None:
    """A leaf input's tensor hook doubling the gradient through ``.data``: x.grad doubled."""

    def run(trace: bool) -> tuple[np.ndarray, gradtrace.Trace | None]:
        model = _mlp(None)
        x = torch.randn(20, 4, generator=torch.Generator().manual_seed(3), requires_grad=True)
        x.register_hook(_double_through_data)
        if trace:
            t = gradtrace.trace(model, x)
            return x.grad.numpy().copy(), t
        model(x).sum().backward()
        return x.grad.numpy().copy(), None

    plain, _ = run(False)
    traced, t = run(True)
    assert t is not None and _bit_equal(traced, plain)
    loaded = gradtrace.Trace.from_json(t.to_json())
    assert _bit_equal(loaded.grads["x"], plain)
    (hooked,) = [e for e in loaded.events if e.kind == "tensor_hook"]
    assert hooked.payload["changed"] is True
    (write,) = [e for e in loaded.events if e.kind == "grad_write" and e.target == hooked.node]
    assert _bit_equal(loaded.array(write.payload["after"]), plain)


# ---- saved-tensor memory of custom Functions ----------------------------------------------


class _SavesABuffer(torch.autograd.Function):
    """Saves its inputs, a None and a 256×256 float32 buffer (262,144 B) with save_for_backward."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        buffer = torch.ones(256, 256)
        ctx.save_for_backward(x, None, w, buffer)
        return x * w

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        x, _none, w, buffer = ctx.saved_tensors
        return g * w * buffer[0, 0], (g * x).sum(0)


class _Custom(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.w = nn.Parameter(torch.full((4,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(_SavesABuffer.apply(self.lin(x), self.w)).sum()


class _Scalars(nn.Module):
    """Python numbers in mul, add, pow and a 0-dim float64 tensor: the ops save the numbers
    as wrapped 0-dim tensors (not packed by saved-tensor hooks), the tensor as itself."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4, dtype=torch.float64)
        self.scale = torch.tensor(1.5, dtype=torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x.double()) * 0.5 + 2.0
        return ((h**3) * 3 - 1).sum() * self.scale * (0.5 + 1j).real


def _after_forward(trace: gradtrace.Trace) -> int:
    """Live saved bytes at the end of the forward pass."""
    forward = trace.doc.passes[0]
    points = [p.live_bytes for p in trace.doc.analyses.memory.timeline if p.seq <= forward.last_seq]
    return points[-1] if points else 0


@pytest.mark.parametrize(
    "make",
    [
        lambda: _Custom(),
        lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1)),
        lambda: _Scalars(),
    ],
    ids=["custom-function", "mlp", "scalars"],
)
def test_saved_memory_is_what_saved_tensor_hooks_see(make: Callable[[], nn.Module]) -> None:
    torch.manual_seed(0)
    model = make()
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(4))
    expected = packed_storage_bytes(lambda: model(x).sum())
    model(x).sum().backward()
    plain = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    trace = gradtrace.trace(model, x, lambda o: o.sum())
    memory = trace.doc.analyses.memory
    assert _after_forward(trace) == memory.peak_bytes == expected
    assert memory.final_bytes == 0  # the backward freed all of it, custom Function included
    for name, grad in plain.items():
        assert _bit_equal(trace.grads[name], grad.numpy()), name


def test_the_custom_function_node_shows_what_it_saved() -> None:
    torch.manual_seed(0)
    trace = gradtrace.trace(_Custom(), torch.randn(3, 4, generator=torch.Generator().manual_seed(5)))
    (node,) = [n for n in trace.doc.graph.nodes if n.op == "_SavesABufferBackward"]
    assert [s.name for s in node.saved] == [f"saved_tensors[{k}]" for k in range(4)]
    assert node.saved[1].value is None and node.saved[1].scalar is None  # the None it saved
    assert node.saved[3].value is not None and node.saved[3].value.shape == [256, 256]
    (held,) = [m for m in trace.doc.analyses.memory.nodes if m.node == node.id]
    assert held.saved_bytes == 3 * 4 * 4 + 4 * 4 + 256 * 256 * 4  # x, w, buffer: 262,224 B
    assert held.released_seq is not None


def test_a_wrapped_number_is_told_from_a_real_0_dim_tensor() -> None:
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    for other, wrapped in [
        (0.5, True),
        (3, True),
        (1 + 2j, True),
        (torch.tensor(0.5, dtype=torch.float64), False),
        (torch.tensor(3), False),
        (torch.tensor(1 + 2j, dtype=torch.complex128), False),
    ]:
        saved = (x * other).grad_fn._saved_other  # type: ignore[union-attr]
        assert is_wrapped_number(saved) is wrapped, other


# ---- writes through .data inside module forward hooks ----------------------------------------


def _halve_weight(module: nn.Module, args: tuple) -> None:
    """Weight clipping as it is often written: a forward pre-hook writing through ``.data``."""
    module.weight.data.mul_(0.5)


def _double_output(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
    output.data.mul_(2)


def _hooked_mlp(seen: list[torch.Tensor]) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 1))
    model[0].register_forward_pre_hook(_halve_weight)
    model[0].register_forward_hook(_double_output)
    model[1].register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach().clone()))
    return model


def test_data_writes_in_module_forward_hooks_are_seen() -> None:
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(6))
    plain_seen: list[torch.Tensor] = []
    plain_model = _hooked_mlp(plain_seen)
    plain = _plain_grads(plain_model, x)
    traced_seen: list[torch.Tensor] = []
    trace = gradtrace.trace(_hooked_mlp(traced_seen), x)
    loaded = gradtrace.Trace.from_json(trace.to_json())
    for name, grad in plain.items():
        assert _bit_equal(loaded.grads[name], grad), name
    fired = {(e.kind, e.target): e for e in loaded.events if e.hook is not None}
    assert fired[("module_forward_pre", "0")].payload["changed"] is True  # wrote the weight
    assert fired[("module_forward", "0")].payload["changed"] is True  # wrote the output
    after = fired[("module_forward_pre", "1")]
    assert after.payload["changed"] is False
    # the next module was given the doubled output, and its event says so
    (given,) = after.payload["inputs"]
    assert _bit_equal(loaded.array(given), plain_seen[0].numpy())
    assert _bit_equal(traced_seen[0].numpy(), plain_seen[0].numpy())
    (weight,) = [n for n in loaded.doc.graph.nodes if n.tensor == "0.weight" and n.kind == "tensor"]
    assert _bit_equal(loaded.array(weight.value), plain_model[0].weight.detach().numpy())
