import torch
from torch import nn


def clip(param):
    param.grad.clamp_(min=-0.05, max=0.05)


torch.manual_seed(9)
x = torch.randn(6, 3)
y = torch.randn(6, 1)
model = nn.Linear(3, 1)
model.weight.register_post_accumulate_grad_hook(clip)
model.bias.register_post_accumulate_grad_hook(lambda p: None)
loss = ((model(x) - y) ** 2).mean()
loss.backward()
