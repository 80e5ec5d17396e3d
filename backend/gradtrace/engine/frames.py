"""The program's names as its frames hold them (``record()``: see session.py's docstring): the
variables of the block's frame, the local variable of the function that made a call, and a
mapping's member (``outputs.loss``).
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch

# frames that are not the program's: gradtrace's and torch's (loss.backward() reaches the
# discovery mode through torch/_tensor.py and torch/overrides.py)
_LIBRARIES = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.dirname(torch.__file__) + os.sep,
)


def variables(frame: types.FrameType | None) -> Iterator[tuple[str, Any]]:
    """The frame's variables the program named: its locals, then its globals (a function's
    frame: the module's models and tensors it uses), none starting with ``_`` (no frame:
    none)."""
    if frame is None:
        return
    scopes = [frame.f_locals]
    if frame.f_globals is not scopes[0]:
        scopes.append(frame.f_globals)
    seen: set[str] = set()
    for scope in scopes:
        for name, value in list(scope.items()):
            if name[:1] != "_" and name not in seen:
                seen.add(name)
                yield name, value


def callers_variable(obj: object) -> str | None:
    """The name a local variable of the program's code that made this call (the innermost
    frame outside torch and gradtrace: a ``train()`` the block called) gives this very object,
    if one does (none starting with ``_``)."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARIES):
        frame = frame.f_back
    if frame is None:
        return None
    named = [(n, value) for n, value in frame.f_locals.items() if n[:1] != "_"]
    return next((n for n, value in named if value is obj), None) or member_of(obj, named)


def member_of(obj: object, named: Iterable[tuple[str, Any]]) -> str | None:
    """``name.key`` where a variable holds a mapping whose value under a string ``key`` is
    this very object: a Hugging Face model's output, ``outputs.loss`` (one level deep)."""
    for name, value in named:
        if isinstance(value, Mapping):
            key = next((k for k, item in value.items() if item is obj and isinstance(k, str)), None)
            if key is not None:
                return f"{name}.{key}"
    return None
