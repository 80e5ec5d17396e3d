"""The vocabulary's torch side: program function and tensor-method names -> torch callables.

The names are gradtrace.spec.vocabulary's, each looked up once, here at import, in the home
the vocabulary gives it (``torch`` or ``torch.nn.functional``; methods on ``torch.Tensor``,
unbound), so the interpreter never calls getattr with a user string.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from gradtrace.spec.vocabulary import FUNCTIONS, METHODS
from gradtrace.spec.vocabulary import OPERATORS as _OPERATORS

_HOMES = {"torch": torch, "F": F}

FUNCTION_IMPLS: dict[str, Callable[..., Any]] = {
    name: getattr(_HOMES[sig.homes[0]], name) for name, sig in FUNCTIONS.items()
}
METHOD_IMPLS: dict[str, Callable[..., Any]] = {name: getattr(torch.Tensor, name) for name in METHODS}
# Binary operators of the language.
OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    symbol: compute for symbol, (_, compute) in _OPERATORS.items()
}
