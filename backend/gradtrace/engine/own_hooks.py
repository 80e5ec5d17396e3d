"""gradtrace's own hooks on a user's model and graph outside a capture (``gradtrace.watch``'s).

A capture running at the same time (the watch's full trace of a real training step, see
step_capture.py) neither wraps them as the model's hooks nor lists them among the
process-wide hooks it cannot record: they are gradtrace's, not the model's, and the trace
shows the step as it runs without gradtrace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Own:
    """An object of gradtrace's whose bound methods (alone or in a ``functools.partial``)
    are hooks of its own."""


class OwnHook:
    """A hook of gradtrace's on a module (``func``: what it calls). A copy of the module
    (``copy.deepcopy``: the user's own copies, the watch's plan) gets one that does nothing."""

    __slots__ = ("func",)

    def __init__(self, func: Callable[..., None]) -> None:
        self.func = func

    def __call__(self, *args: Any) -> None:
        self.func(*args)

    def __deepcopy__(self, memo: dict[int, Any]) -> OwnHook:
        return OwnHook(_nothing)


def _nothing(*args: Any) -> None:
    return None


def is_own(hook: Any) -> bool:
    """Whether ``hook`` is gradtrace's own (an OwnHook, or a method of an ``Own`` object,
    bound or in a ``functools.partial``)."""
    if isinstance(hook, OwnHook):
        return True
    func = getattr(hook, "func", hook)  # (a functools.partial: what it calls)
    return isinstance(getattr(func, "__self__", None), Own)
