import torch
from torch import nn


class AttentionBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.norm = nn.LayerNorm(8)
        self.ff = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))

    def forward(self, x):
        a, w = self.attn(x, x, x)
        h = self.norm(a + x)
        return h + self.ff(h)


torch.manual_seed(0)
tokens = torch.randn(2, 5, 8, requires_grad=True)
block = AttentionBlock()
out = block(tokens)
loss = out.pow(2).mean()
loss.backward()
