"""The library speaks up (issue 24, item 8): a trace's diagnostics are issued as
GradtraceWarning as well as kept in the trace; ``trace()`` and ``save()`` take typed keyword
options (a typo names them); a long drawing says what it is doing on a terminal."""

from __future__ import annotations

import inspect
import os
import pty
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

import gradtrace
from gradtrace.engine import trace_module


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def test_diagnostics_are_warnings_of_their_own_category_and_stay_in_the_trace() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = gradtrace.trace(mlp(), torch.randn(3, 4))
    ours = [w for w in caught if issubclass(w.category, gradtrace.GradtraceWarning)]
    assert [w.message.code for w in ours] == ["output_reduced"]
    (w,) = ours
    assert issubclass(gradtrace.GradtraceWarning, UserWarning)
    assert "backward ran on output.sum()" in str(w.message) and w.message.severity == "info"
    assert w.filename == __file__  # it points at the caller's line, not into gradtrace
    assert w.message.diagnostic in t.doc.analyses.diagnostics  # kept in the trace as well
    # PyTorch agrees with what it says: the gradient is that of output.sum()
    model, x = mlp(), torch.randn(3, 4)
    model(x).sum().backward()
    with pytest.warns(gradtrace.GradtraceWarning, match="output_reduced"):
        traced = gradtrace.trace(mlp(), x)
    assert torch.allclose(torch.from_numpy(traced.grads["0.weight"]), model[0].weight.grad)


def test_a_trace_with_nothing_to_say_issues_nothing_and_the_category_filters() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = gradtrace.trace(mlp(), torch.randn(3, 4), lambda out: out.pow(2).mean())
    assert not [w for w in caught if issubclass(w.category, gradtrace.GradtraceWarning)]
    # (PyTorch's rule for intermediates is in the trace, not repeated as a warning)
    assert [d.code for d in t.doc.analyses.diagnostics] == ["grad_not_retained"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", gradtrace.GradtraceWarning)
        gradtrace.trace(mlp(), torch.randn(3, 4))
    assert not [w for w in caught if issubclass(w.category, gradtrace.GradtraceWarning)]


def test_trace_options_are_typed_keywords_with_the_engines_defaults() -> None:
    params = inspect.signature(gradtrace.trace).parameters
    engine = inspect.signature(trace_module).parameters
    for name in ("max_nodes", "value_budget", "final_value_limit", "title"):
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert params[name].default == engine[name].default, name
    assert params["max_nodes"].annotation == "int" and params["retain_grad"].default is False
    with pytest.raises(TypeError, match=r"^trace\(\) got an unexpected keyword argument 'max_node'"):
        gradtrace.trace(mlp(), torch.randn(3, 4), max_node=10)
    with pytest.raises(TypeError, match=r"trace\(\) takes from 2 to 3 positional arguments"):
        gradtrace.trace(mlp(), torch.randn(3, 4), None, 10)


def test_save_options_are_typed_keywords(tmp_path: Path, two_layer: gradtrace.Trace) -> None:
    params = inspect.signature(gradtrace.Trace.save).parameters
    assert {n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY} >= {
        "animated",
        "phase",
        "theme",
        "values",
    }
    with pytest.raises(TypeError, match=r"^Trace\.save\(\) got an unexpected keyword argument 'animate'"):
        two_layer.save(tmp_path / "x.svg", animate=True)


DRAW = """
import sys
from gradtrace import Trace
from gradtrace.render import diagram_svg
trace = Trace.load(sys.argv[1])
sys.stderr.write("ready\\n")
svg = diagram_svg(trace)
sys.stderr.write(f"svg {len(svg)}\\n")
"""


def _draw(source: Path, stderr_tty: bool, after: str) -> str:
    """A fresh process draws ``source``'s SVG (no layout cache): what it wrote to stderr."""
    env = {**os.environ, "GRADTRACE_PROGRESS_AFTER": after, "GRADTRACE_CACHE_DIR": "off"}
    cmd = [sys.executable, "-c", DRAW, str(source)]
    if not stderr_tty:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stderr
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(cmd, env=env, stderr=follower, stdout=subprocess.DEVNULL)
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(timeout=120) == 0, out
    finally:
        os.close(leader)
    return out.decode("utf-8").replace("\r\n", "\n")


@pytest.fixture
def saved(tmp_path: Path, two_layer: gradtrace.Trace) -> Path:
    return two_layer.save(tmp_path / "two-layer.json")


def test_a_long_drawing_says_what_it_does_on_a_terminal(saved: Path, two_layer: gradtrace.Trace) -> None:
    n = len(two_layer.doc.graph.nodes)
    said = _draw(saved, stderr_tty=True, after="0")  # (every drawing counts as long)
    assert f"gradtrace: laying out and drawing {n:,} nodes…\n" in said
    assert said.index("ready") < said.index("gradtrace: laying out") < said.index("gradtrace: done in")
    assert said.index("gradtrace: done in") < said.index("svg ")


def test_a_drawing_says_nothing_in_a_pipe_or_when_quick(saved: Path) -> None:
    assert "gradtrace:" not in _draw(saved, stderr_tty=False, after="0")
    assert "gradtrace:" not in _draw(saved, stderr_tty=True, after="60")
