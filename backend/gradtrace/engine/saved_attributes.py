"""What an autograd node saved for its backward, as Python can read it: its ``_saved_*``
attributes, the raw ``SavedVariable`` behind each, and whether saved-tensor hooks are on (then
reading a saved tensor runs the user's unpack hook). The recorder reads these when a node is
made; the saved-memory analysis (memory.py) probes the raw ones to see them released.
"""

from __future__ import annotations

from typing import Any

import torch

SavedVariable = torch._C._autograd.SavedTensor  # what ``node._raw_saved_<name>`` returns
# node class -> its saved attributes (sorted), each with the name of its raw SavedVariable(s)
# when the class has one (a hook-packed saved tensor is seen there; the cheapest probe of a
# release), else None. (dir() is slow: once per class.)
_SAVED_PLANS: dict[type, dict[str, str | None]] = {}
# a custom autograd.Function's node keeps what ``ctx.save_for_backward`` saved under these
# (not ``_saved_*``): the tensors (None where None was saved) and their SavedVariables
FUNCTION_SAVED = "saved_tensors"
_FUNCTION_RAW = "_raw_saved_tensors"


def saved_plan(node: Any) -> dict[str, str | None]:
    """A node's saved attributes and their raw SavedVariables (the recorder reads the
    attributes; the saved-memory analysis probes the raw ones, to see them released)."""
    cls = type(node)
    plan = _SAVED_PLANS.get(cls)
    if plan is None:
        names = sorted(a for a in dir(node) if a.startswith("_saved_"))
        plan = _SAVED_PLANS[cls] = {
            attr: "_raw" + attr if hasattr(cls, "_raw" + attr) else None for attr in names
        }
        if hasattr(cls, _FUNCTION_RAW):  # a custom Function's node: ctx.save_for_backward's
            plan[FUNCTION_SAVED] = _FUNCTION_RAW
    return plan


def saved_tensor_hooks_active() -> bool:
    """Whether saved-tensor default hooks are on (``torch.autograd.graph.saved_tensors_hooks``,
    a non-reentrant checkpoint, ``save_on_cpu``): a node made now packs its saved tensors
    through them, and unpacking one runs the unpack hook.

    NOTE: ``_top_saved_tensors_default_hooks`` is private PyTorch API (torch._functorch uses
    it; checked by tests/engine/test_memory.py). ``True``: the hooks even while tracing. A
    PyTorch without it (or with another signature) answers True: every node is probed.
    """
    if _top_saved_tensor_hooks is None:
        return True
    try:
        return _top_saved_tensor_hooks(True) is not None
    except TypeError:  # another signature: assume hooks, the safe answer
        return True


_top_saved_tensor_hooks = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
