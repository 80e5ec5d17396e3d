"""The whitelist's torch side: program function and tensor-method names -> torch callables.

Keys mirror gradtrace.spec.vocabulary (a test keeps them identical). Methods are unbound
`torch.Tensor` functions, so the interpreter never calls getattr with a user string.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

Tensor = torch.Tensor

FUNCTION_IMPLS: dict[str, Callable[..., Any]] = {
    "relu": F.relu,
    "gelu": F.gelu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "leaky_relu": F.leaky_relu,
    "softmax": F.softmax,
    "log_softmax": F.log_softmax,
    "dropout": F.dropout,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "abs": torch.abs,
    "neg": torch.neg,
    "sin": torch.sin,
    "cos": torch.cos,
    "square": torch.square,
    "pow": torch.pow,
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "clamp": torch.clamp,
    "sum": torch.sum,
    "mean": torch.mean,
    "amax": torch.amax,
    "amin": torch.amin,
    "matmul": torch.matmul,
    "mm": torch.mm,
    "bmm": torch.bmm,
    "outer": torch.outer,
    "dot": torch.dot,
    "transpose": torch.transpose,
    "reshape": torch.reshape,
    "permute": torch.permute,
    "flatten": torch.flatten,
    "unsqueeze": torch.unsqueeze,
    "squeeze": torch.squeeze,
    "cat": torch.cat,
    "stack": torch.stack,
    "mse_loss": F.mse_loss,
    "l1_loss": F.l1_loss,
    "cross_entropy": F.cross_entropy,
    "nll_loss": F.nll_loss,
    "binary_cross_entropy": F.binary_cross_entropy,
    "binary_cross_entropy_with_logits": F.binary_cross_entropy_with_logits,
    "ones_like": torch.ones_like,
    "zeros_like": torch.zeros_like,
}

METHOD_IMPLS: dict[str, Callable[..., Any]] = {
    "sum": Tensor.sum,
    "mean": Tensor.mean,
    "amax": Tensor.amax,
    "amin": Tensor.amin,
    "pow": Tensor.pow,
    "t": Tensor.t,
    "relu": Tensor.relu,
    "tanh": Tensor.tanh,
    "sigmoid": Tensor.sigmoid,
    "exp": Tensor.exp,
    "log": Tensor.log,
    "sqrt": Tensor.sqrt,
    "abs": Tensor.abs,
    "neg": Tensor.neg,
    "square": Tensor.square,
    "softmax": Tensor.softmax,
    "log_softmax": Tensor.log_softmax,
    "norm": Tensor.norm,
    "clamp": Tensor.clamp,
    "matmul": Tensor.matmul,
    "mm": Tensor.mm,
    "view": Tensor.view,
    "reshape": Tensor.reshape,
    "expand": Tensor.expand,
    "repeat": Tensor.repeat,
    "permute": Tensor.permute,
    "transpose": Tensor.transpose,
    "flatten": Tensor.flatten,
    "unsqueeze": Tensor.unsqueeze,
    "squeeze": Tensor.squeeze,
    "detach": Tensor.detach,
    "clone": Tensor.clone,
    "contiguous": Tensor.contiguous,
    "add_": Tensor.add_,
    "sub_": Tensor.sub_,
    "mul_": Tensor.mul_,
    "div_": Tensor.div_,
    "relu_": Tensor.relu_,
    "tanh_": Tensor.tanh_,
    "sigmoid_": Tensor.sigmoid_,
    "exp_": Tensor.exp_,
    "zero_": Tensor.zero_,
    "clamp_": Tensor.clamp_,
}

# Binary operators of the language.
OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "**": lambda a, b: a**b,
    "@": lambda a, b: a @ b,
}
