import torch

torch.manual_seed(0)
x = torch.randn(4, requires_grad=True)
y = (x**3).sum()
(dx,) = torch.autograd.grad(y, [x], create_graph=True)
z = dx.sum()
z.backward()
