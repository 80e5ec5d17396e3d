"""The examples gallery: one spec per `<id>.json` in this package, every example of the seeds.

Torch-free. `list_examples()` feeds GET /examples; `get_example(id)` returns the spec dict.
Beside the specs, `programs/<id>.py`: whole PyTorch programs posted to POST /run as written
(the training runs of `gradtrace.watch`, which no spec describes); `list_programs()` feeds
GET /program-examples, their title and description the program's docstring.
"""

from __future__ import annotations

import ast
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


# Program gallery order: pairs that teach by contrast stay together.
PROGRAM_ORDER = ("watch-sigmoid-mlp", "watch-relu-residual")


@lru_cache(maxsize=1)
def _programs() -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for entry in resources.files(__package__).joinpath("programs").iterdir():
        name = entry.name
        if name.endswith(".py") and _ID.match(name[: -len(".py")]):
            source = entry.read_text(encoding="utf-8")
            doc = ast.get_docstring(ast.parse(source)) or ""
            title, _, description = doc.partition("\n")
            found[name[: -len(".py")]] = {
                "title": title.strip(),
                "description": " ".join(description.split()),
                "python": source,
            }
    ordered = [i for i in PROGRAM_ORDER if i in found] + sorted(i for i in found if i not in PROGRAM_ORDER)
    return {i: found[i] for i in ordered}


def list_programs() -> list[dict[str, str]]:
    """[{id, title, description, python}, …]: the gallery's programs, in order."""
    return [{"id": i, **p} for i, p in _programs().items()]


def get_program(program_id: str) -> dict[str, str]:
    """{id, title, description, python} of one program; KeyError if there is none."""
    return {"id": program_id, **_programs()[program_id]}
