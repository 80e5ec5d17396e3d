"""The warm Node renderer: one process serves many requests, keeps layouts per graph (not per
numbers), survives a bad request, and comes back after its process dies."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from svg_checks import example_trace

from gradtrace.render import node_tool


@pytest.fixture
def renderer() -> Any:
    r = node_tool.NodeRenderer()
    yield r
    r.stop()


def trace_dict() -> dict[str, Any]:
    return json.loads(example_trace("two-layer-linear").to_json())


def layout_of(renderer: node_tool.NodeRenderer, doc: dict[str, Any]) -> dict[str, Any]:
    return json.loads(renderer.request(json.dumps(doc).encode(), ["--format", "layout"]))


def test_one_process_serves_many_requests(renderer: node_tool.NodeRenderer) -> None:
    doc = trace_dict()
    first = layout_of(renderer, doc)
    pid = renderer._proc.pid
    svg = renderer.request(json.dumps(doc).encode(), ["--format", "svg", "--animated"]).decode()
    assert svg.startswith("<svg") and "@keyframes" in svg
    assert layout_of(renderer, doc) == first
    assert renderer._proc.pid == pid
    assert {n["id"] for n in doc["graph"]["nodes"]} <= {n["id"] for n in first["nodes"]}


def test_the_layout_is_kept_per_graph_not_per_numbers(renderer: node_tool.NodeRenderer) -> None:
    doc = trace_dict()
    first = layout_of(renderer, doc)
    # Other numbers (values and gradients): same boxes. The picture still shows the new numbers.
    for node in doc["graph"]["nodes"]:
        node["value"] = None
    assert layout_of(renderer, doc) == first
    assert renderer.layouts_reused == 1
    # Another graph (a node renamed: a wider label) is laid out anew.
    doc["graph"]["nodes"][0]["label"] = "a_much_longer_name_than_before"
    assert layout_of(renderer, doc) != first
    assert renderer.layouts_reused == 1


def test_a_bad_request_is_an_error_and_the_process_goes_on(renderer: node_tool.NodeRenderer) -> None:
    with pytest.raises(node_tool.RenderError, match="graph.nodes and graph.edges are required"):
        renderer.request(b'{"events": []}', ["--format", "svg"])
    with pytest.raises(node_tool.RenderError, match="--phase must be one of"):
        renderer.request(json.dumps(trace_dict()).encode(), ["--phase", "sideways"])
    with pytest.raises(node_tool.RenderError, match="not JSON"):
        renderer.request(b"{nope", ["--format", "svg"])
    pid = renderer._proc.pid
    assert layout_of(renderer, trace_dict())["nodes"]
    assert renderer._proc.pid == pid


def test_a_dead_process_is_replaced(renderer: node_tool.NodeRenderer) -> None:
    layout_of(renderer, trace_dict())
    old = renderer._proc
    old.kill()
    old.wait()
    assert layout_of(renderer, trace_dict())["nodes"]
    assert renderer._proc is not old and renderer._proc.poll() is None


def test_a_forked_child_starts_its_own_process_and_leaves_the_parents_alone(
    renderer: node_tool.NodeRenderer,
) -> None:
    layout_of(renderer, trace_dict())
    parent_proc = renderer._proc
    pid = os.fork()
    if pid == 0:  # the child: draw with a process of its own, then stop it at exit
        try:
            ok = layout_of(renderer, trace_dict())["nodes"] and renderer._proc is not parent_proc
            renderer.stop()
            os._exit(0 if ok else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert parent_proc.poll() is None and renderer._proc is parent_proc
    assert layout_of(renderer, trace_dict())["nodes"]


@contextmanager
def _fresh_renderer_in(
    cache: Path | str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[node_tool.NodeRenderer]:
    """A new renderer process keeping its layouts in ``cache``, stopped on exit."""
    monkeypatch.setenv("GRADTRACE_CACHE_DIR", str(cache))
    renderer = node_tool.NodeRenderer()
    try:
        yield renderer
    finally:
        renderer.stop()


def test_a_new_process_reads_the_layout_an_earlier_one_kept_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = trace_dict()
    with _fresh_renderer_in(tmp_path, monkeypatch) as first:
        layout = layout_of(first, doc)
        svg = first.request(json.dumps(doc).encode(), ["--format", "svg"])
        assert first.layouts_read == 0 and first.layouts_reused == 1
    assert len(list((tmp_path / "layouts").glob("*.json"))) == 1
    # another process: nothing in its memory
    with _fresh_renderer_in(tmp_path, monkeypatch) as second:
        assert layout_of(second, doc) == layout
        assert second.layouts_read == 1
        assert second.request(json.dumps(doc).encode(), ["--format", "svg"]) == svg
        # another graph is laid out, and kept beside the first
        doc["graph"]["nodes"][0]["label"] = "a_much_longer_name_than_before"
        assert layout_of(second, doc) != layout and second.layouts_read == 1
    assert len(list((tmp_path / "layouts").glob("*.json"))) == 2


def test_a_torn_layout_file_is_laid_out_again_and_written_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = trace_dict()
    with _fresh_renderer_in(tmp_path, monkeypatch) as first:
        layout = layout_of(first, doc)
    (kept,) = (tmp_path / "layouts").glob("*.json")
    kept.write_text('{"nodes": [')
    with _fresh_renderer_in(tmp_path, monkeypatch) as second:
        assert layout_of(second, doc) == layout and second.layouts_read == 0
    assert json.loads(kept.read_text()) == layout


def test_off_keeps_nothing_and_an_unwritable_place_is_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with _fresh_renderer_in("off", monkeypatch) as off:
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert node_tool.layout_cache_dir() is None and layout_of(off, trace_dict())["nodes"]
    assert not (tmp_path / "xdg").exists()
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    with _fresh_renderer_in(blocker, monkeypatch) as stuck:
        with caplog.at_level("WARNING", logger="gradtrace.render.node_tool"):
            assert layout_of(stuck, trace_dict())["nodes"]  # drawn all the same
            doc = trace_dict()
            doc["graph"]["nodes"][0]["label"] = "another_graph"
            assert layout_of(stuck, doc)["nodes"]
    warnings = [r.getMessage() for r in caplog.records if "layouts are not kept" in r.getMessage()]
    assert len(warnings) == 1 and str(blocker) in warnings[0]


def test_the_default_place_is_the_users_cache_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRADTRACE_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere/cache")
    if os.name != "nt":
        assert node_tool.layout_cache_dir() == Path("/somewhere/cache/gradtrace")
