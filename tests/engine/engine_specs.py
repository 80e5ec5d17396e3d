"""Specs of the seeds, written out (the examples E1 ships should give the same numbers)."""

from __future__ import annotations

import copy
from typing import Any

from design_specs import SEED_002


def seed002(hook_type: str = "full_backward", scale: float | None = 2) -> dict[str, Any]:
    spec = copy.deepcopy(SEED_002)
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
