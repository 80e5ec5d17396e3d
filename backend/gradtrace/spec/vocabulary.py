"""The program language's vocabulary: the one list of what a spec's program may call.

Its functions (``FUNCTIONS``: where PyTorch keeps each, ``torch`` or ``torch.nn.functional``),
tensor methods (``METHODS``) and operators (``OPERATORS``), with torch-free signatures (arity,
accepted keyword arguments) so the spec can be checked without torch. Every stage reads these
names from here: the program parser (spec/program.py), the price (spec/price.py: each call's
kernels), the translator both ways (spec/translate: where a name lives in PyTorch), and the
interpreter (engine/functions.py looks each name up in its home once, at import).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

Home = Literal["torch", "F"]  # torch.<name>, or torch.nn.functional.<name> (F)


@dataclass(frozen=True)
class Signature:
    """How a whitelisted callable may be called from a program."""

    min_args: int
    max_args: int
    kwargs: frozenset[str] = frozenset()
    list_arg: bool = False  # the first positional argument is a list of tensors (cat, stack)
    inplace: bool = False  # modifies its tensor (methods ending in "_")
    # A function's homes in PyTorch, the first the one the engine calls and the translator writes.
    homes: tuple[Home, ...] = ("torch",)
    ops: int = 1  # tensor operations (kernels) one call runs, for the price


def _sig(min_args: int, max_args: int | None = None, *kwargs: str, list_arg: bool = False) -> Signature:
    return Signature(min_args, min_args if max_args is None else max_args, frozenset(kwargs), list_arg)


def _in(sig: Signature, *homes: Home, ops: int = 1) -> Signature:
    """``sig`` for a function PyTorch keeps in ``homes`` (the first: the one called)."""
    return replace(sig, homes=homes, ops=ops)


_UNARY = _sig(1)
_BINARY = _sig(2)
_LOSS = _sig(2, 2, "reduction")
_REDUCE = _sig(1, 2, "dim", "keepdim")

FUNCTIONS: dict[str, Signature] = {
    # activations
    "relu": _in(_UNARY, "F", "torch"),
    "gelu": _in(_sig(1, 1, "approximate"), "F"),
    "tanh": _in(_UNARY, "torch", "F"),
    "sigmoid": _in(_UNARY, "torch", "F"),
    "silu": _in(_UNARY, "F"),
    "leaky_relu": _in(_sig(1, 2, "negative_slope"), "F"),
    "softmax": _in(_sig(1, 2, "dim"), "F", "torch"),
    "log_softmax": _in(_sig(1, 2, "dim"), "F", "torch"),
    "dropout": _in(_sig(1, 1, "p", "training"), "F", ops=2),
    # elementwise math
    "exp": _UNARY,
    "log": _UNARY,
    "sqrt": _UNARY,
    "abs": _UNARY,
    "neg": _UNARY,
    "sin": _UNARY,
    "cos": _UNARY,
    "square": _UNARY,
    "pow": _BINARY,
    "add": _BINARY,
    "sub": _BINARY,
    "mul": _BINARY,
    "div": _BINARY,
    "maximum": _BINARY,
    "minimum": _BINARY,
    "clamp": _sig(1, 1, "min", "max"),
    # reductions
    "sum": _REDUCE,
    "mean": _REDUCE,
    "amax": _REDUCE,
    "amin": _REDUCE,
    # linear algebra
    "matmul": _BINARY,
    "mm": _BINARY,
    "bmm": _BINARY,
    "outer": _BINARY,
    "dot": _BINARY,
    # shapes
    "transpose": _sig(3),
    "reshape": _sig(2),
    "permute": _sig(2),
    "flatten": _sig(1, 1, "start_dim", "end_dim"),
    "unsqueeze": _sig(2),
    "squeeze": _sig(1, 2),
    "cat": _sig(1, 1, "dim", list_arg=True),
    "stack": _sig(1, 1, "dim", list_arg=True),
    # losses
    "mse_loss": _in(_LOSS, "F", ops=3),
    "l1_loss": _in(_LOSS, "F", ops=3),
    "cross_entropy": _in(_sig(2, 2, "reduction", "label_smoothing"), "F", ops=3),
    "nll_loss": _in(_LOSS, "F", ops=2),
    "binary_cross_entropy": _in(_LOSS, "F", ops=3),
    "binary_cross_entropy_with_logits": _in(_LOSS, "F", ops=4),
    # constants shaped like a tensor (no grad)
    "ones_like": _UNARY,
    "zeros_like": _UNARY,
}

_VARIADIC = 8  # view(2, 3, 4): at most this many sizes

METHODS: dict[str, Signature] = {
    "sum": _sig(0, 1, "dim", "keepdim"),
    "mean": _sig(0, 1, "dim", "keepdim"),
    "amax": _sig(0, 1, "dim", "keepdim"),
    "amin": _sig(0, 1, "dim", "keepdim"),
    "pow": _sig(1),
    "t": _sig(0),
    "relu": _sig(0),
    "tanh": _sig(0),
    "sigmoid": _sig(0),
    "exp": _sig(0),
    "log": _sig(0),
    "sqrt": _sig(0),
    "abs": _sig(0),
    "neg": _sig(0),
    "square": _sig(0),
    "softmax": _sig(0, 1, "dim"),
    "log_softmax": _sig(0, 1, "dim"),
    "norm": _sig(0, 1),
    "clamp": _sig(0, 0, "min", "max"),
    "matmul": _sig(1),
    "mm": _sig(1),
    "view": _sig(1, _VARIADIC),
    "reshape": _sig(1, _VARIADIC),
    "expand": _sig(1, _VARIADIC),
    "repeat": _sig(1, _VARIADIC),
    "permute": _sig(1, _VARIADIC),
    "transpose": _sig(2),
    "flatten": _sig(0, 2, "start_dim", "end_dim"),
    "unsqueeze": _sig(1),
    "squeeze": _sig(0, 1),
    "detach": _sig(0),
    "clone": _sig(0),
    "contiguous": _sig(0),
    # in-place: here to demonstrate PyTorch's in-place errors (e.g. after a hooked module)
    "add_": Signature(1, 1, frozenset({"alpha"}), inplace=True),
    "sub_": Signature(1, 1, frozenset({"alpha"}), inplace=True),
    "mul_": Signature(1, 1, inplace=True),
    "div_": Signature(1, 1, inplace=True),
    "relu_": Signature(0, 0, inplace=True),
    "tanh_": Signature(0, 0, inplace=True),
    "sigmoid_": Signature(0, 0, inplace=True),
    "exp_": Signature(0, 0, inplace=True),
    "zero_": Signature(0, 0, inplace=True),
    "clamp_": Signature(0, 0, frozenset({"min", "max"}), inplace=True),
}

# The language's binary operators: how Python spells each, and what computes it (on tensors in
# the engine, on number constants in the price).
OPERATORS: dict[str, tuple[type[ast.operator], Callable[[Any, Any], Any]]] = {
    "+": (ast.Add, operator.add),
    "-": (ast.Sub, operator.sub),
    "*": (ast.Mult, operator.mul),
    "/": (ast.Div, operator.truediv),
    "**": (ast.Pow, operator.pow),
    "@": (ast.MatMult, operator.matmul),
}
OPERATOR_OF_AST = {node: symbol for symbol, (node, _) in OPERATORS.items()}

# Keyword arguments that take a string, with the strings they accept.
STRING_KWARGS: dict[str, frozenset[str]] = {
    "reduction": frozenset({"mean", "sum", "none"}),
    "approximate": frozenset({"none", "tanh"}),
}

# Keyword arguments a module call accepts, by module type (most accept none).
MODULE_CALL_KWARGS: dict[str, frozenset[str]] = {
    "MultiheadAttention": frozenset({"need_weights", "average_attn_weights", "is_causal"}),
}

# How many values a module call returns when it returns a tuple (for `a, b = attn(q, k, v)`).
MODULE_RETURNS: dict[str, int] = {"MultiheadAttention": 2}
