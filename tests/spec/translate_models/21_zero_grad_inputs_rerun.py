import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(2, 2, requires_grad=True)
lin = nn.Linear(2, 1)
out = lin(x)
loss = out.sum()
loss.backward()
lin.zero_grad()
x.grad = None
out = lin(x)
loss = out.sum()
loss.backward()
