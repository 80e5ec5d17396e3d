import torch
import torch.nn as nn
import torch.nn.functional as F


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(2, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


torch.manual_seed(0)
inputs = torch.randn(8, 2)
targets = torch.randn(8, 1)
model = Regressor()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):  # noqa: B007 (a tutorial loop)
    optimizer.zero_grad()
    pred = model(inputs)
    loss = F.mse_loss(pred, targets)
    loss.backward()
    optimizer.step()
