"""Specs the API tests post (seed 002 of the teaching material, and variations)."""

from __future__ import annotations

import copy
from typing import Any

from design_specs import SEED_002


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
