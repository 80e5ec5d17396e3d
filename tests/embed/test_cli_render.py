"""`gradtrace render`: all formats written offline, from a spec or a trace; clear exit codes."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from svg_checks import assert_self_contained_svg, drawn_node_ids, example_trace

from gradtrace.examples import get_example

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gradtrace", "render", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "spec.json"
    path.write_text(json.dumps(get_example("two-layer-linear")))
    return path


def test_writes_svg_animated_svg_html_and_png(spec_file: Path) -> None:
    d = spec_file.parent
    ids = {n.id for n in example_trace("two-layer-linear").doc.graph.nodes}
    r = run(str(spec_file), "-o", "still.svg", cwd=d)
    assert r.returncode == 0, r.stderr
    assert drawn_node_ids(assert_self_contained_svg((d / "still.svg").read_text())) == ids
    r = run(str(spec_file), "-o", "moving.svg", "--animated", "--theme", "dark", cwd=d)
    assert r.returncode == 0, r.stderr
    moving = (d / "moving.svg").read_text()
    assert "@keyframes gt-bwd-" in moving and "gt-theme-dark" in moving
    r = run(str(spec_file), "-o", "player.html", cwd=d)
    assert r.returncode == 0, r.stderr
    page = (d / "player.html").read_text()
    assert 'id="gradtrace-data"' in page and "<script src=" not in page and 'href="/' not in page
    packed = page.split('id="gradtrace-packed-data">')[1].split("</script>")[0]
    data = json.loads(gzip.decompress(base64.b64decode(packed)))
    assert {n["id"] for n in data["trace"]["graph"]["nodes"]} == ids and data["layout"]["nodes"]
    r = run(str(spec_file), "-o", "still.png", cwd=d)
    assert r.returncode == 0, r.stderr
    png = (d / "still.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_a_trace_json_is_drawn_as_it_is(spec_file: Path) -> None:
    d = spec_file.parent
    trace_path = d / "trace.json"
    trace_path.write_text(example_trace("shared-weights-fan-in").to_json())
    r = run(str(trace_path), "-o", "fan.svg", cwd=d)
    assert r.returncode == 0, r.stderr
    svg = (d / "fan.svg").read_text()
    assert "+= ×2" in svg  # the fan-in badge where the shared weight's gradients meet


def test_usage_and_spec_errors(spec_file: Path) -> None:
    d = spec_file.parent
    r = run(str(spec_file), "-o", "x.gif", cwd=d)
    assert r.returncode == 2 and ".svg" in r.stderr
    r = run(str(spec_file), "-o", "x.png", "--animated", cwd=d)
    assert r.returncode == 2 and "still" in r.stderr
    r = run("missing.json", "-o", "x.svg", cwd=d)
    assert r.returncode == 2 and "missing.json" in r.stderr
    bad = d / "bad.json"
    bad.write_text(json.dumps({**get_example("two-layer-linear"), "forward": ["y = nosuchfn(x)"]}))
    r = run(str(bad), "-o", "x.svg", cwd=d)
    assert r.returncode == 1 and "bad.json" in r.stderr
    assert not (d / "x.svg").exists()


def test_a_saved_trace_is_drawn_without_torch(spec_file: Path) -> None:
    d = spec_file.parent
    trace_path = d / "plain.json"
    trace_path.write_text(example_trace("two-layer-linear").to_json())
    code = (
        "import sys; from gradtrace.cli import main\n"
        "rc = main(['render', sys.argv[1], '-o', sys.argv[2]])\n"
        "sys.exit(rc if 'torch' not in sys.modules else 99)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(trace_path), str(d / "plain.svg")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert_self_contained_svg((d / "plain.svg").read_text())


def test_a_broken_trace_names_what_is_missing(spec_file: Path) -> None:
    d = spec_file.parent
    broken = d / "broken.json"
    broken.write_text(json.dumps({"schema_version": 1, "graph": {"nodes": []}, "events": []}))
    r = run(str(broken), "-o", "broken.svg", cwd=d)
    assert r.returncode == 1 and "graph.edges" in r.stderr, r.stderr
    assert not (d / "broken.svg").exists()


def test_a_saved_trace_from_a_file_or_stdin_is_the_picture_the_library_draws(spec_file: Path) -> None:
    from gradtrace.render import diagram_svg

    d = spec_file.parent
    trace = example_trace("shared-weights-fan-in")
    expected = diagram_svg(trace)
    (d / "compact.json").write_text(trace.to_json())
    (d / "indented.json").write_text(trace.to_json(indent=2))  # passed on as it is, still drawn
    for name in ("compact", "indented"):
        r = run(f"{name}.json", "-o", f"{name}.svg", cwd=d)
        assert r.returncode == 0, r.stderr
        assert (d / f"{name}.svg").read_text() == expected, name
    r = subprocess.run(
        [sys.executable, "-m", "gradtrace", "render", "-", "-o", "stdin.svg"],
        cwd=d,
        input=trace.to_json(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert (d / "stdin.svg").read_text() == expected
    r = run("compact.json", "-o", "copy.json", cwd=d)
    assert r.returncode == 0 and (d / "copy.json").read_text() == trace.to_json()
