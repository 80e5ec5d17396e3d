"""The examples gallery: one spec per `<id>.json` in this package, every example of the seeds.

Torch-free. `list_examples()` feeds GET /examples; `get_example(id)` returns the spec dict.
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from importlib import resources
from typing import Any

# Gallery order: the seeds' story first (graph, hooks, retain_graph, module hooks), then extras.
GALLERY_ORDER = (
    "two-layer-linear",
    "mlp-hooks-reconstruction",
    "retain-graph-accumulation",
    "freed-graph-error",
    "two-losses",
    "higher-order-grad",
    "tensor-vs-post-accumulate-hooks",
    "full-backward-hook",
    "full-backward-hook-x2",
    "deprecated-backward-hook",
    "forward-hook-capture",
    "forward-hook-modifies-output",
    "tensor-hook-scales-grad",
    "inplace-after-hook",
    "hook-no-input-grad",
    "detach-stops-gradient",
    "sgd-before-step",
    "sgd-training-step",
)
# Gallery pairs that teach by contrast: example -> the example to compare it with.
COMPARE_WITH = {
    "full-backward-hook-x2": "full-backward-hook",
    "deprecated-backward-hook": "full-backward-hook",
    "sgd-training-step": "sgd-before-step",
}
_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@lru_cache(maxsize=1)
def _load() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for entry in resources.files(__package__).iterdir():
        name = entry.name
        if name.endswith(".json") and _ID.match(name[: -len(".json")]):
            found[name[: -len(".json")]] = json.loads(entry.read_text(encoding="utf-8"))
    ordered = [i for i in GALLERY_ORDER if i in found] + sorted(i for i in found if i not in GALLERY_ORDER)
    return {i: found[i] for i in ordered}


def list_examples() -> list[dict[str, Any]]:
    """[{id, title, description, compare_with}, …] in gallery order (``compare_with``: the
    example this one is best compared with, or null)."""
    return [
        {
            "id": i,
            "title": spec["title"],
            "description": spec.get("description", ""),
            "compare_with": COMPARE_WITH.get(i),
        }
        for i, spec in _load().items()
    ]


def get_example(example_id: str) -> dict[str, Any]:
    """The spec of one example (a fresh copy); KeyError if there is no such example."""
    return copy.deepcopy(_load()[example_id])


def example_ids() -> list[str]:
    return list(_load())
