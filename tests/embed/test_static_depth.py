"""Depth, folding and direction for the still pictures (issue 24, item 2): a 100-layer model's
SVG folds its repeated blocks as the viewer does and fits a docs column; ``depth`` draws every
module that deep as one box with its type and output shape; ``direction="right"`` lays it out
left to right. Through the library, the CLI and /specs/{id}/diagram.svg. Real torch traces,
drawn by the Node scene renderer."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import torch
from svg_checks import assert_self_contained_svg, drawn_node_ids, example_trace

import gradtrace
from gradtrace.examples import get_example
from gradtrace.render import diagram_svg
from gradtrace.render.png import svg_size

DOCS_COLUMN_PX = 820  # a docs theme's content column (Furo, Material, Read the Docs: 700-800)


@pytest.fixture(scope="module")
def chain() -> gradtrace.Trace:
    """A 100-layer (Linear, Tanh) chain, 703 graph nodes."""
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(100):
        layers += [torch.nn.Linear(8, 8), torch.nn.Tanh()]
    return gradtrace.trace(torch.nn.Sequential(*layers), torch.randn(2, 8), lambda out: out.pow(2).mean())


def texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


def test_a_100_layer_model_folds_and_fits_a_docs_column(chain: gradtrace.Trace) -> None:
    svg = diagram_svg(chain)
    root = assert_self_contained_svg(svg)
    width, height = svg_size(svg)
    assert width <= DOCS_COLUMN_PX and height <= 1200, (width, height)  # was 786 x 12,230
    # The viewer's fold: the first and last block open, the 98 between as one box.
    assert "(Linear, Tanh) ×98 → (2, 8) · 686 nodes" in texts(svg)
    assert "m:2~197" in drawn_node_ids(root)
    assert {"0.weight", "198.weight"} <= set(texts(svg))  # real nodes at both ends


def test_depth_draws_each_module_as_one_box_with_its_shape(chain: gradtrace.Trace) -> None:
    svg = diagram_svg(chain, depth=1)
    ids = drawn_node_ids(assert_self_contained_svg(svg))
    assert {"m:0", "m:1", "m:2~197", "m:198", "m:199"} <= ids
    assert "0.weight" not in texts(svg)  # inside the box "0": not drawn
    assert "Linear → (2, 8) · 6 nodes" in texts(svg) and "Tanh → (2, 8) · 1 node" in texts(svg)
    assert 'class="gt-group"' not in svg  # no open module box: everything at depth 1 is one box
    # The gradient between boxes is on the edges: norms as PyTorch computes them.
    assert any(t.startswith("‖g‖") for t in texts(svg))
    width, height = svg_size(svg)
    assert width <= DOCS_COLUMN_PX and height <= svg_size(diagram_svg(chain))[1]


def test_left_to_right_is_wider_than_tall_with_the_same_boxes(chain: gradtrace.Trace) -> None:
    down = diagram_svg(chain, depth=1)
    right = diagram_svg(chain, depth=1, direction="right")
    assert drawn_node_ids(assert_self_contained_svg(right)) == drawn_node_ids(assert_self_contained_svg(down))
    width, height = svg_size(right)
    assert width > 2 * height, (width, height)
    # Each edge runs left to right: its last point is right of its first.
    ends = re.findall(r'class="gt-edge[^"]*"[^>]*><path d="M([\d.]+),[\d.]+ .*?L([\d.]+),[\d.]+"', right)
    assert ends and all(float(b) > float(a) for a, b in ends)


def test_bad_options_are_refused_by_name(two_layer: gradtrace.Trace, tmp_path: Path) -> None:
    for kwargs, message in [
        ({"depth": 0}, "depth must be a whole number from 1"),
        ({"depth": True}, "depth must be a whole number from 1"),
        ({"direction": "up"}, "direction must be one of down, right"),
    ]:
        with pytest.raises(ValueError, match=message):
            diagram_svg(two_layer, **kwargs)
    saved = two_layer.save(tmp_path / "small.svg", depth=1, direction="right")
    assert_self_contained_svg(saved.read_text())


def test_cli_depth_and_direction(tmp_path: Path) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(get_example("mlp-hooks-reconstruction")))

    def render(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "gradtrace", "render", str(spec), *args]
        return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)

    done = render("-o", "d.svg", "--depth", "1", "--direction", "right")
    assert done.returncode == 0, done.stderr
    trace = example_trace("mlp-hooks-reconstruction")
    assert (tmp_path / "d.svg").read_text() == diagram_svg(trace, depth=1, direction="right")
    bad = render("-o", "e.svg", "--depth", "0")
    assert bad.returncode == 2 and "--depth" in bad.stderr and "whole number" in bad.stderr
    bad = render("-o", "e.svg", "--direction", "up")
    assert bad.returncode == 2 and "--direction" in bad.stderr


def test_api_depth_and_direction(live_server: str) -> None:
    r = httpx.post(live_server + "/api/v1/specs", json=get_example("mlp-hooks-reconstruction"), timeout=60)
    assert r.status_code in (200, 201), r.text
    url = r.json()["diagram_url"]
    got = httpx.get(url, params={"depth": 1, "direction": "right"}, timeout=180)
    assert got.status_code == 200, got.text
    assert got.text == diagram_svg(example_trace("mlp-hooks-reconstruction"), depth=1, direction="right")
    plain = httpx.get(url, timeout=180)
    assert plain.status_code == 200 and plain.text != got.text  # cached apart
    for params, field in [({"depth": 0}, "depth"), ({"direction": "up"}, "direction")]:
        bad = httpx.get(url, params=params, timeout=60)
        assert bad.status_code == 422 and field in bad.text
    openapi = httpx.get(live_server + "/openapi.json", timeout=60).json()
    params = openapi["paths"]["/api/v1/specs/{spec_id}/diagram.svg"]["get"]["parameters"]
    documented = {p["name"]: p for p in params}
    assert documented["depth"]["schema"]["anyOf"][0]["minimum"] == 1
    assert "one box" in documented["depth"]["description"]
    assert documented["direction"]["schema"]["enum"] == ["down", "right"]


def test_the_docs_plugins_take_depth_and_direction(tmp_path: Path) -> None:
    from gradtrace.docs_plugins.diagrams import DiagramOptions, draw

    spec = tmp_path / "mlp.json"
    spec.write_text(json.dumps(get_example("mlp-hooks-reconstruction")))
    options = DiagramOptions.from_mapping({"depth": 1, "direction": "right"})
    drawn = draw(spec, options).content.decode("utf-8")
    assert drawn == diagram_svg(example_trace("mlp-hooks-reconstruction"), depth=1, direction="right")
    for given, message in [
        ({"depth": 0}, "depth must be a whole number"),
        ({"direction": "up"}, "direction"),
    ]:
        with pytest.raises(ValueError, match=message):
            DiagramOptions.from_mapping(given)
