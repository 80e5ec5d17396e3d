"""Training an 8-layer sigmoid MLP: the gradient vanishes before it reaches the first layers

Eight Linear layers, each followed by a sigmoid, trained for 50 SGD steps under
gradtrace.watch. A sigmoid passes back at most a quarter of the gradient it receives
(σ'(z) ≤ 1/4), so eight of them shrink it by orders of magnitude: the run flags `vanishing`
at step 0 on layers.0's weight, and the first layers barely move (`stalled`). Compare with
"Training an 8-layer ReLU MLP with residual connections": the same depth, healthy flow.
"""

import torch
from torch import nn

import gradtrace

torch.manual_seed(0)


class DeepMLP(nn.Module):
    def __init__(self, depth=8, width=16):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.sigmoid(layer(x))
        return self.head(x)


model = DeepMLP()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 16), torch.randn(64, 1)

with gradtrace.watch(model, "runs/sigmoid-mlp"):
    for step in range(50):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            print(f"step {step}: loss {loss.item():.4f}")

run = gradtrace.load_run("runs/sigmoid-mlp")
print(f"loss {run.loss[0]:.4f} -> {run.loss[-1]:.4f} over {len(run.steps)} steps")
first, last = run.grad_norm("layers.0.weight")[0], run.grad_norm("head.weight")[0]
print(f"step 0: |grad| of layers.0.weight {first:.2e}, of head.weight {last:.2e}")
for flag in run.flags:
    print(f"{flag.kind} at step {flag.step} on {flag.node}")
