"""The models every benchmark measures, built the same way in every process (seeded).

Each entry: a description, a model factory, an input factory and a loss. The same factories
serve the main benchmark process and the TorchLens process (see bench.py), so both measure
the very same computation.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes (the one timer every benchmark script uses)."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


@dataclass(frozen=True)
class BenchModel:
    key: str
    description: str
    make: Callable[[], nn.Module]
    make_input: Callable[[], torch.Tensor]

    def build(self) -> tuple[nn.Module, torch.Tensor]:
        torch.manual_seed(0)
        return self.make(), self.make_input()


def loss_of(out: torch.Tensor) -> torch.Tensor:
    return (out**2).mean()


def _chain(blocks: int, width: int) -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(blocks):
        layers += [nn.Linear(width, width), nn.LayerNorm(width), nn.GELU()]
    return nn.Sequential(*layers)


def _tanh_chain(blocks: int, width: int) -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(blocks):
        layers += [nn.Linear(width, width), nn.Tanh()]
    return nn.Sequential(*layers)


def _encoder(layers: int, d_model: int = 64) -> nn.Module:
    layer = nn.TransformerEncoderLayer(d_model, 4, dim_feedforward=4 * d_model, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


class BasicBlock(nn.Module):
    """resnet18's block: two 3x3 convs with BatchNorm, and a projection when the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.down(x))


def _resnet18_style(width: int = 16) -> nn.Module:
    widths = [width, 2 * width, 4 * width, 8 * width]
    blocks: list[nn.Module] = [
        nn.Conv2d(3, width, 3, 1, 1, bias=False),
        nn.BatchNorm2d(width),
        nn.ReLU(),
    ]
    cin = width
    for i, w in enumerate(widths):
        blocks += [BasicBlock(cin, w, 1 if i == 0 else 2), BasicBlock(w, w, 1)]
        cin = w
    blocks += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, 10)]
    return nn.Sequential(*blocks)


MODELS: dict[str, BenchModel] = {
    m.key: m
    for m in [
        BenchModel(
            "chain60",
            "60 x (Linear(32) + LayerNorm + GELU), batch 16",
            lambda: _chain(60, 32),
            lambda: torch.randn(16, 32, requires_grad=True),
        ),
        BenchModel(
            "encoder2",
            "2-layer TransformerEncoder d64, 8 x 16 tokens",
            lambda: _encoder(2),
            lambda: torch.randn(8, 16, 64),
        ),
        BenchModel(
            "resnet",
            "resnet18-style convs (8 BasicBlocks, BatchNorm), 2 x 3 x 32 x 32",
            _resnet18_style,
            lambda: torch.randn(2, 3, 32, 32),
        ),
        BenchModel(
            "encoder12",
            "12-layer TransformerEncoder d64, 8 x 16 tokens",
            lambda: _encoder(12),
            lambda: torch.randn(8, 16, 64),
        ),
        BenchModel(
            "chain5000",
            "715 x (Linear(8) + Tanh), batch 4 (~5,000 nodes)",
            lambda: _tanh_chain(715, 8),
            lambda: torch.randn(4, 8, requires_grad=True),
        ),
    ]
}
