"""analyses.memory against PyTorch: the storages its saved-tensor hooks see, and what a final
backward frees (seed 001: backward frees the graph; retain_graph keeps it)."""

from __future__ import annotations

import pytest
import torch
from engine_checks import packed_storage_bytes
from torch import nn

import gradtrace
from gradtrace.engine.memory import SavedMemory
from gradtrace.engine.saved_attributes import saved_tensor_hooks_active
from gradtrace.examples import get_example


def test_retained_graph_is_held_and_the_last_backward_frees_it() -> None:
    trace = gradtrace.trace_spec(get_example("retain-graph-accumulation"))
    memory = trace.doc.analyses.memory
    x = torch.tensor(1.0, requires_grad=True)
    assert memory.peak_bytes == packed_storage_bytes(lambda: x**2) == 4  # PowBackward0 keeps x
    backwards = [p for p in trace.doc.passes if p.phase == "backward"]
    assert len(backwards) == 2

    def live_after(seq: int) -> int:
        points = [p.live_bytes for p in memory.timeline if p.seq <= seq]
        return points[-1] if points else 0

    assert live_after(backwards[0].last_seq) == 4  # retain_graph=True: still held
    assert live_after(backwards[1].last_seq) == 0  # the final backward freed it
    assert memory.final_bytes == 0
    (node,) = memory.nodes
    assert trace.doc.graph.nodes[int(node.node[1:])].op == "PowBackward0"
    assert (
        node.released_seq is not None and backwards[1].first_seq < node.released_seq <= backwards[1].last_seq
    )


def test_freed_graph_is_freed_by_the_first_backward() -> None:
    trace = gradtrace.trace_spec(get_example("freed-graph-error"))
    memory = trace.doc.analyses.memory
    first = next(p for p in trace.doc.passes if p.phase == "backward")
    assert memory.peak_bytes == 4
    (node,) = memory.nodes
    assert first.first_seq < node.released_seq <= first.last_seq
    assert [p.live_bytes for p in memory.timeline] == [4, 0]
    assert any(e.kind == "error" for e in trace.doc.events)  # the second backward: PyTorch refused


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3), nn.ReLU(), nn.Linear(3, 2))


def _convnet() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 5 * 5, 2)
    )


@pytest.mark.parametrize(
    ("make", "shape"),
    [(_mlp, (5, 4)), (_convnet, (2, 3, 5, 5))],
    ids=["mlp", "convnet"],
)
def test_peak_is_the_storage_pytorch_saved_and_nothing_is_held_after(make, shape) -> None:
    torch.manual_seed(1)
    x, y = torch.randn(*shape), torch.randn(shape[0], 2)

    def loss_fn(out: torch.Tensor) -> torch.Tensor:
        return ((out - y) ** 2).mean()

    oracle_model = make()
    expected = packed_storage_bytes(lambda: loss_fn(oracle_model(x)))
    trace = gradtrace.trace(make(), x, loss_fn)
    memory = trace.doc.analyses.memory
    assert memory.peak_bytes == expected
    assert memory.final_bytes == 0
    assert memory.timeline[-1].live_bytes == 0
    # every node that saved something is released inside the backward, at its own node_post
    events = trace.doc.events
    for node in memory.nodes:
        post = events[node.released_seq]
        assert (post.kind, post.node) == ("node_post", node.node)
    # per node: shared storage counted once per node, never more than the whole graph holds
    assert all(0 < n.saved_bytes <= memory.peak_bytes for n in memory.nodes)


