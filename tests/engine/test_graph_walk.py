"""The autograd domain facts graph_walk relies on (torch 2.13), incl. private _sequence_nr()."""

from __future__ import annotations

import torch

from gradtrace.engine.graph_walk import (
    creation_sorted,
    is_accumulate_grad,
    is_one_op_class,
    next_nodes,
    op_name,
    raw_sequence_nr,
    sequence_base,
    walk_new,
)


def test_op_names_and_accumulate_grad() -> None:
    w = torch.ones(2, requires_grad=True)
    y = (w * 2).sum()
    assert op_name(y.grad_fn) == "SumBackward0"
    acc = y.grad_fn.next_functions[0][0].next_functions[0][0]
    assert acc.name() == "torch::autograd::AccumulateGrad"
    assert op_name(acc) == "AccumulateGrad" and is_accumulate_grad(acc)
    assert acc.variable is w
    assert not is_accumulate_grad(y.grad_fn)


def test_sequence_nr_orders_creation_and_is_none_for_accumulate_grad() -> None:
    # NOTE: _sequence_nr() is private API; this test is the canary for a PyTorch change.
    base = sequence_base()
    w = torch.ones(2, requires_grad=True)
    a = w * 2
    b = a + 1
    c = b.sum()
    orders = [raw_sequence_nr(t.grad_fn) for t in (a, b, c)]
    assert orders == sorted(orders) and len(set(orders)) == 3
    assert orders[0] == base  # the counter read before any node: the first node's number
    assert sequence_base() == orders[-1] + 1  # and it only reads it
    acc = a.grad_fn.next_functions[0][0]
    assert acc._sequence_nr() == 2**64 - 1  # what JSON readers cannot hold
    assert raw_sequence_nr(acc) is None


def test_next_nodes_skips_inputs_that_need_no_grad() -> None:
    w = torch.ones(2, requires_grad=True)
    x = torch.ones(2)
    y = w * x
    slots = next_nodes(y.grad_fn)
    assert [(slot, op_name(fn), nr) for slot, fn, nr in slots] == [(0, "AccumulateGrad", 0)]
    assert y.grad_fn.next_functions[1] == (None, 0)


def test_walk_is_iterative_on_a_deep_chain_and_stops_at_seen_nodes() -> None:
    w = torch.ones(1, requires_grad=True)
    t = w
    for _ in range(3000):  # deeper than Python's default recursion limit
        t = t * 1.0
    seen: dict = {}
    found = walk_new([t.grad_fn], seen)
    assert len(found) == 3001  # 3000 MulBackward0 + AccumulateGrad
    ordered = creation_sorted(found)
    assert op_name(ordered[0]) == "AccumulateGrad"  # the leaf appears before its first use
    assert [raw_sequence_nr(n) for n in ordered[1:]] == sorted(raw_sequence_nr(n) for n in ordered[1:])
    seen = dict.fromkeys(found)
    u = t * 2.0
    assert walk_new([u.grad_fn], seen) == {u.grad_fn: u.grad_fn.next_functions}


def test_nodes_of_pytorchs_catch_all_class_are_named_one_by_one() -> None:
    # PyTorch gives some nodes no class of their own (WarnNotImplemented, NotImplemented, …):
    # they share one class, so no name is remembered for that class
    lib = torch.library.Library("gradtrace_test_catch_all", "DEF")
    lib.define("double(Tensor x) -> Tensor")
    lib.impl("double", lambda x: (x * 2).detach(), "CompositeExplicitAutograd")
    x = torch.randn(3, requires_grad=True)
    catch_all = torch.ops.gradtrace_test_catch_all.double(x).grad_fn
    assert op_name(catch_all) == "WarnNotImplemented"
    assert not is_one_op_class(type(catch_all))
    assert is_one_op_class(type(x.sin().grad_fn))
