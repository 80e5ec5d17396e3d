"""Training an 8-layer ReLU MLP with residual connections: the gradient reaches every layer

The same depth, width, data and optimizer as the sigmoid MLP, but each layer is
x + relu(Linear(x)): the residual connection passes the gradient back unchanged beside each
layer, so the first layer's weight gets a gradient of the same order as the last's, every
layer learns, and gradtrace.watch raises no `vanishing` flag. Compare with "Training an
8-layer sigmoid MLP".
"""

import torch
from torch import nn

import gradtrace

torch.manual_seed(0)


class DeepResidualMLP(nn.Module):
    def __init__(self, depth=8, width=16):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        for layer in self.layers:
            x = x + torch.relu(layer(x))
        return self.head(x)


model = DeepResidualMLP()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 16), torch.randn(64, 1)

with gradtrace.watch(model, "runs/relu-residual"):
    for step in range(50):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}")

run = gradtrace.load_run("runs/relu-residual")
print(f"loss {run.loss[0]:.4f} -> {run.loss[-1]:.4f} over {len(run.steps)} steps")
first, last = run.grad_norm("layers.0.weight")[0], run.grad_norm("head.weight")[0]
print(f"step 0: |grad| of layers.0.weight {first:.2e}, of head.weight {last:.2e}")
for flag in run.flags:
    print(f"{flag.kind} at step {flag.step} on {flag.node}")
print(f"{len(run.flags)} flags")
