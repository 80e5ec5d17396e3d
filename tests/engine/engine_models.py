"""The seeds' models written as plain PyTorch modules (the library path and the oracles)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class SLinear(nn.Module):
    """Seed 002: a Linear followed by a square, inside a composite module."""

    def __init__(self) -> None:
        super().__init__()
        self.f = nn.Linear(1, 1)
        with torch.no_grad():
            self.f.weight[0, 0] = 0.4
            self.f.bias[0] = 0.2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.f(x) ** 2


class Seed002Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.f0 = nn.Linear(1, 1)
        with torch.no_grad():
            self.f0.weight[0, 0] = 0.3
            self.f0.bias[0] = 0.1
        self.f1 = SLinear()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.f1(self.f0(x))


def seed002_loss(y: torch.Tensor) -> torch.Tensor:
    return ((y - 1) ** 2).sum()


class MLP(nn.Module):
    """Seed 000: fc2(relu(fc1(x))), no biases."""

    def __init__(self, d_in: int = 4, d_hidden: int = 3, d_out: int = 2) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden, bias=False)
        self.fc2 = nn.Linear(d_hidden, d_out, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))


def seed000_case() -> tuple[MLP, torch.Tensor, torch.Tensor]:
    """The seed's exact setup: manual_seed(0), x, y, then the model."""
    torch.manual_seed(0)
    x = torch.randn(5, 6, 4).requires_grad_(True)
    y = torch.randn(5, 6, 2)
    model = MLP()
    return model, x, y
