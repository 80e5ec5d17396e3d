"""Programs written the way PyTorch's tutorials write them, posted to ``POST /api/v1/run``.

Each is posted as written — its imports, print lines, the ``device = "cuda" if ... else "cpu"``
line, helper methods, constructor arguments, loops, loss modules, optimizers — and must give
what plain PyTorch gives: the same printed lines, and the trace's final gradients bit for bit
equal to those of the same program run here without gradtrace. The programs are
``gradtrace.record()``'s own tutorial set (``tests/engine/record_programs.py``, each with the
imports a file needs) and the Quickstart as pasted.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import torch
from engine.record_programs import PROGRAMS, named_leaves
from server_process import ServerProcess, runner_server

from gradtrace.trace import tensor_array

pytestmark = pytest.mark.slow

IMPORTS = "import math\nimport torch\nfrom torch import nn\nimport torch.nn.functional as F\n"

# The Quickstart's shape as people paste it: the device line, a constructor argument, the
# tutorial's train() helper with its print line, parameters printed at the end.
PASTED_QUICKSTART = """
import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
print(f"Using {device} device")
torch.manual_seed(0)


class NeuralNetwork(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.flatten = nn.Flatten()
        self.stack = nn.Sequential(nn.Linear(16, hidden), nn.ReLU(), nn.Linear(hidden, 3))

    def forward(self, x):
        return self.stack(self.flatten(x))


def train(X, y, model, loss_fn, optimizer):
    model.train()
    for batch in range(3):
        pred = model(X)
        loss = loss_fn(pred, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"loss: {loss.item():>7f}  [batch {batch}]")


model = NeuralNetwork(8).to(device)
print(model)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
X = torch.randn(5, 4, 4, device=device)
y = torch.tensor([0, 2, 1, 1, 0], device=device)
train(X, y, model, loss_fn, optimizer)
loss = loss_fn(model(X), y)
loss.backward()
for name, p in model.named_parameters():
    print(name, p.grad.flatten()[:3].tolist())
"""

RAISES = """
import torch
x = torch.ones(2, 3)
w = torch.ones(4, 2, requires_grad=True)
print("before")
y = x @ w
"""

SOURCES = {"pasted_quickstart": PASTED_QUICKSTART} | {name: IMPORTS + body for name, body in PROGRAMS.items()}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with runner_server(tmp_path_factory.mktemp("run")) as proc:
        yield proc


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


def final_grads(namespace: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    """Every named leaf's final .grad (dense, as a trace's grads are), by the name record()
    gives it (record_programs.named_leaves: the engine tests' oracle of names, containers'
    members and all)."""
    return [
        (name, (grad.to_dense() if grad.is_sparse else grad).detach().numpy())
        for name, leaf in named_leaves(namespace).items()
        if (grad := leaf.grad) is not None
    ]


def post(server: ServerProcess, source: str) -> httpx.Response:
    return httpx.post(server.url + "/api/v1/run", json={"python": source}, timeout=120)


@pytest.mark.parametrize("name", list(SOURCES))
def test_a_tutorial_program_gives_plain_pytorchs_gradients(server: ServerProcess, name: str) -> None:
    source = SOURCES[name]
    r = post(server, source)
    assert r.status_code == 200, r.text[:500]
    doc = r.json()
    assert doc["exception"] is None, doc["exception"]
    printed, namespace = plain_pytorch(source)
    assert doc["stdout"] == printed  # the same lines, gradients and losses to the last digit
    trace = doc["trace"]
    assert trace is not None and trace["passes"]
    for name, grad in final_grads(namespace):
        assert name in trace["grads"], (name, sorted(trace["grads"]))
        got = tensor_array(trace["grads"][name], trace["tensor_data"])
        np.testing.assert_array_equal(got, grad, err_msg=name)  # bit for bit


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


def test_a_program_past_the_node_budget_is_a_413(server: ServerProcess) -> None:
    source = "import torch\ny = torch.ones(3, requires_grad=True)\nfor _ in range(3000):\n    y = (y * 1.0001).sin()\n"
    r = post(server, source)
    assert r.status_code == 413 and r.json()["error"]["code"] == "too_many_nodes", r.text


def test_a_program_out_of_memory_is_a_413_at_its_line(server: ServerProcess) -> None:
    # a training loop's list of kept tensors, as a user writes it, past the run's memory
    source = "import torch\nkept = []\nfor step in range(10):\n    kept.append(bytearray(16 * 1024 ** 3))\n"
    r = post(server, source)
    assert r.status_code == 413, r.text
    error = r.json()["error"]
    assert error["code"] == "memory_limit" and error["line"] == 4 and error["path"] == "/python", error
    assert "line 4" in error["message"] and " MB " in error["message"], error


def test_what_record_warns_of_is_the_programs_not_a_line_of_ours(server: ServerProcess) -> None:
    # per-sample gradients with torch.func: record() warns, as the run ends, that it read
    # vmap's wrapper tensors from the tensors they wrap; the run's stderr says so of the
    # program, at no line (the user's lines are their own; the wrapper's line is none of them)
    source = (
        "import torch\nfrom torch import nn\n\nmodel = nn.Linear(3, 1)\nx = torch.randn(4, 3)\n"
        "grads = torch.func.vmap(torch.func.grad(lambda w, xi: (xi @ w).sin()), in_dims=(None, 0))(torch.randn(3), x)\n"
        "loss = model(x).sum()\nloss.backward()\n"
    )
    r = post(server, source)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["exception"] is None
    lines = doc["stderr"].splitlines()
    assert lines and all(line.startswith("<program>: GradtraceWarning: ") for line in lines), lines
    assert "torch.func" in doc["stderr"] and "<gradtrace>" not in doc["stderr"]
