"""The renderer's V8 startup snapshot (gradtrace.render.snapshot): built on first use in the
cache folder, drawn from by later processes with the same SVG bytes as plain render.mjs, and
the plain way whenever it is missing, cannot be built, or cannot be started from."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from svg_checks import example_trace

from gradtrace.render import node_tool, snapshot

MODELS = ("two-layer-linear", "conv-net", "tiny-attention")  # an MLP, a CNN, attention


@pytest.fixture
def renderers() -> Iterator[list[node_tool.NodeRenderer]]:
    made: list[node_tool.NodeRenderer] = []
    yield made
    for r in made:
        r.stop()


def _renderer(made: list[node_tool.NodeRenderer]) -> node_tool.NodeRenderer:
    made.append(node_tool.NodeRenderer())
    return made[-1]


def _blob(cache: Path) -> Path:
    return snapshot.blob_path(node_tool.node_binary(), node_tool.frontend_dir(), cache)


def _svg(renderer: node_tool.NodeRenderer, model: str) -> bytes:
    return renderer.request(example_trace(model).to_json().encode(), ["--format", "svg"])


def test_a_renderer_started_from_the_snapshot_draws_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renderers: list[node_tool.NodeRenderer]
) -> None:
    monkeypatch.setenv("GRADTRACE_SNAPSHOT", "off")
    monkeypatch.setenv("GRADTRACE_CACHE_DIR", str(tmp_path / "plain"))
    plain = _renderer(renderers)
    expected = {model: _svg(plain, model) for model in MODELS}
    assert plain.snapshot is None

    cache = tmp_path / "snap"
    monkeypatch.setenv("GRADTRACE_SNAPSHOT", "on")
    monkeypatch.setenv("GRADTRACE_CACHE_DIR", str(cache))
    snapshot.build(node_tool.node_binary(), node_tool.frontend_dir(), _blob(cache), wait=True)
    assert _blob(cache).is_file()
    fast = _renderer(renderers)
    for model in MODELS:  # laid out by the snapshot's ELK (no layouts on disk yet), same picture
        assert _svg(fast, model) == expected[model], model
    assert fast.snapshot == _blob(cache)
    assert fast.layouts_read == 0


def test_first_use_draws_the_plain_way_and_builds_the_snapshot_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renderers: list[node_tool.NodeRenderer]
) -> None:
    monkeypatch.setenv("GRADTRACE_SNAPSHOT", "on")
    monkeypatch.setenv("GRADTRACE_CACHE_DIR", str(tmp_path))
    first = _renderer(renderers)
    svg = _svg(first, "two-layer-linear")
    assert first.snapshot is None
    deadline = time.monotonic() + 120
    while not _blob(tmp_path).is_file() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _blob(tmp_path).is_file(), "the snapshot was not built in the background"
    assert not list(_blob(tmp_path).parent.glob("*.partial"))
    second = _renderer(renderers)
    assert _svg(second, "two-layer-linear") == svg
    assert second.snapshot == _blob(tmp_path)


def test_a_snapshot_node_cannot_start_from_is_removed_and_the_plain_way_draws(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, renderers: list[node_tool.NodeRenderer]
) -> None:
    monkeypatch.setenv("GRADTRACE_SNAPSHOT", "on")
    monkeypatch.setenv("GRADTRACE_CACHE_DIR", str(tmp_path))
    blob = _blob(tmp_path)
    blob.parent.mkdir(parents=True)
    blob.write_bytes(b"not a V8 snapshot")
    snapshot._started.add(blob)  # (no rebuild in the background: the file stays gone)
    renderer = _renderer(renderers)
    assert _svg(renderer, "two-layer-linear").startswith(b"<svg")
    assert renderer.snapshot is None
    assert not blob.exists()


def test_a_build_that_fails_leaves_nothing_behind(tmp_path: Path) -> None:
    blob = tmp_path / "snapshots" / "x.blob"
    proc = snapshot.build(node_tool.node_binary(), tmp_path / "no-viewer-here", blob, wait=True)
    assert proc is not None and proc.returncode == 0
    assert not blob.exists()
    assert not list(blob.parent.glob("*"))


def test_off_means_no_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADTRACE_SNAPSHOT", "off")
    assert snapshot.ready_blob(node_tool.node_binary(), node_tool.frontend_dir(), tmp_path) is None
    assert not (tmp_path / "snapshots").exists()
