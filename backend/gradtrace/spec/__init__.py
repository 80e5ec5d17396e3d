"""The model spec (format v1): validation, the safe program language, limits. Torch-free.

Its names load with the submodule that defines them, when first asked for: importing one
light part (``gradtrace.spec.errors``, which the library's tracing of a user's own model needs)
does not build the spec's pydantic models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .errors import SpecError, SpecWarning
    from .limits import SpecLimits, check_declared
    from .models import ModelSpec
    from .parse import parse_spec
    from .price import Price, check_price
    from .program import Program
    from .schema import spec_json_schema

_DEFINED_IN = {
    "ModelSpec": ".models",
    "Price": ".price",
    "Program": ".program",
    "SpecError": ".errors",
    "SpecLimits": ".limits",
    "SpecWarning": ".errors",
    "check_declared": ".limits",
    "check_price": ".price",
    "parse_spec": ".parse",
    "spec_json_schema": ".schema",
}

__all__ = [
    "ModelSpec",
    "Price",
    "Program",
    "SpecError",
    "SpecLimits",
    "SpecWarning",
    "check_declared",
    "check_price",
    "parse_spec",
    "spec_json_schema",
]


def __getattr__(name: str) -> Any:
    module = _DEFINED_IN.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # (asked once)
    return value
