import torch

torch.manual_seed(0)
w = torch.randn(3, requires_grad=True)
x = torch.tensor([1.0, -2.0, 0.5])
w.register_hook(lambda grad: grad * 0.1)
h = w * x
h.register_hook(lambda g: g + 1)
h.retain_grad()
z = torch.sigmoid(h)
loss = z.sum()
loss.backward()
