"""The model spec (format v1): validation, the safe program language, limits. Torch-free."""

from .errors import SpecError, SpecWarning
from .limits import SpecLimits, check_declared
from .models import ModelSpec
from .parse import parse_spec
from .price import Price, check_price
from .program import Program
from .schema import spec_json_schema

__all__ = [
    "ModelSpec",
    "Price",
    "Program",
    "SpecError",
    "SpecLimits",
    "SpecWarning",
    "check_declared",
    "check_price",
    "parse_spec",
    "spec_json_schema",
]
