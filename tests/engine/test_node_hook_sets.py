"""Node hooks registered in bulk (node_hook_sets.hooks_on): they fire like PyTorch's own,
after the node's existing hooks, and every one is gone when the block ends, however it ends;
nobody else's registration is touched."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch
from torch.autograd.function import _HookMixin
from torch.utils.hooks import RemovableHandle

from gradtrace.engine import node_hook_sets
from gradtrace.engine.node_hook_sets import hooks_on

PYTORCH_REGISTER = _HookMixin.__dict__["_register_hook"]


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x * 2

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return grad * 2


def _graph() -> tuple[torch.Tensor, torch.Tensor, list]:
    """A leaf, a scalar root, and every node of the graph (a C++ node, a Python Function's
    node, an AccumulateGrad)."""
    x = torch.randn(3, requires_grad=True)
    root = _Double.apply(x.sin()).sum()
    nodes, todo = [], [root.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in nodes:
            nodes.append(node)
            todo += [next_node for next_node, _nr in node.next_functions]
    return x, root, nodes


def _recording(log: list, nodes: list) -> list:
    return [
        (
            node,
            lambda g, name=node.name(): log.append(("pre", name)),
            lambda gi, go, name=node.name(): log.append(("post", name)),
        )
        for node in nodes
    ]


def test_the_hooks_fire_in_engine_order_and_are_all_gone_after_the_block() -> None:
    x, root, nodes = _graph()
    log: list = []
    with hooks_on(_recording(log, nodes)):
        root.backward(retain_graph=True)
    names = [node.name() for node in nodes]
    assert sorted(log) == sorted([("pre", n) for n in names] + [("post", n) for n in names])
    for name in names:  # each node's pre just before its post
        assert log.index(("pre", name)) + 1 == log.index(("post", name))
    oracle = x.grad.clone()
    log.clear()
    x.grad = None
    root.backward()
    assert log == []
    assert torch.equal(x.grad, oracle)
    assert _HookMixin.__dict__["_register_hook"] is PYTORCH_REGISTER


def test_every_hook_is_removed_when_the_block_raises() -> None:
    _x, root, nodes = _graph()
    log: list = []
    with pytest.raises(ValueError), hooks_on(_recording(log, nodes)):
        raise ValueError("the backward failed")
    root.backward()
    assert log == []


def test_hooks_made_before_a_failure_while_making_them_are_removed() -> None:
    _x, root, nodes = _graph()
    log: list = []

    def made():
        yield from _recording(log, nodes[:2])
        raise RuntimeError("making a hook failed")

    with pytest.raises(RuntimeError), hooks_on(made()):
        pass
    root.backward()
    assert log == []
    assert _HookMixin.__dict__["_register_hook"] is PYTORCH_REGISTER


def test_the_nodes_own_hooks_run_first_and_stay() -> None:
    _x, root, nodes = _graph()
    log: list = []
    own = nodes[0].register_hook(lambda gi, go: log.append("own"))
    assert isinstance(own, RemovableHandle)
    with hooks_on([(nodes[0], lambda g: log.append("pre"), lambda gi, go: log.append("post"))]):
        root.backward(retain_graph=True)
    assert log == ["pre", "own", "post"]
    log.clear()
    root.backward(retain_graph=True)
    assert log == ["own"]
    own.remove()
    root.backward()
    assert log == ["own"]


def test_another_thread_registering_meanwhile_gets_pytorchs_handle() -> None:
    _x, root, nodes = _graph()
    log: list = []
    handles: list = []

    def other_thread() -> None:
        handles.append(nodes[1].register_hook(lambda gi, go: log.append("other")))

    def made():
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        yield from _recording([], nodes[:1])

    with hooks_on(made()):
        pass
    assert isinstance(handles[0], RemovableHandle)
    root.backward(retain_graph=True)
    assert log == ["other"]
    handles[0].remove()
    root.backward()
    assert log == ["other"]


def test_a_set_made_while_another_is_being_registered_leaves_both_complete() -> None:
    """(A nested engine run hooks its new nodes while the outer run's hooks are on; should
    one ever be made mid-registration, each set still removes exactly its own.)"""
    _x, root, nodes = _graph()
    log: list = []

    def outer():
        yield from _recording(log, nodes[:1])
        with hooks_on(_recording(log, nodes[1:2])):
            root.backward(retain_graph=True)
        yield from _recording(log, nodes[2:3])

    with hooks_on(outer()):
        inner_run = list(log)
        log.clear()
        root.backward(retain_graph=True)

    def fired(*hooked: Any) -> list:
        return sorted((kind, node.name()) for node in hooked for kind in ("pre", "post"))

    assert sorted(inner_run) == fired(nodes[0], nodes[1])  # (the outer's first hooks were on)
    assert sorted(log) == fired(nodes[0], nodes[2])
    log.clear()
    root.backward()
    assert log == []


def test_pytorchs_own_registration_works_on_a_node_whose_hook_dict_a_set_made() -> None:
    """The first hook of a node makes the dict the node keeps: later PyTorch registrations
    (inside the block or after it) use it, and their handles (weak references) work."""
    _x, root, nodes = _graph()
    log: list = []
    with hooks_on([(nodes[0], lambda g: log.append("pre"), lambda gi, go: log.append("post"))]):
        inside = nodes[0].register_hook(lambda gi, go: log.append("inside"))
    after = nodes[0].register_prehook(lambda g: log.append("after"))
    root.backward(retain_graph=True)
    assert log == ["after", "inside"]
    inside.remove()
    after.remove()
    log.clear()
    root.backward()
    assert log == []


def test_pytorchs_registrar_is_never_replaced_and_the_model_hooks_are_shown() -> None:
    """Nothing of PyTorch's is swapped while a set registers (another thread registering then
    sees PyTorch as it is), and ``seen`` is shown the dicts that hold the node's own hooks,
    the set's own last."""
    _x, root, nodes = _graph()
    own = nodes[0].register_prehook(lambda g: None)
    during: list = []
    shown: list = []

    def made():
        during.append(_HookMixin.__dict__["_register_hook"])
        yield from _recording([], nodes[:2])
        during.append(_HookMixin.__dict__["_register_hook"])

    def seen(node: Any, pre: bool, hooks: dict) -> None:
        shown.append((node, pre, [node_hook_sets.is_set_key(k) for k in hooks]))

    with hooks_on(made(), seen):
        assert _HookMixin.__dict__["_register_hook"] is PYTORCH_REGISTER
    assert during == [PYTORCH_REGISTER, PYTORCH_REGISTER]
    assert shown == [(nodes[0], True, [False, True])]
    assert not any(node_hook_sets.is_set_key(k) for k in range(-1, 10_000))  # (none left)
    own.remove()
    root.backward()


def test_traces_in_threads_at_once_are_the_trace_made_alone() -> None:
    """Several threads tracing at once: each trace is byte for byte the one made alone, and
    PyTorch's registrar is its own throughout."""
    from torch import nn

    import gradtrace

    def model() -> nn.Module:
        return nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(6, 6), nn.Tanh())])

    torch.manual_seed(0)
    models = [model() for _ in range(7)]  # (the same weights: built one after the other)
    for m in models[1:]:
        m.load_state_dict(models[0].state_dict())
    x = torch.randn(3, 6)

    def traced(m: nn.Module) -> bytes:
        return gradtrace.trace(m, x, lambda out: out.pow(2).sum()).to_json_bytes()

    alone = traced(models[0])
    results: list[bytes] = []

    def worker(mine: list) -> None:
        results.extend(traced(m) for m in mine)

    threads = [threading.Thread(target=worker, args=(models[1 + 2 * k : 3 + 2 * k],)) for k in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 6
    assert all(result == alone for result in results)
    assert _HookMixin.__dict__["_register_hook"] is PYTORCH_REGISTER
