"""The model's own autograd-node hooks (``grad_fn.register_prehook``/``register_hook``) recorded
like its module and tensor hooks: wrapped in place while tracing, an event where each fires
with what it saw and returned, restored exactly afterwards. The oracle: the same model run in
plain PyTorch (its gradients, and what the hooks saw there)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

import gradtrace

Seen = list[tuple[str, list[torch.Tensor]]]


def _hooks(seen: Seen) -> tuple[Any, Any, Any]:
    """A pre-hook doubling the gradient, a post-hook halving the inputs' gradients, and an
    observer returning None: each notes what it was given."""

    def doubling(grad_outputs: tuple) -> tuple:
        seen.append(("doubling", [g.clone() for g in grad_outputs]))
        return (grad_outputs[0] * 2,)

    def halving(grad_inputs: tuple, grad_outputs: tuple) -> tuple:
        seen.append(("halving", [g.clone() for g in grad_inputs if g is not None]))
        return tuple(None if g is None else g * 0.5 for g in grad_inputs)

    def watching(grad_outputs: tuple) -> None:
        seen.append(("watching", [g.clone() for g in grad_outputs]))

    return doubling, halving, watching


class _HooksInForward(nn.Module):
    def __init__(self, seen: Seen) -> None:
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.b = nn.Linear(4, 2)
        self.doubling, self.halving, self.watching = _hooks(seen)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.a(x))
        h.grad_fn.register_prehook(self.doubling)
        h.grad_fn.register_hook(self.halving)
        out = self.b(h)
        out.grad_fn.register_prehook(self.watching)
        return out


def _model(seen: Seen) -> nn.Module:
    torch.manual_seed(0)
    return _HooksInForward(seen)


X = torch.randn(5, 3, generator=torch.Generator().manual_seed(1))


def _loss(out: torch.Tensor) -> torch.Tensor:
    return out.pow(2).sum()


def _bit_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_node_hooks_in_forward_are_recorded_where_they_fire() -> None:
    plain_seen: Seen = []
    model = _model(plain_seen)
    _loss(model(X)).backward()
    plain = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    traced_seen: Seen = []
    trace = gradtrace.trace(_model(traced_seen), X, _loss)
    for name, grad in plain.items():
        assert _bit_equal(trace.grads[name], grad), name
    # each hook ran once, given what it was given in the plain run
    assert [k for k, _ in traced_seen] == [k for k, _ in plain_seen] == ["watching", "doubling", "halving"]
    for (_, got), (_, want) in zip(traced_seen, plain_seen, strict=True):
        assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))
    doc = gradtrace.Trace.from_json(trace.to_json()).doc
    array = gradtrace.Trace(doc).array
    events = doc.events
    hooked = [e for e in events if e.kind in ("node_pre_hook", "node_post_hook")]
    assert [(e.kind, e.payload["hook_name"].rsplit(".", 1)[-1]) for e in hooked] == [
        ("node_pre_hook", "watching"),
        ("node_pre_hook", "doubling"),
        ("node_post_hook", "halving"),
    ]
    assert [e.payload["changed"] for e in hooked] == [False, True, True]
    assert hooked[0].payload["returned"] is None
    assert len({e.hook for e in hooked}) == 3
    for event, (_, given) in zip(hooked, plain_seen, strict=True):
        saw = event.payload["grad_outputs" if event.kind == "node_pre_hook" else "grad_inputs"]
        saw = [array(v) for v in saw if v is not None]
        assert all(_bit_equal(s, g.numpy()) for s, g in zip(saw, given, strict=True))
    # the story is consistent: the edge brings what the pre-hook saw; node_pre shows what it
    # returned (what the node runs with); node_post and the edges out show what the post-hook
    # returned (what the engine passed on)
    pre, post = hooked[1], hooked[2]
    tanh = pre.node
    assert post.node == tanh and doc.graph.nodes[int(tanh[1:])].op == "TanhBackward0"
    (edge_in,) = [e for e in doc.graph.edges if e.source == tanh]
    assert _bit_equal(array(edge_in.grads[0].value), array(pre.payload["grad_outputs"][0]))
    node_pre = next(e for e in events if e.seq > pre.seq and e.kind == "node_pre" and e.node == tanh)
    assert _bit_equal(array(node_pre.payload["grad_outputs"][0]), array(pre.payload["returned"][0]))
    node_post = next(e for e in events if e.seq > post.seq and e.kind == "node_post" and e.node == tanh)
    assert post.seq < node_post.seq
    assert _bit_equal(array(node_post.payload["grad_inputs"][0]), array(post.payload["returned"][0]))
    (edge_out,) = [e for e in doc.graph.edges if e.target == tanh]
    assert _bit_equal(array(edge_out.grads[0].value), array(post.payload["returned"][0]))


def test_node_hooks_registered_before_the_trace_are_restored_exactly() -> None:
    """Hooks on the node of a non-leaf input, registered before tracing: recorded, and the
    node's hook dicts hold the very same hook objects, under the same keys, afterwards."""
    seen: Seen = []
    doubling, halving, watching = _hooks(seen)

    def run(trace: bool) -> tuple[dict[str, np.ndarray], Any, list]:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
        a = X.clone().requires_grad_()
        x = a * 3  # (a non-leaf input: its node carries the hooks)
        handles = [x.grad_fn.register_prehook(doubling), x.grad_fn.register_prehook(watching)]
        handles.append(x.grad_fn.register_hook(halving))
        handles.append(x)  # (the node, and so its hook dicts, kept alive)
        if trace:
            result: Any = gradtrace.trace(model, x)
        else:
            model(x).sum().backward()
            result = None
        grads = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
        grads["a"] = a.grad.numpy().copy()
        return grads, result, handles

    plain, _, _ = run(False)
    seen.clear()
    grads, trace, handles = run(True)
    assert all(_bit_equal(grads[n], g) for n, g in plain.items())
    assert [k for k, _ in seen] == ["doubling", "watching", "halving"]
    kinds = [e.kind for e in trace.events if e.kind in ("node_pre_hook", "node_post_hook")]
    assert kinds == ["node_pre_hook", "node_pre_hook", "node_post_hook"]
    for handle, hook in zip(handles[:3], (doubling, watching, halving), strict=True):
        hooks = handle.hooks_dict_ref()
        assert hooks is not None and hooks[handle.id] is hook
        assert all(key >= 0 for key in hooks)  # (nothing of gradtrace's left)


def test_module_backward_hooks_are_not_recorded_twice() -> None:
    """A module's full backward hook works through node hooks PyTorch puts on its
    BackwardHookFunctionBackward nodes: those are the module hook's, recorded as such."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    model[0].register_full_backward_hook(lambda m, gi, go: None)
    model[2].register_backward_hook(lambda m, gi, go: None)  # (the deprecated kind: one on grad_fn)
    trace = gradtrace.trace(model, X.clone().requires_grad_())
    kinds = [e.kind for e in trace.events if e.hook is not None]
    assert kinds.count("module_backward") == 2
    assert "node_pre_hook" not in kinds and "node_post_hook" not in kinds
