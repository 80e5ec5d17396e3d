"""Two linear layers with the seed notebook's numbers"""

import torch
from torch import nn

x = torch.tensor([[1.0, 2.0]])
y = torch.tensor([[0.5, -0.5]])
W0 = nn.Linear(2, 3, bias=False)
W1 = nn.Linear(3, 2, bias=False)
with torch.no_grad():
    W0.weight.copy_(torch.tensor([[0.1, 0.2], [-0.3, 0.4], [0.5, -0.6]]))
    W1.weight.copy_(torch.tensor([[0.7, -0.8, 0.9], [-0.1, 0.2, 0.3]]))
a0 = W0(x)
a1 = W1(a0)
L = 0.5 * ((a1 - y) ** 2).sum()
L.backward()
