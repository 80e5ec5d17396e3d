"""`gradtrace translate model.py` / `gradtrace translate spec.json`, run as a user would."""

from __future__ import annotations

import json
from pathlib import Path

from test_cli import run

import gradtrace

MODELS = Path(__file__).parents[1] / "spec" / "translate_models"


def test_python_file_to_spec_and_back(tmp_path: Path) -> None:
    r = run("translate", str(MODELS / "01_mlp_class.py"))
    assert r.returncode == 0, r.stderr
    spec = json.loads(r.stdout)
    assert spec["modules"]["model"]["modules"]["fc1"]["type"] == "Linear"
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(r.stdout)
    r = run("translate", str(spec_file), "-o", str(tmp_path / "model.py"))
    assert r.returncode == 0, r.stderr
    assert "class Model(nn.Module):" in (tmp_path / "model.py").read_text()


def test_gallery_example_to_python_from_stdin() -> None:
    doc = (Path(gradtrace.__file__).parent / "examples" / "two-layer-linear.json").read_text()
    r = run("translate", "-", "--from", "spec", stdin=doc)
    assert r.returncode == 0 and "a0 = W0(x)" in r.stdout


def test_unsupported_python_exits_1_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nimport subprocess\n")
    r = run("translate", str(bad))
    assert r.returncode == 1
    assert "bad.py: unsupported_python: line 2, column 1: import of 'subprocess'" in r.stderr


def test_unknown_extension_is_a_usage_error(tmp_path: Path) -> None:
    f = tmp_path / "model.txt"
    f.write_text("x")
    assert run("translate", str(f)).returncode == 2


def test_every_refused_line_is_printed(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nimport subprocess\nx = torch.randn(2)\ny = x.cumsum(0)\nimport os\n")
    r = run("translate", str(bad))
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert len(lines) == 4, r.stderr
    for line, where in zip(lines, ("line 2,", "line 4,", "line 5,", "nothing runs backward"), strict=True):
        assert line.startswith(f"gradtrace: {bad}: ") and where in line
