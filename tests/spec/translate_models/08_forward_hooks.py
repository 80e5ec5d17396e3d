import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3, bias=False)
        self.fc2 = nn.Linear(3, 2, bias=False)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def save_activation(module, inputs, output):
    print("forward", module, output.shape)


torch.manual_seed(0)
x = torch.randn(5, 6, 4, requires_grad=True)
y = torch.randn(5, 6, 2)
model = MLP()
model.fc1.register_forward_hook(save_activation)
model.fc2.register_forward_hook(lambda m, inp, out: out * 0.5)
out = model(x)
loss = 0.5 * ((out - y) ** 2).sum()
loss.backward()
