"""Field types shared by the spec models: the base model, names, dims, nested numeric literals."""

from __future__ import annotations

import keyword
import math
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    WithJsonSchema,
)

MAX_NAME_LENGTH = 64
MAX_LITERAL_DEPTH = 8  # nesting of [[...]] in a value or init literal
MAX_LITERAL_ELEMENTS = 1_000_000  # hard cap; SpecLimits is usually tighter
IDENTIFIER_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
# A parameter path ("f1.f.weight", "seq.0.bias") or a plain name.
REF_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$"


def _not_keyword(name: str) -> str:
    if keyword.iskeyword(name):
        raise ValueError(f"{name!r} is a Python keyword and cannot be a name")
    return name


Name = Annotated[
    str,
    StringConstraints(pattern=IDENTIFIER_PATTERN, min_length=1, max_length=MAX_NAME_LENGTH),
    AfterValidator(_not_keyword),
]
TensorRef = Annotated[
    str, StringConstraints(pattern=REF_PATTERN, min_length=1, max_length=4 * MAX_NAME_LENGTH)
]
ModulePath = Annotated[
    str, StringConstraints(pattern=REF_PATTERN, min_length=1, max_length=4 * MAX_NAME_LENGTH)
]


def literal_shape(value: Any) -> tuple[int, ...]:
    """The shape of a validated nested literal (a number is a 0-d tensor: ())."""
    shape: list[int] = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return tuple(shape)


def _check_literal(value: Any) -> Any:
    """Accept a number or a rectangular nested list of finite numbers; iterative, bounded."""
    if _is_number(value):
        return value
    if not isinstance(value, list):
        raise ValueError("must be a number or a nested list of numbers")
    shape = literal_shape(value)
    if len(shape) > MAX_LITERAL_DEPTH:
        raise ValueError(f"nested more than {MAX_LITERAL_DEPTH} levels deep")
    count = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth == len(shape):
            if not _is_number(item):
                raise ValueError("is not rectangular or holds a non-number")
            count += 1
            continue
        if not isinstance(item, list) or len(item) != shape[depth]:
            raise ValueError(f"is not rectangular: expected a list of length {shape[depth]} at depth {depth}")
        if count + len(stack) > MAX_LITERAL_ELEMENTS:
            raise ValueError(f"has more than {MAX_LITERAL_ELEMENTS} elements")
        stack.extend((child, depth + 1) for child in item)
    return value


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("non-finite numbers (NaN, Infinity) are not allowed")
    return True


def _literal_schema(depth: int) -> dict[str, Any]:
    if depth == 0:
        return {"type": "number"}
    return {"anyOf": [{"type": "number"}, {"type": "array", "items": _literal_schema(depth - 1)}]}


NestedNumbers = Annotated[
    Any,
    BeforeValidator(_check_literal),
    WithJsonSchema(_literal_schema(MAX_LITERAL_DEPTH)),
]


def map_literal(value: Any, fn: Any) -> Any:
    """Apply fn to every number of a nested literal (used to normalise ints to floats)."""
    if isinstance(value, list):
        return [map_literal(item, fn) for item in value]
    return fn(value)


def literal_is_integral(value: Any) -> bool:
    if isinstance(value, list):
        return all(literal_is_integral(item) for item in value)
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


HARD_MAX_DIM = 2**31 - 1


# Integers are strict: `true` or `3.5` where a size belongs is an error, not 1 or 3.
def _whole_float_to_int(value: Any) -> Any:
    """JSON has one number type and JSON Schema counts 3.0 as an integer: accept it as 3.

    Everything else stays strict: strings ("3"), booleans and fractions are refused.
    """
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**63:
        return int(value)
    return value


# An integer field: a JSON integer, or a float with no fractional part; never a string or a bool.
Int = Annotated[int, BeforeValidator(_whole_float_to_int), Strict()]
Dim = Annotated[Int, Field(ge=1, le=HARD_MAX_DIM)]
Size = Annotated[Int, Field(ge=0, le=HARD_MAX_DIM)]
MAX_PROGRAM_LINES = 1000  # hard cap; SpecLimits.max_program_lines is usually tighter
MAX_LINE_LENGTH = 500
ProgramLine = Annotated[str, Field(min_length=1, max_length=MAX_LINE_LENGTH)]


class SpecModel(BaseModel):
    """Base of every spec model: unknown fields and NaN/Infinity are errors."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True)


Shape = tuple[int, ...]
