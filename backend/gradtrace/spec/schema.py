"""JSON Schema of the spec (published by the API, used by the viewer's editor)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from .models import ModelSpec


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    schema = ModelSpec.model_json_schema(by_alias=True, mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://gradtrace.dev/schemas/model-spec-v1.json"
    return schema


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ModelSpec v1."""
    import copy

    return copy.deepcopy(_schema())
