"""Specs that pass every size limit but would hold a worker past the deadline ("bombs"), each
with where its refusal must point: (code, path, line); specs whose torch error carries a C++
stack trace; and the pattern of what no answer may contain. Shared by tests/spec, tests/api and
tests/reliability."""

from __future__ import annotations

import re
from typing import Any

# What only the server should know: absolute paths, shared objects, memory addresses, C++ frames.
INTERNALS = re.compile(
    r"(?:/(?:usr|home|work|opt|tmp|var|lib|root|srv|__w)/)|site-packages|\.so\b|0x[0-9a-fA-F]{6,}|frame #\d"
)


def _doc(forward: list[str], modules: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "spec_version": 1,
        "title": "bomb",
        "modules": modules or {},
        "inputs": {"x": {"value": [1.0, 2.0], "requires_grad": True}},
        "forward": forward,
        **extra,
    }


def integer_power() -> dict[str, Any]:
    """Issue 25: a Python integer power in a program line (9 ** 387,420,489)."""
    return _doc(["y = x * 9 ** 9 ** 9", "loss = y.sum()"])


def integer_product() -> dict[str, Any]:
    """A product of integer powers: each power alone is over the bound (21,073 digits)."""
    return _doc(["y = x * (2 ** 70000 * 2 ** 70000)", "loss = y.sum()"])


def identity_calls(lines: int = 200, per_line: int = 60) -> dict[str, Any]:
    """Issue 25: a composite module calling an Identity child ~12,000 times (no tensor op)."""
    body = []
    prev = "v"
    for k in range(lines - 1):
        expr = prev
        for _ in range(per_line):
            expr = f"i({expr})"
        body.append(f"h{k} = {expr}")
        prev = f"h{k}"
    body.append(f"return {prev}")
    module = {"type": "Module", "args": ["v"], "modules": {"i": {"type": "Identity"}}, "forward": body}
    return _doc(["y = m(x)", "loss = y.sum()"], {"m": module})


def identity_modules(count: int = 6) -> dict[str, Any]:
    """Issue 38: ``count`` modules like identity_calls' (~38 KB each; six: ~230 KB), each
    called once: ~0.8 s of checking and pricing in the API process before a 413."""
    one = identity_calls()["modules"]["m"]
    forward = [f"h{k} = m{k}({'x' if k == 0 else f'h{k - 1}'})" for k in range(count)]
    return _doc([*forward, f"loss = h{count - 1}.sum()"], {f"m{k}": one for k in range(count)})


def nested_calls(depth: int = 7) -> dict[str, Any]:
    """Composites nested 7 deep, each calling its child 4 times: 4 ** 7 Identity calls."""
    module: dict[str, Any] = {"type": "Identity"}
    for _ in range(depth):
        module = {
            "type": "Module",
            "args": ["v"],
            "modules": {"m": module},
            "forward": ["a = m(v)", "b = m(a)", "c = m(b)", "return m(c)"],
        }
    return _doc(["y = m(x)", "loss = y.sum()"], {"m": module})


def backward_steps(lines: int = 190, ops_per_line: int = 12, steps: int = 20) -> dict[str, Any]:
    """Issue 25: 20 backward steps over a ~2,300-node graph."""
    forward = []
    prev = "x"
    for k in range(lines):
        expr = prev
        for _ in range(ops_per_line):
            expr = f"({expr} * 1.001)"
        forward.append(f"h{k} = {expr}")
        prev = f"h{k}"
    forward.append(f"loss = {prev}.sum()")
    return _doc(forward, steps=[{"do": "backward", "of": "loss", "retain_graph": True}] * steps)


def forward_steps() -> dict[str, Any]:
    """A 1,000-operation forward run again by 19 forward steps."""
    forward = [f"h{k} = {'x' if k == 0 else f'h{k - 1}'} * 1.001 + 0.5 * x - x * x" for k in range(199)]
    forward.append("loss = h198.sum()")
    steps = [{"do": "forward"}] * 19 + [{"do": "backward", "of": "loss"}]
    return _doc(forward, steps=steps)


# name -> (spec, code, path, line)
BOMBS: dict[str, tuple[dict[str, Any], str, str, int | None]] = {
    "integer_power": (integer_power(), "too_costly", "/forward/0", 1),
    "integer_product": (integer_product(), "too_costly", "/forward/0", 1),
    "identity_calls": (identity_calls(), "too_costly", "/forward/0", 1),
    "nested_calls": (nested_calls(), "too_costly", "/forward/0", 1),
    "backward_steps": (backward_steps(), "too_costly", "/steps/1", None),
    "forward_steps": (forward_steps(), "too_costly", "/steps/9", None),
}


def torch_error(line: str) -> dict[str, Any]:
    """A spec whose forward line makes torch raise (c10 errors carry a C++ stack trace)."""
    return _doc([line, "loss = y.sum()"])


# Lines whose torch errors carried the venv's path and library load addresses (issue 25).
LEAKY_LINES = [
    "y = x.view(18446744073709551616)",
    "y = x.reshape(18446744073709551616)",
    "y = x.expand(18446744073709551616)",
    "y = x.repeat(18446744073709551616)",
    "y = x.view(-18446744073709551616)",
    "y = x.sum(dim=18446744073709551616)",
    "y = x.transpose(0, 18446744073709551616)",
]


def translate_bomb(fan: int, depth: int) -> str:
    """Issue 38: PyTorch source whose class k holds ``fan`` instances of class k-1 (``depth``
    classes deep): a few KB that would build ``fan ** depth`` modules."""
    lines = ["import torch", "from torch import nn", ""]
    for k in range(depth + 1):
        lines += [f"class C{k}(nn.Module):", "    def __init__(self):", "        super().__init__()"]
        if k == 0:
            lines.append("        self.l = nn.Linear(2, 2)")
        else:
            lines += [f"        self.m{i} = C{k - 1}()" for i in range(fan)]
        lines += ["    def forward(self, x):", f"        return self.{'l' if k == 0 else 'm0'}(x)", ""]
    lines += [
        "torch.manual_seed(0)",
        "x = torch.randn(1, 2)",
        f"model = C{depth}()",
        "loss = model(x).sum()",
        "loss.backward()",
    ]
    return "\n".join(lines) + "\n"


def big_literals(bits: int = 16_000) -> list[tuple[str, int, int]]:
    """Issue 38: sources with a ``bits``-bit hex, octal or binary literal where a number goes,
    each with the (line, column) its refusal must name."""
    hexa = "0x" + "f" * (bits // 4)
    octal = "0o" + "7" * (bits // 3)
    binary = "0b" + "1" * bits
    head = "import torch\nfrom torch import nn\ntorch.manual_seed(0)\n"
    tail = "loss = x.sum()\nloss.backward()\n"
    return [
        (
            head + f"x = torch.randn(2, requires_grad=True)\nfor _ in range({hexa}):\n    y = x\n" + tail,
            5,
            16,
        ),
        (head + f"x = torch.randn(2, 3, requires_grad=True)\ny = x.view({octal})\n" + tail, 5, 12),
        (
            head
            + f"x = torch.randn(2, requires_grad=True)\nopt = torch.optim.SGD([x], lr={binary})\n"
            + tail,
            5,
            31,
        ),
        (head + f"x = torch.tensor([1.0, -{hexa}], requires_grad=True)\n" + tail, 4, 25),
    ]
