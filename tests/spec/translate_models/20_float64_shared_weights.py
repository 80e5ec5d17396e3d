import torch
from torch import nn

torch.set_default_dtype(torch.float64)
torch.manual_seed(0)
a = torch.randn(2, 3, requires_grad=True)
b = torch.randn(2, 3, requires_grad=True)
shared = nn.Linear(3, 3)
ha = shared(a)
hb = shared(b)
loss = (ha * hb).sum() + torch.cat([ha, hb], dim=0).pow(2).mean()
loss.backward()
