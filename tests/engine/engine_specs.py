"""Specs of the seeds, written out (the examples E1 ships should give the same numbers)."""

from __future__ import annotations

import copy
from typing import Any

SEED002: dict[str, Any] = {
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


def seed002(hook_type: str = "full_backward", scale: float | None = 2) -> dict[str, Any]:
    spec = copy.deepcopy(SEED002)
    hook: dict[str, Any] = {"module": "f1", "type": hook_type}
    if scale is not None:
        hook["action"] = {"op": "scale", "by": scale}
    spec["hooks"] = [hook]
    return spec


SEED001_RETAIN: dict[str, Any] = {
    "spec_version": 1,
    "title": "retain_graph: a second backward accumulates, a third fails",
    "inputs": {"x": {"value": 1.0, "requires_grad": True}},
    "forward": ["y = x ** 2"],
    "steps": [
        {"do": "backward", "of": "y", "retain_graph": True},
        {"do": "backward", "of": "y"},
        {"do": "backward", "of": "y"},
        {"do": "zero_grad"},
    ],
}

SEED001_TENSOR_HOOKS: dict[str, Any] = {
    "spec_version": 1,
    "title": "register_hook vs register_post_accumulate_grad_hook",
    "inputs": {"w": {"value": 1.0, "requires_grad": True}},
    "forward": ["y1 = w * 2"],
    "hooks": [{"tensor": "w", "type": "tensor"}, {"tensor": "w", "type": "post_accumulate_grad"}],
    "steps": [
        {"do": "backward", "of": "y1", "retain_graph": True},
        {"do": "forward", "program": ["y2 = w * 3"]},
        {"do": "backward", "of": "y2"},
    ],
}

SEED000_MLP: dict[str, Any] = {
    "spec_version": 1,
    "title": "Two-layer MLP: W.grad from the (a, δ) factors",
    "seed": 0,
    "modules": {
        "fc1": {"type": "Linear", "in_features": 4, "out_features": 3, "bias": False},
        "fc2": {"type": "Linear", "in_features": 3, "out_features": 2, "bias": False},
    },
    "inputs": {
        "x": {"shape": [5, 6, 4], "init": "randn", "requires_grad": True},
        "y": {"shape": [5, 6, 2], "init": "randn"},
    },
    "forward": ["h = relu(fc1(x))", "out = fc2(h)", "loss = 0.5 * ((out - y) ** 2).sum()"],
}
