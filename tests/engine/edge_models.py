"""Models the edge tests share (test_edges_*.py): one definition each."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class PartlyCompiled(nn.Module):
    """A Linear, a torch.compile'd Linear and Tanh, a Linear."""

    def __init__(self, backend: str) -> None:
        super().__init__()
        self.a = nn.Linear(4, 5)
        self.b = torch.compile(nn.Sequential(nn.Linear(5, 5), nn.Tanh()), backend=backend)
        self.c = nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(self.b(self.a(x)))


class Logged(torch.Tensor):
    """A ``__torch_function__`` subclass that lists every call it sees in ``Logged.calls``."""

    calls: list[str] = []

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        cls.calls.append(getattr(func, "__name__", repr(func)))
        return super().__torch_function__(func, types, args, kwargs or {})
