"""parse_spec: dict -> ModelSpec; a bad spec raises SpecError naming the field, with every error found."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from gradtrace.problem import Problem

from .errors import SpecError, did_you_mean, pointer
from .gaps import set_aside
from .models import ModelSpec

MAX_MESSAGE = 300


def _doc_parts(loc: tuple[Any, ...], data: Any, kind: str = "") -> list[Any]:
    """Turn a pydantic loc into the keys of a path into `data`, skipping discriminator tags."""
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
    return parts


def _message(error: ErrorDetails, path: str) -> str:
    kind = error["type"]
    if kind == "union_tag_invalid":
        ctx = error.get("ctx", {})
        tag = str(ctx.get("tag", ""))[:40]
        expected = str(ctx.get("expected_tags", ""))
        hint = did_you_mean(tag, re.findall(r"'([^']+)'", expected))
        msg = f"unknown {ctx.get('discriminator', 'tag')} {tag!r}" + (
            f"{hint} Expected one of {expected}" if hint else f"; expected one of {expected}"
        )
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


# A program line's pointer (/forward/2, /modules/f1/forward/0, /steps/1/program/0): its 1-based line.
_PROGRAM_LINE = re.compile(r"/(?:forward|program)/(\d+)$")


def _spec_error(error: ErrorDetails, parts: list[Any]) -> SpecError:
    path = pointer(*parts)
    line = _PROGRAM_LINE.search(path)
    return SpecError("invalid_spec", _message(error, path), path, int(line.group(1)) + 1 if line else None)


def parse_spec(data: Any) -> ModelSpec:
    """Validate a spec document (a dict from JSON); raise SpecError naming the offending field.

    The first error is the one raised; ``errors`` on it lists all of them (the first 20), so an
    editor or a CLI can show every problem of a spec at once: when the schema refuses parts of
    the spec, the rest still goes through the semantic checks (names, calls, steps, hooks).
    """
    if not isinstance(data, dict):
        raise SpecError("invalid_spec", "the spec must be a JSON object", "")
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as exc:
        found = exc.errors(include_input=False, include_url=False)
        located = [(e, _doc_parts(tuple(e["loc"]), data, e["type"])) for e in found]
        errors: list[Problem] = [_spec_error(e, parts) for e, parts in located]
        errors += _errors_of_the_rest(data, [parts for _, parts in located])
        raise errors[0].with_errors(errors) from None
    except SpecError as exc:
        raise exc if exc.errors else exc.with_errors([exc]) from None
    except RecursionError:
        raise SpecError("invalid_spec", "the spec is nested too deeply", "") from None


def _errors_of_the_rest(data: dict[str, Any], refused: list[list[Any]]) -> list[Problem]:
    """The semantic errors of what the schema accepted (see gaps.py); [] if it cannot be checked."""
    rest = set_aside(data, refused)
    if rest is None:
        return []
    doc, gaps = rest
    try:
        ModelSpec.model_validate(doc, context={"gaps": gaps})
    except SpecError as exc:
        return list(exc.errors or [exc])
    except (ValidationError, RecursionError):
        pass  # a part set aside left something the schema refuses: report the first stage only
    return []
