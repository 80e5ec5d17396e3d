"""``gradtrace run script.py`` as a user runs it: a PyTorch program as written (prints, argv, a
model, a loss module, an optimizer step), its trace saved or served to the viewer, and the
gradients it records equal to those plain PyTorch computes running the same file."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
from server_process import printed_until
from spec.translate_harness import assert_same_grads, run_sources
from test_view import gradtrace as gradtrace_command

import gradtrace

REPO = Path(__file__).resolve().parents[2]
PROGRAM = """import sys

import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"
print(f"Using {device} device")
scale = float(sys.argv[sys.argv.index("--scale") + 1]) if "--scale" in sys.argv else 1.0


class Net(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc1 = nn.Linear(4, width)
        self.fc2 = nn.Linear(width, 3)

    def hidden(self, x):
        return torch.tanh(self.fc1(x))

    def forward(self, x):
        return self.fc2(self.hidden(x)) * scale


torch.manual_seed(0)
model = Net(8).to(device)
x = torch.randn(5, 4, device=device)
y = torch.tensor([0, 2, 1, 1, 0], device=device)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    loss = loss_fn(model(x), y)
    print(f"step {step}: loss {loss.item():.4f}")
    loss.backward()
    if step == 0:
        optimizer.step()
        optimizer.zero_grad()
"""
NAMES = ["model.fc1.weight", "model.fc1.bias", "model.fc2.weight", "model.fc2.bias"]


def gradtrace_cli(*args: str, cwd: Path = REPO, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gradtrace", *args], capture_output=True, text=True, cwd=cwd, timeout=timeout
    )


def test_a_program_runs_as_written_and_its_trace_has_plain_pytorchs_gradients(tmp_path: Path) -> None:
    program = tmp_path / "train.py"
    program.write_text(PROGRAM)
    out = tmp_path / "trace.json"
    r = gradtrace_cli("run", str(program), "-o", str(out), "--", "--scale", "2")
    assert r.returncode == 0, r.stderr
    printed = r.stdout.splitlines()
    assert printed[0] == "Using cpu device" and printed[1].startswith("step 0: loss ") and len(printed) == 3
    assert re.fullmatch(rf"wrote {re.escape(str(out))}: \d+ nodes, \d+ events", r.stderr.splitlines()[-1])
    trace = gradtrace.Trace.load(out)
    assert trace.doc.title == "train.py"
    labels = [p.label for p in trace.doc.passes if p.label.startswith(("forward", "backward"))]
    assert labels == ["forward #1", "backward #1 of loss", "forward #2", "backward #2 of loss"]
    # the oracle: the same file run by plain torch (no gradtrace), with the same argv
    plain = run_sources([(PROGRAM.replace("sys.argv", "['x', '--scale', '2']"), NAMES)], tmp_path)[0]
    assert_same_grads({name: trace.grads[name] for name in NAMES}, plain["grads"])
    assert np.abs(trace.grads["model.fc2.bias"]).sum() > 0


def test_an_exception_is_the_programs_own_and_the_trace_up_to_it_is_kept(tmp_path: Path) -> None:
    program = tmp_path / "broken.py"
    program.write_text(
        "import torch\nw = torch.ones(2, 3, requires_grad=True)\nprint('before')\n"
        "loss = (w @ torch.ones(2, 2)).sum()\nloss.backward()\n"
    )
    out = tmp_path / "broken.html"
    r = gradtrace_cli("run", str(program), "-o", str(out))
    assert r.returncode == 1
    assert r.stdout == "before\n"
    assert f'File "{program}", line 4, in <module>' in r.stderr
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied" in r.stderr
    assert "gradtrace" not in r.stderr.split("Traceback", 1)[1].split("RuntimeError", 1)[0]
    assert out.read_text().lstrip().lower().startswith("<!doctype html")


def test_a_syntax_error_names_its_line(tmp_path: Path) -> None:
    program = tmp_path / "typo.py"
    program.write_text("import torch\nx = torch.ones(2\n")
    r = gradtrace_cli("run", str(program), "-o", str(tmp_path / "t.json"))
    assert r.returncode == 1 and "line 2" in r.stderr and "SyntaxError" in r.stderr
    assert gradtrace_cli("run", str(program), "-o", str(tmp_path / "t.txt")).returncode == 2


def test_without_the_server_extra_the_viewer_is_refused_before_the_program_runs(tmp_path: Path) -> None:
    """No viewer to open the trace in: the command says so before the program runs (a training
    run would be lost otherwise) and names both ways on; with -o the program runs."""
    program = tmp_path / "train.py"
    program.write_text("open('ran', 'w').close()\n")
    library_only = (
        "import sys; sys.modules['fastapi'] = None; from gradtrace.cli import main; sys.exit(main())"
    )
    r = subprocess.run(
        [sys.executable, "-c", library_only, "run", str(program), "--no-browser"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert r.returncode == 2 and not (tmp_path / "ran").exists()
    assert r.stderr == (
        "gradtrace: gradtrace run needs the server extra (fastapi is not installed): "
        "pip install 'gradtrace[server]', or write the trace with -o trace.html (no server needed)\n"
    )


def test_without_an_output_the_trace_is_served_to_the_viewer(tmp_path: Path) -> None:
    program = tmp_path / "train.py"
    program.write_text(PROGRAM)
    env = {**os.environ, "GRADTRACE_WORKERS": "1", "GRADTRACE_DB": str(tmp_path / "p.db")}
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)  # headless: the URL is printed, no browser is tried
    proc = gradtrace_command("run", str(program), "--idle-timeout", "3", env=env)
    try:
        head = printed_until(proc, "Ctrl-C", 120)
        found = re.search(r"http://127\.0\.0\.1:\d+/\?opened=train\.json", head)
        assert found and head.startswith("Using cpu device\n"), head
        base = found.group(0).split("/?", 1)[0]
        with urllib.request.urlopen(base + "/api/v1/opened-trace", timeout=30) as served:
            trace = json.loads(served.read())
        assert trace["title"] == "train.py" and set(NAMES) <= set(trace["grads"])
        _, err = proc.communicate(timeout=60)  # stops by itself once idle
        assert proc.returncode == 0, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
