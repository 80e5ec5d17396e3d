"""Programs written the way PyTorch's tutorials write them, posted to ``POST /api/v1/run``.

Each is pasted as written (print lines, the ``device = "cuda" if ... else "cpu"`` line, helper
methods, constructor arguments, loops, loss modules, optimizers) and must give what plain
PyTorch gives: the same printed lines (they print gradients and losses to the last digit) and
the trace's final gradients equal to those of the same program run here without gradtrace.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import torch
from server_process import ServerProcess

from gradtrace.trace import tensor_array

pytestmark = pytest.mark.slow

QUICKSTART = """
import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
print(f"Using {device} device")
torch.manual_seed(0)


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(4 * 4, 8),
            nn.ReLU(),
            nn.Linear(8, 8),
            nn.ReLU(),
            nn.Linear(8, 3),
        )

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


model = NeuralNetwork().to(device)
print(model)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
X = torch.randn(5, 4, 4, device=device)
y = torch.tensor([0, 2, 1, 1, 0], device=device)

model.train()
pred = model(X)
loss = loss_fn(pred, y)
loss.backward()
optimizer.step()
optimizer.zero_grad()
pred = model(X)
loss = loss_fn(pred, y)
loss.backward()
print(f"loss: {loss.item():>7f}")
for name, p in model.named_parameters():
    print(name, p.grad.flatten()[:3].tolist())
"""

CNN = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(1)


class Net(nn.Module):
    def __init__(self, channels, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3)
        self.pool = nn.MaxPool2d(2, 2)
        self.fc1 = nn.Linear(channels * 3 * 3, classes)

    def features(self, x):
        return self.pool(F.relu(self.conv1(x)))

    def forward(self, x):
        x = self.features(x)
        x = torch.flatten(x, 1)
        return self.fc1(x)


net = Net(4, 10)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
inputs = torch.randn(2, 3, 8, 8)
labels = torch.tensor([3, 7])
for epoch in range(2):
    optimizer.zero_grad()
    outputs = net(inputs)
    loss = criterion(outputs, labels)
    loss.backward()
    optimizer.step()
    print(f"[{epoch + 1}] loss: {loss.item():.6f}")
print(net.conv1.weight.grad.flatten()[:4].tolist())
"""

CHAR_RNN = """
import torch
import torch.nn as nn

torch.manual_seed(2)


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(input_size, hidden_size)
        self.h2h = nn.Linear(hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        hidden = torch.tanh(self.i2h(input) + self.h2h(hidden))
        output = self.softmax(self.h2o(hidden))
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


rnn = RNN(5, 6, 3)
criterion = nn.NLLLoss()
line_tensor = torch.randn(4, 1, 5)
category_tensor = torch.tensor([1])
hidden = rnn.initHidden()
rnn.zero_grad()
for i in range(line_tensor.size()[0]):
    output, hidden = rnn(line_tensor[i], hidden)
loss = criterion(output, category_tensor)
loss.backward()
for p in rnn.parameters():
    p.data.add_(p.grad.data, alpha=-0.005)
print(output, loss.item())
"""

ATTENTION = """
import math
import torch
import torch.nn as nn
from torch.nn import functional as F

torch.manual_seed(3)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.n_embd = n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


attn = CausalSelfAttention(8, 2, 4)
x = torch.randn(1, 4, 8)
out = attn(x)
loss = out.pow(2).mean()
loss.backward()
print(round(loss.item(), 6))
"""

RAISES = """
import torch
x = torch.ones(2, 3)
w = torch.ones(4, 2, requires_grad=True)
print("before")
y = x @ w
"""

PROGRAMS = {"quickstart": QUICKSTART, "cnn": CNN, "char_rnn": CHAR_RNN, "attention": ATTENTION}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        tmp_path_factory.mktemp("run"), env={"GRADTRACE_RATE_PER_MINUTE": "0", "GRADTRACE_WORKERS": "1"}
    )
    try:
        proc.wait_ready()
        deadline = time.monotonic() + 120
        while httpx.get(proc.url + "/readyz", timeout=10).json().get("runner") != "ready":
            assert time.monotonic() < deadline, proc.log_text()
            time.sleep(0.2)
        yield proc
    finally:
        proc.stop()


def plain_pytorch(source: str) -> tuple[str, dict[str, Any]]:
    """The program run here, without gradtrace: what it prints and its namespace at the end.

    On one thread, as each run in the jail: a convolution's backward sums in another order on
    several (the last bits differ between thread counts in plain PyTorch too)."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    out = io.StringIO()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(source, "<program>", "exec"), namespace)
    finally:
        torch.set_num_threads(threads)
    return out.getvalue(), namespace


def final_grads(namespace: dict[str, Any]) -> dict[str, np.ndarray]:
    """Every parameter's final .grad, named by the variable holding its model (as the trace names it)."""
    grads = {}
    for var, value in namespace.items():
        if isinstance(value, torch.nn.Module) and not var.startswith("_"):
            for name, p in value.named_parameters():
                if p.grad is not None:
                    grads[f"{var}.{name}"] = p.grad.detach().numpy()
    return grads


def post(server: ServerProcess, source: str) -> httpx.Response:
    return httpx.post(server.url + "/api/v1/run", json={"python": source}, timeout=120)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_tutorial_program_gives_plain_pytorchs_gradients(server: ServerProcess, name: str) -> None:
    source = PROGRAMS[name]
    r = post(server, source)
    assert r.status_code == 200, r.text[:500]
    doc = r.json()
    assert doc["exception"] is None, doc["exception"]
    printed, namespace = plain_pytorch(source)
    assert doc["stdout"] == printed  # the same lines, gradients and losses to the last digit
    trace = doc["trace"]
    assert trace is not None
    expected = final_grads(namespace)
    assert expected
    for param, grad in expected.items():
        assert param in trace["grads"], (param, sorted(trace["grads"]))
        got = tensor_array(trace["grads"][param], trace["tensor_data"])
        np.testing.assert_array_equal(got, grad, err_msg=param)  # bit for bit


def test_an_exception_names_the_programs_line(server: ServerProcess) -> None:
    r = post(server, RAISES)
    assert r.status_code == 200
    doc = r.json()
    assert doc["stdout"] == "before\n"
    assert doc["exception"]["type"] == "RuntimeError"
    assert doc["exception"]["line"] == 6
    assert "/" not in doc["exception"]["message"]  # no path of the server's
    assert "gradtrace" not in str(doc["exception"]) + doc["stderr"]  # no frame of ours


def test_a_syntax_error_is_a_422_at_its_line(server: ServerProcess) -> None:
    r = post(server, "import torch\nx = (1,\n")
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "python_syntax" and r.json()["error"]["line"] == 2
