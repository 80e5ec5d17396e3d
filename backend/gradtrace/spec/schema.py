"""JSON Schema of the spec (published by the API, used by the viewer's editor)."""

from __future__ import annotations

import keyword
from functools import lru_cache
from typing import Any

from .models import ModelSpec
from .reserved import NN_MODULE_ATTRIBUTES

# A name (module, input, tensor) is an identifier that is no Python keyword, does not start with
# "_" and is no nn.Module attribute: the validator refuses the rest, so the schema says so too.
_REFUSED_NAMES = {
    "not": {"anyOf": [{"pattern": "^_"}, {"enum": sorted(set(keyword.kwlist) | NN_MODULE_ATTRIBUTES)}]}
}


def _close_name_maps(node: Any) -> None:
    """Objects keyed by names (``modules``, ``inputs``): only names are keys.

    pydantic writes ``dict[Name, X]`` as ``patternProperties`` alone, which lets any other key
    through in JSON Schema terms; a generator (a fuzzer, an editor's completion) would then
    produce keys the validator refuses.
    """
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            patterns = item.get("patternProperties")
            if isinstance(patterns, dict) and len(patterns) == 1:
                (pattern,) = patterns
                names = dict(item.get("propertyNames", {}))
                names.update({"pattern": pattern, **_REFUSED_NAMES})
                item["propertyNames"] = names
                item["additionalProperties"] = False
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    schema = ModelSpec.model_json_schema(by_alias=True, mode="validation")
    _close_name_maps(schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://gradtrace.dev/schemas/model-spec-v1.json"
    return schema


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ModelSpec v1."""
    import copy

    return copy.deepcopy(_schema())
