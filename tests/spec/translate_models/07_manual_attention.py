import torch
import torch.nn.functional as F
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(4, 4, bias=False)
        self.k = nn.Linear(4, 4, bias=False)
        self.v = nn.Linear(4, 4, bias=False)

    def forward(self, x):
        scores = self.q(x) @ self.k(x).transpose(-2, -1) / 2.0
        weights = F.softmax(scores, dim=-1)
        return weights @ self.v(x)


torch.manual_seed(7)
x = torch.randn(1, 3, 4)
attn = SelfAttention()
y = attn(x)
loss = y.sum()
loss.backward()
