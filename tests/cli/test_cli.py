"""The ``gradtrace`` command as a script sees it: output, exit codes, messages."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from gradtrace.examples import get_example, list_examples
from gradtrace.trace_schema import TraceDoc

REPO = Path(__file__).resolve().parents[2]
SPEC = {
    "spec_version": 1,
    "title": "cli",
    "inputs": {"x": {"value": [1.0, 3.0], "requires_grad": True}},
    "forward": ["y = x * x", "loss = y.sum()"],
}


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gradtrace", *args],
        capture_output=True,
        text=True,
        input=stdin,
        cwd=REPO,
        timeout=120,
    )


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(SPEC))
    return path


def test_help_teaches_the_commands_and_exit_codes() -> None:
    r = run("--help")
    assert r.returncode == 0
    for word in (
        "serve",
        "trace",
        "validate",
        "examples",
        "exit codes",
        "gradtrace trace s.json -o trace.json",
    ):
        assert word in r.stdout
    for cmd in ("serve", "trace", "validate", "examples"):
        sub = run(cmd, "--help")
        assert sub.returncode == 0 and "usage: gradtrace " + cmd in sub.stdout


def test_help_names_only_examples_that_exist() -> None:
    named = re.findall(r"gradtrace examples ([a-z0-9-]+)", run("--help").stdout)
    assert named, "the help shows how to print one example"
    for example_id in named:
        get_example(example_id)  # KeyError if the help names an example that is not there


def test_no_command_is_a_usage_error() -> None:
    r = run()
    assert r.returncode == 2 and "usage:" in r.stderr


def test_entry_point_script_is_installed() -> None:
    exe = Path(sys.executable).with_name("gradtrace")
    r = subprocess.run([str(exe), "examples"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and list_examples()[0]["id"] in r.stdout


def test_validate_valid_spec(spec_file: Path) -> None:
    r = run("validate", str(spec_file))
    assert r.returncode == 0
    assert r.stdout == f"{spec_file}: valid spec\n"
    norm = run("validate", "--normalized", str(spec_file))
    assert json.loads(norm.stdout)["forward"] == SPEC["forward"]


def test_validate_invalid_spec_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(SPEC, forward=["y = x * x", "loss = undefined_thing.sum()"])))
    r = run("validate", str(bad))
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr.startswith(f"gradtrace: {bad}: ")
    assert "/forward/1" in r.stderr and "undefined_thing" in r.stderr


def test_validate_prints_a_mistake_of_each_stage(tmp_path: Path) -> None:
    from design_specs import FOUR_MISTAKES, spec_with_four_mistakes

    bad = tmp_path / "four.json"
    bad.write_text(json.dumps(spec_with_four_mistakes()))
    r = run("validate", str(bad))
    assert r.returncode == 1 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 4, r.stderr
    for line, (code, path, text) in zip(lines, FOUR_MISTAKES, strict=True):
        assert f"{path}: {code}: " in line and text in line, line
    assert lines[0].startswith(f"gradtrace: {bad}: /modules/f0: ")
    assert lines[1].startswith(f"{bad}: line 2, column 5: /forward/1: ")


def test_validate_does_not_import_torch(spec_file: Path) -> None:
    code = (
        "import sys; from gradtrace.cli import main; rc = main(['validate', sys.argv[1]]);"
        "sys.exit(rc if 'torch' not in sys.modules else 99)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(spec_file)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(
    ("content", "fragment"),
    [(None, "cannot read"), ("{not json", "not JSON"), ('{"seed": NaN}', "non-finite number NaN")],
)
def test_unreadable_input_is_exit_2(tmp_path: Path, content: str | None, fragment: str) -> None:
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content)
    for cmd in ("validate", "trace"):
        r = run(cmd, str(path))
        assert r.returncode == 2, (cmd, r.stderr)
        assert fragment in r.stderr


def test_examples_list_and_show() -> None:
    r = run("examples")
    assert r.returncode == 0
    ids = [line.split()[0] for line in r.stdout.splitlines()]
    assert ids == [e["id"] for e in list_examples()]
    as_json = json.loads(run("examples", "--json").stdout)
    assert as_json == list_examples()
    one = run("examples", ids[0])
    assert one.returncode == 0 and json.loads(one.stdout) == get_example(ids[0])
    missing = run("examples", "no-such-example")
    assert missing.returncode == 2 and "no example 'no-such-example'" in missing.stderr


def test_trace_writes_a_valid_trace_with_the_real_numbers(spec_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    r = run("trace", str(spec_file), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith(f"wrote {out}: ")
    doc = msgspec.json.decode(out.read_bytes(), type=TraceDoc)
    assert doc.values["loss"].values == [10.0]  # 1 + 9
    assert doc.grads["x"].values == [2.0, 6.0]  # d(x^2)/dx = 2x


def test_trace_reads_stdin_and_writes_stdout() -> None:
    r = run("trace", "-", stdin=json.dumps(SPEC))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["grads"]["x"]["values"] == [2.0, 6.0]


def test_trace_of_a_refused_forward_is_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "mismatch.json"
    spec = dict(
        SPEC,
        inputs={**SPEC["inputs"], "w": {"value": [[1.0, 2.0, 3.0]]}},
        forward=["z = w @ x", "loss = z.sum()"],
    )
    bad.write_text(json.dumps(spec))
    r = run("trace", str(bad))
    assert r.returncode == 1
    assert r.stdout == "" and "/forward/0" in r.stderr


def test_version_prints_the_package_version() -> None:
    import gradtrace

    r = run("--version")
    assert r.returncode == 0 and r.stdout == f"gradtrace {gradtrace.__version__}\n"


def test_a_closed_pipe_ends_quietly() -> None:
    # `gradtrace examples | head -0`: the reader is gone before anything is written.
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradtrace", "examples", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr


def test_importing_the_cli_does_no_work() -> None:
    code = (
        "import sys, gradtrace.cli\n"
        "heavy = [m for m in ('torch', 'uvicorn', 'fastapi', 'gradtrace.engine', 'gradtrace.examples')"
        " if m in sys.modules]\n"
        "print(heavy)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
