import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 2, kernel_size=3)
        self.fc = nn.Linear(2 * 4 * 4, 3)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = torch.flatten(x, 1)
        return self.fc(x)


torch.manual_seed(0)
images = torch.randn(2, 1, 6, 6)
labels = torch.tensor([2, 0])
net = Net()
outputs = net(images)
loss = F.cross_entropy(outputs, labels)
loss.backward()
