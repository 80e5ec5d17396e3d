import torch
from torch import nn

torch.manual_seed(3)
signal = torch.randn(3, 2, 8, requires_grad=True)
net = nn.Sequential(nn.Conv1d(2, 4, 3, stride=2), nn.ReLU(), nn.Flatten(), nn.Linear(12, 1))
pred = net(signal)
loss = pred.pow(2).mean()
loss.backward()
