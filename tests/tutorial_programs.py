"""PyTorch programs written the way PyTorch's tutorials write them, pasted as they are: shared by
the translator's tests (what it refuses, each line once) and the PyTorch tab's browser test
(what the service runs)."""

from __future__ import annotations

# PyTorch's Quickstart model and training step as its tutorial writes them (a batch of random
# images for the FashionMNIST download, which a server without network cannot make).
QUICKSTART = """import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
print(f"Using {device} device")


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(28 * 28, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Linear(512, 10),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


model = NeuralNetwork().to(device)
print(model)

loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

X = torch.rand(4, 1, 28, 28, device=device)
y = torch.tensor([3, 1, 4, 1], device=device)

model.train()
pred = model(X)
loss = loss_fn(pred, y)

loss.backward()
optimizer.step()
optimizer.zero_grad()

loss = loss.item()
print(f"loss: {loss:>7f}")
"""