def _saved_tensor_nodes(root: torch.Tensor) -> list[tuple[object, list[tuple[str, torch.Tensor]]]]:
    """Every node behind ``root`` that saved a tensor, with its saved (attribute, tensor)s."""
    out, seen, stack = [], set(), [root.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(n for n, _ in node.next_functions)
        saved = []
        for attr in sorted(a for a in dir(node) if a.startswith("_saved_")):
            value = getattr(node, attr)
            if isinstance(value, torch.Tensor):
                saved.append((attr, value))
            elif isinstance(value, tuple | list) and value and isinstance(value[0], torch.Tensor):
                saved += [(f"{attr}[{k}]", t) for k, t in enumerate(value)]
        if saved:
            out.append((node, saved))
    return out


def _oracle_freed(node: object, attr: str) -> bool:
    """PyTorch's own answer: reading a released saved value raises."""
    try:
        getattr(node, attr.split("[", 1)[0])
    except RuntimeError:
        return True
    return False


@pytest.mark.parametrize("retain", [False, True])
def test_freed_probe_agrees_with_reading_the_saved_tensor(retain: bool) -> None:
    """after_backward's probe (the raw SavedVariable's data, or the read itself) says
    "freed" exactly where reading the saved tensor raises, for single saved tensors, saved
    outputs, lists of saved tensors, convolutions and norms."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 5, 5, requires_grad=True)
    conv = nn.Conv2d(3, 4, 3)
    h = nn.functional.layer_norm(conv(x).sigmoid(), [3, 3])
    picked = h[torch.tensor([1, 0])]  # IndexBackward0: a list of saved indices
    joined = torch.cat([picked.exp(), picked.tanh()], dim=1)
    loss = (joined @ torch.randn(3, 2)).pow(2).sum()
    nodes = _saved_tensor_nodes(loss)
    assert {"IndexBackward0", "SigmoidBackward0", "ConvolutionBackward0"} <= {n.name() for n, _ in nodes}
    memory = SavedMemory()
    for k, (node, saved) in enumerate(nodes):
        memory.saved(f"n{k}", node, k, saved)
    ids = [f"n{k}" for k in range(len(nodes))]
    assert not any(memory._freed(i) for i in ids)
    loss.backward(retain_graph=retain)
    for k, (node, saved) in enumerate(nodes):
        assert memory._freed(ids[k]) == _oracle_freed(node, saved[0][0]) == (not retain), node.name()


def test_saved_tensor_hooks_active_sees_every_way_of_turning_them_on() -> None:
    # NOTE: private PyTorch API underneath; this test is the canary for a PyTorch change.
    assert not saved_tensor_hooks_active()
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        assert saved_tensor_hooks_active()
    with torch.autograd.graph.save_on_cpu():
        assert saved_tensor_hooks_active()
    assert not saved_tensor_hooks_active()


class _CountingHooks:
    """saved_tensors_hooks that count their unpacks (user code gradtrace must not run)."""

    def __init__(self) -> None:
        self.unpacked = 0

    def __call__(self) -> torch.autograd.graph.saved_tensors_hooks:
        return torch.autograd.graph.saved_tensors_hooks(lambda t: t, self._unpack)

    def _unpack(self, t: torch.Tensor) -> torch.Tensor:
        self.unpacked += 1
        return t


class _PartlyHooked(nn.Module):
    def __init__(self, hooks: _CountingHooks) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 1)
        self.hooks = hooks

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self.hooks():
            h = torch.tanh(self.a(x))
        return self.b(h * x)


# (session reads the non-leaf input's .grad, and PyTorch warns: not what this test is about)
@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
def test_saved_tensors_under_hooks_are_never_unpacked_and_the_others_are_read() -> None:
    """Nodes made inside a saved_tensors_hooks block, and an input's history made under hooks
    before the trace (discovered later, by a module's pre-hook), say "packed" without running
    the unpack hook; nodes made outside show their saved values."""

    def run(trace: bool) -> tuple[int, gradtrace.Trace | None]:
        hooks = _CountingHooks()
        base = torch.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
        with hooks():
            x = torch.sigmoid(base)  # SigmoidBackward0 saves its result under the hooks
        model = _PartlyHooked(hooks)
        if not trace:
            model(x).sum().backward()
            return hooks.unpacked, None
        result = gradtrace.trace(model, x, lambda out: out.sum())
        return hooks.unpacked, result

    clean_unpacks, _ = run(trace=False)
    unpacks, trace = run(trace=True)
    assert trace is not None
    assert unpacks == clean_unpacks > 0  # only the backward unpacked them, as without gradtrace
    saved = {n.op: n.saved for n in trace.doc.graph.nodes if n.kind == "op" and n.saved}
    packed = "saved_tensors_hooks pack hook"
    for op in ("SigmoidBackward0", "TanhBackward0"):
        assert [s.name for s in saved[op]] == ["_saved_result"], op
        assert packed in str(saved[op][0].scalar) and saved[op][0].value is None, op
    mul = {s.name: s for s in saved["MulBackward0"]}
    assert mul["_saved_self"].value is not None and mul["_saved_other"].value is not None
    assert not any(packed in str(s.scalar) for s in saved["MulBackward0"])
