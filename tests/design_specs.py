"""DESIGN.md's seed-002 example spec, written out once for every test area.

Kept apart from the gallery (gradtrace.examples) on purpose: tests check the gallery and the
engine against this independent copy of the documented example.
"""

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


def seed_002() -> dict[str, Any]:
    """A fresh copy, so a test may change it."""
    return copy.deepcopy(SEED_002)
