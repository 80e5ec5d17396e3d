"""Pre and post hooks on many autograd nodes at once, all removed together.

Each hook goes in through PyTorch's public ``Node.register_prehook``/``register_hook`` and
comes out through the handle it returns: nothing of PyTorch's is replaced, so other threads
and every other registration see PyTorch exactly as it is. The handle also names the node's
hook dict (``handle.hooks_dict_ref()``) and the hook's key in it, which is how the hooks the
model put on the same node are shown to :func:`hooks_on`'s ``seen``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

# the keys of the hooks every hooks_on set has in place now (in any thread): a model hook
# found in the same dict is told apart from them (is_set_key)
_set_keys: set[int] = set()
_keys_lock = threading.Lock()


def is_set_key(key: int) -> bool:
    """Whether a key of a node's hook dict is one of these sets' (not a hook the node or the
    model registered)."""
    return key in _set_keys


NodeDictSeen = Callable[[Any, bool, dict[int, Any]], None]


def _dict_of(handle: Any) -> dict[int, Any] | None:
    """The hook dict a handle's hook is in (None where the handle does not name one)."""
    ref = getattr(handle, "hooks_dict_ref", None)
    return None if ref is None else ref()


@contextmanager
def hooks_on(
    hooks: Iterable[tuple[Any, Callable, Callable]], seen: NodeDictSeen | None = None
) -> Iterator[None]:
    """For each ``(node, pre, post)``: ``pre`` as a pre-hook and ``post`` as a post-hook of
    ``node`` (after the node's own), for the ``with`` block; every one of them removed when
    it ends, however it ends (also when making the hooks raised halfway). Each node at most
    once per set.

    ``seen(node, pre, hooks_dict)``, when given, is shown each hook dict the set put a hook
    into (``pre``: the node's pre-hook dict, else its post-hook dict) that holds other hooks
    too, right after: the hooks the node had before (``grad_fn.register_prehook``/
    ``register_hook``) are in it, in the order PyTorch runs them, the set's own last. (PyTorch
    keeps these dicts in C++ only: this is the one moment they are in Python's hands.)"""
    handles: list[Any] = []
    keys: list[int] = []
    try:
        for node, pre, post in hooks:
            for is_pre, hook in ((True, pre), (False, post)):
                handle = node.register_prehook(hook) if is_pre else node.register_hook(hook)
                handles.append(handle)
                key = handle.id
                keys.append(key)
                with _keys_lock:
                    _set_keys.add(key)
                if seen is not None:
                    hooks_dict = _dict_of(handle)
                    if hooks_dict is not None and len(hooks_dict) > 1:  # (more than the set's own)
                        seen(node, is_pre, hooks_dict)
        yield
    finally:
        for handle in handles:
            handle.remove()
        with _keys_lock:
            _set_keys.difference_update(keys)
