"""Specs the API tests post (seed 002 of the teaching material, and variations)."""

from __future__ import annotations

import copy
from typing import Any

SEED_002: dict[str, Any] = {
    "spec_version": 1,
    "title": "Full backward hook on a composite module",
    "seed": 0,
    "dtype": "float32",
    "modules": {
        "f0": {
            "type": "Linear",
            "in_features": 1,
            "out_features": 1,
            "init": {"weight": [[0.3]], "bias": [0.1]},
        },
        "f1": {
            "type": "Module",
            "args": ["x"],
            "modules": {
                "f": {
                    "type": "Linear",
                    "in_features": 1,
                    "out_features": 1,
                    "init": {"weight": [[0.4]], "bias": [0.2]},
                }
            },
            "forward": ["s = f(x)", "return s ** 2"],
        },
    },
    "inputs": {"x": {"value": [0.3], "requires_grad": True}},
    "forward": ["x1 = f0(x)", "y = f1(x1)", "loss = (y - 1) ** 2"],
    "hooks": [
        {"module": "f1", "type": "full_backward", "action": {"op": "scale", "target": "grad_input", "by": 2}}
    ],
    "steps": [{"do": "backward", "of": "loss"}],
}


def seed_002(**changes: Any) -> dict[str, Any]:
    spec = copy.deepcopy(SEED_002)
    spec.update(changes)
    return spec


def tiny(title: str, value: float = 1.5) -> dict[str, Any]:
    """The smallest traceable spec; distinct titles give distinct cache keys."""
    return {
        "spec_version": 1,
        "title": title,
        "inputs": {"x": {"value": [value, 2.0], "requires_grad": True}},
        "forward": ["y = x * x", "loss = y.sum()"],
    }


def reordered(spec: dict[str, Any]) -> dict[str, Any]:
    """The same spec with every object's keys in reverse order (same content hash)."""
    if isinstance(spec, dict):
        return {k: reordered(spec[k]) for k in reversed(list(spec))}
    if isinstance(spec, list):
        return [reordered(v) for v in spec]
    return spec
