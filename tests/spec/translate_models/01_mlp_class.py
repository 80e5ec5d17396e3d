import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = self.fc2(x)
        return x


torch.manual_seed(0)
x = torch.randn(5, 4)
y = torch.randn(5, 3)
model = MLP()
out = model(x)
loss = F.mse_loss(out, y)
loss.backward()
print(model.fc1.weight.grad)
