"""Small training loops for the watch's tests (and the gallery's sigmoid/ReLU pair)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn


class DeepMLP(nn.Module):
    """``depth`` layers of ``width``: sigmoid after each (the vanishing one), or ReLU with a
    residual connection around each (its healthy twin)."""

    def __init__(self, depth: int = 8, width: int = 16, residual_relu: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, 1)
        self.residual_relu = residual_relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = x + torch.relu(layer(x)) if self.residual_relu else torch.sigmoid(layer(x))
        return self.head(x)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.fc(x.flatten(1))


def gpt2_tiny() -> nn.Module:
    import transformers

    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=16)
    return transformers.GPT2LMHeadModel(config)


def mlp_step(model: nn.Module, step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(8, 16, generator=g), torch.randn(8, 1, generator=g)
    return nn.functional.mse_loss(model(x), y)


def cnn_step(model: nn.Module, step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step)
    x, y = torch.randn(4, 1, 8, 8, generator=g), torch.randint(0, 3, (4,), generator=g)
    return nn.functional.cross_entropy(model(x), y)


def gpt2_step(model: nn.Module, step: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step)
    ids = torch.randint(0, 100, (2, 12), generator=g)
    return model(input_ids=ids, labels=ids).loss


def train(
    model: nn.Module,
    loss_at: Callable[[nn.Module, int], torch.Tensor],
    steps: int,
    *,
    lr: float = 0.05,
    each: Callable[[int], Any] | None = None,
) -> nn.Module:
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    for step in range(steps):
        opt.zero_grad()
        loss_at(model, step).backward()
        if each is not None:
            each(step)
        opt.step()
    return model
