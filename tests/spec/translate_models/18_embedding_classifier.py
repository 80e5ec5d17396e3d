import torch
import torch.nn.functional as F
from torch import nn


class BagOfWords(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.classify = nn.Linear(4, 2)

    def forward(self, tokens):
        e = self.embed(tokens)
        pooled = e.mean(dim=1)
        return self.classify(pooled)


torch.manual_seed(0)
tokens = torch.tensor([[1, 3, 5], [2, 2, 9]])
labels = torch.tensor([1, 0])
model = BagOfWords()
logits = model(tokens)
loss = F.cross_entropy(logits, labels)
loss.backward()
