"""Walking the autograd graph: the domain facts about grad_fn nodes, in one place.

* Walk iteratively (explicit stack) over ``next_functions``; ``(None, 0)`` means "no grad
  needed there". Recursion would overflow on deep graphs (thousands of layers).
* Leaves are ``AccumulateGrad`` nodes with a ``.variable``.
* Creation order comes from the private ``Node._sequence_nr()``: :func:`raw_sequence_nr` is
  the only caller of it in gradtrace.
* Free a graph gradtrace held newest node first (:func:`release_newest_first`): a node whose
  Python object was ever made is freed through that object, recursively.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter
from typing import Any

import torch

_ACCUMULATE = "AccumulateGrad"
# AccumulateGrad nodes report UINT64_MAX, which JSON readers cannot hold
_NO_SEQUENCE = 2**63


# node class -> its op name (every node of one class has the same name(): a C++ node class
# is one op, a custom Function's backward class is generated per Function) — except
# PyTorch's catch-all class for nodes it gives no class of their own (WarnNotImplemented,
# NotImplemented, …), whose nodes are named one by one
_OP_NAMES: dict[type, str] = {}
_CATCH_ALL_CLASS = "CppFunction"


def is_one_op_class(cls: type) -> bool:
    """Whether every node of this class is the same op (see _OP_NAMES)."""
    return cls.__name__ != _CATCH_ALL_CLASS


def op_name(node: Any) -> str:
    """PyTorch's class name of an autograd node: "AddmmBackward0", "AccumulateGrad", …"""
    cls = type(node)
    name = _OP_NAMES.get(cls)
    if name is None:
        name = node.name().rsplit("::", 1)[-1]
        if is_one_op_class(cls):
            _OP_NAMES[cls] = name
    return name


def is_accumulate_grad(node: Any) -> bool:
    return op_name(node) == _ACCUMULATE and hasattr(node, "variable")


def raw_sequence_nr(node: Any) -> int | None:
    """The node's forward creation counter, or None for AccumulateGrad.

    NOTE: ``_sequence_nr()`` is private PyTorch API (stable since 1.x; checked on 2.13 by
    tests/engine/test_graph_walk.py). It is a per-thread counter that keeps increasing
    across traces in one process, so callers subtract :func:`sequence_base` to get
    trace-relative, deterministic numbers.
    """
    nr = node._sequence_nr()
    return None if nr >= _NO_SEQUENCE else nr


def sequence_base() -> int:
    """The sequence number the next autograd node of this thread will get.

    NOTE: ``torch.autograd._get_sequence_nr()`` is private too (torch.fx uses it; checked by
    tests/engine/test_graph_walk.py). It reads the counter: no probe node is made (an
    autograd op of its own that every trace would pay for).
    """
    return torch.autograd._get_sequence_nr()


def next_nodes(node: Any) -> list[tuple[int, Any, int]]:
    """(slot, source node, output_nr) for each input of ``node`` that needs a gradient."""
    return [(slot, fn, nr) for slot, (fn, nr) in enumerate(node.next_functions) if fn is not None]


_first = itemgetter(0)


def walk_new(roots: Iterable[Any], seen: set[Any] | dict[Any, Any]) -> dict[Any, tuple]:
    """Every node reachable from ``roots`` that is not in ``seen``, without entering seen
    nodes, each with its ``next_functions`` (read once here: the callers need them again,
    and each read builds new tuples).

    Iterative DFS; the result is unordered (callers sort by creation order). ``seen`` is not
    modified.
    """
    found: dict[Any, tuple] = {}
    stack = []
    for r in roots:  # (a loop, not a list comprehension: no frame of its own on Python 3.11)
        if r is not None and r not in seen:
            stack.append(r)
    while stack:
        node = stack.pop()
        if node in found:
            continue
        found[node] = inputs = node.next_functions
        for fn, _nr in inputs:
            if fn is not None and fn not in seen and fn not in found:
                stack.append(fn)
    return found


def creation_sorted(found: dict[Any, tuple]) -> list[Any]:
    """The nodes of ``found`` (node -> its next_functions, as :func:`walk_new` gives them) in
    forward creation order, each AccumulateGrad just before its first consumer.

    A leaf "appears when first used": sorting op nodes by sequence number and pulling in
    their not-yet-placed AccumulateGrad inputs gives that order deterministically.
    """
    if len(found) == 1:  # (most calls: one op run, one new node)
        return list(found)
    numbered = [(nr, n) for n in found if (nr := raw_sequence_nr(n)) is not None]
    numbered.sort(key=_first)
    placed: dict[Any, None] = {}
    for _nr, op in numbered:
        for fn, _out in found[op]:
            if fn is not None and fn in found and fn not in placed and raw_sequence_nr(fn) is None:
                placed[fn] = None
        placed[op] = None
    # AccumulateGrad roots (a leaf used directly as a root) come last, in input order
    for n in found:
        if n not in placed:
            placed[n] = None
    return list(placed)


def release_newest_first(nodes: list[Any]) -> None:
    """Drop ``nodes`` (autograd nodes, each after the nodes it takes inputs from: discovery
    order), the newest first, emptying the list.

    Once Python has seen a node (``grad_fn``, ``next_functions``: every node gradtrace
    names), PyTorch (2.13) keeps its Python object for the node's life and frees the node
    through it: freeing the node drops its input edges, an input held by nothing else is
    freed inside that call, and so on down a chain, one C stack frame group per node. A
    50,000-op chain overflows the main thread's 8 MB stack that way (a segfault) when its
    oldest nodes are let go first (a dict's order) and its newest last. Dropped newest
    first, while every older node is still in the list, each node frees only itself.
    Call it when nothing else holds the graph (the capture's own objects gone)."""
    while nodes:
        nodes.pop()
