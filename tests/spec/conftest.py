"""Shared spec fixtures: the seed-002 spec of DESIGN.md, as a fresh dict per test."""

import copy

import pytest

SEED002 = {
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


def seed002() -> dict:
    return copy.deepcopy(SEED002)


@pytest.fixture
def spec002() -> dict:
    return seed002()
