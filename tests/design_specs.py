"""The seed-002 example spec as the product brief documents it, written out once for every test area.

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


def spec_with_four_mistakes() -> dict[str, Any]:
    """Seed 002 with one mistake of each stage: an unknown module type (schema), a wrong call
    (program), an undefined name (names) and a bad backward target (steps)."""
    spec = seed_002()
    spec["modules"]["f0"]["type"] = "Lineaar"
    spec["forward"] = ["x1 = f0(x)", "y = f1(x1, x)", "loss = (yy - 1) ** 2"]
    spec["steps"] = [{"do": "backward", "of": "los"}]
    return spec


FOUR_MISTAKES = [  # (code, path, what the message says) of each, in the order they are listed
    ("invalid_spec", "/modules/f0", "unknown 'type' 'Lineaar'; did you mean 'Linear'?"),
    ("program_syntax", "/forward/1", "module f1 (Module) takes 1 positional argument(s), got 2"),
    ("undefined_name", "/forward/2", "name 'yy' is not defined; did you mean 'y'?"),
    ("undefined_name", "/steps/0/of", "'los' is not a tensor of this spec; did you mean 'loss'?"),
]
