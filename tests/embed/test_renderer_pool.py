"""Diagram renders do not queue behind each other: while one renderer of the pool is busy with
a drawing, another request is drawn by the next renderer (issue 25)."""

from __future__ import annotations

import threading

from svg_checks import example_trace

from gradtrace.render import node_tool


def test_a_render_is_drawn_while_another_renderer_is_busy() -> None:
    pool = node_tool.RendererPool(2)
    data = example_trace("two-layer-linear").to_json().encode()
    busy = pool._free.get()  # as if a big diagram held this renderer for a long time
    try:
        done = threading.Event()
        result: list[bytes] = []

        def draw() -> None:
            result.append(pool.request(data, ["--format", "svg"]))
            done.set()

        threading.Thread(target=draw, daemon=True).start()
        assert done.wait(60), "the second renderer did not draw while the first was busy"
        assert result[0].decode().startswith("<svg")
    finally:
        pool._free.put(busy)
        pool.stop()


def test_the_pool_size_is_configurable(monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("GRADTRACE_RENDER_PROCESSES", "3")
    assert node_tool._pool_size() == 3
    monkeypatch.setenv("GRADTRACE_RENDER_PROCESSES", "0")
    assert node_tool._pool_size() == 1
    monkeypatch.delenv("GRADTRACE_RENDER_PROCESSES")
    assert node_tool._pool_size() == 2
