"""The program's names as its frames hold them (``record()``: see session.py's docstring): the
variables of the block's frame, the local variable of the function that made a call, and a
member of a mapping, list or tuple one of them holds (``outputs.loss``, ``models[0]``).
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


def local_name(obj: object, frames: Iterable[types.FrameType]) -> str | None:
    """The name a local variable of the program's own code among ``frames`` (innermost first;
    torch's and gradtrace's frames skipped) gives this very object: the first frame with one
    wins. ``self`` is no name (a model's own method refers to it so)."""
    for frame in frames:
        if frame.f_code.co_filename.startswith(_LIBRARIES):
            continue
        for name, value in list(frame.f_locals.items()):
            if value is obj and name[:1] != "_" and name != "self":
                return name
    return None


def members(named: Iterable[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
    """One level inside the containers the variables hold, each member spelled as the program
    reaches it: ``name.key`` for a mapping's value it also holds as an attribute (a Hugging
    Face model's output, ``outputs.loss``), ``name["key"]`` for another string key (a
    hand-written model's ``params["w"]``), ``name[i]`` for a list's or tuple's item
    (``models[0]``). No deeper."""
    for name, value in named:
        if isinstance(value, Mapping):
            for key, item in list(value.items()):
                if isinstance(key, str):
                    yield _spelled(name, value, key, item), item
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(list(value)):
                yield f"{name}[{i}]", item


def member_of(obj: object, named: Iterable[tuple[str, Any]]) -> str | None:
    """The path (see ``members``) of a member that is this very object, if one is (each
    member only compared: a dict of thousands of tensors costs a pass over its values)."""
    for name, value in named:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if item is obj and isinstance(key, str):
                    return _spelled(name, value, key, item)
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                if item is obj:
                    return f"{name}[{i}]"
    return None


def _spelled(name: str, mapping: Mapping, key: str, item: object) -> str:
    if key.isidentifier() and getattr(mapping, key, None) is item:
        return f"{name}.{key}"
    return f'{name}["{key}"]' if '"' not in key and "\\" not in key else f"{name}[{key!r}]"
