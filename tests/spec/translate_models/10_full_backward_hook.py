import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        h = self.lin(x)
        return h * h


def double_grad(module, grad_input, grad_output):
    """Doubles what flows back into the block's input."""
    print(grad_output[0])
    return (grad_input[0] * 2,)


torch.manual_seed(4)
x = torch.randn(2, 3, requires_grad=True)
block = Block()
head = nn.Linear(3, 1)
block.register_full_backward_hook(double_grad)
h = block(x)
out = head(h)
loss = out.sum()
loss.backward()
