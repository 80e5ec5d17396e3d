import torch
from torch import nn

torch.manual_seed(1)
x = torch.randn(4, 3)
target = torch.tensor([0, 2, 1, 1])
model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 3))
logits = model(x)
loss = nn.functional.cross_entropy(logits, target)
loss.backward()
