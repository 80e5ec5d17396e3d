import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(3, 2)
lin = nn.Linear(2, 2)
h = lin(x)
loss1 = h.sum()
loss2 = (h**2).mean()
loss1.backward(retain_graph=True)
loss2.backward()
