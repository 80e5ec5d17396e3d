"""parse_spec: dict -> ModelSpec, every failure as one SpecError pointing at the field."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from .errors import SpecError, pointer
from .models import ModelSpec

MAX_MESSAGE = 300


def _json_pointer(loc: tuple[Any, ...], data: Any, kind: str = "") -> str:
    """Turn a pydantic loc into a JSON Pointer into `data`, skipping discriminator tags."""
    parts: list[Any] = []
    node = data
    for position, part in enumerate(loc):
        if part == "[key]":
            break
        if isinstance(node, dict) and part in node:
            parts.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            parts.append(part)
            node = node[part]
        elif kind == "missing" and position == len(loc) - 1:
            parts.append(part)  # a missing required field: point at where it belongs
        # else: a union/discriminator tag such as "Linear" or "backward": not in the document
    return pointer(*parts)


def _message(error: ErrorDetails, path: str) -> str:
    kind = error["type"]
    if kind == "union_tag_invalid":
        ctx = error.get("ctx", {})
        tag = str(ctx.get("tag", ""))[:40]
        msg = f"unknown {ctx.get('discriminator', 'tag')} {tag!r}; expected one of {ctx.get('expected_tags', '')}"
    elif kind == "union_tag_not_found":
        msg = f"missing the field {error.get('ctx', {}).get('discriminator', 'type')} that says which kind this is"
    elif kind == "extra_forbidden":
        msg = "unknown field"
    elif kind == "string_pattern_mismatch":
        if "\\." in str(error.get("ctx", {}).get("pattern", "")):
            msg = "must be a name or a dotted path such as f1.f.weight"
        else:
            msg = "must be an identifier: letters, digits and _, not starting with a digit"
    else:
        msg = str(error["msg"])
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
    msg = msg[:MAX_MESSAGE]
    shown = path if len(path) <= MAX_MESSAGE else path[:MAX_MESSAGE] + "…"
    return f"{shown or '/'}: {msg}"


def parse_spec(data: Any) -> ModelSpec:
    """Validate a spec document (a dict from JSON); raise SpecError naming the offending field."""
    if not isinstance(data, dict):
        raise SpecError("invalid_spec", "the spec must be a JSON object", "")
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_input=False, include_url=False)
        first = errors[0]
        path = _json_pointer(tuple(first["loc"]), data, first["type"])
        error = SpecError("invalid_spec", _message(first, path), path)
        error.details = [
            {
                "path": (p := _json_pointer(tuple(e["loc"]), data, e["type"])),
                "message": _message(e, p),
                "type": e["type"],
            }
            for e in errors[:20]
        ]
        raise error from None
    except RecursionError:
        raise SpecError("invalid_spec", "the spec is nested too deeply", "") from None
