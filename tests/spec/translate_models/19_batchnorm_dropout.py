import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(6, 4)
net = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.25), nn.Linear(8, 1))
torch.manual_seed(0)
out = net(x)
loss = out.abs().mean()
loss.backward()
