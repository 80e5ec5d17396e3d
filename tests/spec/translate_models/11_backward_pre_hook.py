import torch
from torch import nn

torch.manual_seed(5)
x = torch.randn(4, 2, requires_grad=True)
net = nn.Sequential(nn.Linear(2, 4), nn.Sigmoid(), nn.Linear(4, 1))
net[2].register_full_backward_pre_hook(
    lambda m, grad_output: tuple(g.clamp(min=-0.1, max=0.1) for g in grad_output)
)
net[0].register_full_backward_hook(
    lambda m, gi, go: tuple(None if g is None else torch.zeros_like(g) for g in gi)
)
out = net(x)
loss = (out**2).mean()
loss.backward()
