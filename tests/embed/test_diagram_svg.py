"""The static and animated SVG of real traces: self-contained, complete, animated per phase."""

from __future__ import annotations

import re

import pytest
from svg_checks import SVG_NS, assert_self_contained_svg, drawn_node_ids, example_trace

from gradtrace.render import diagram_svg

EXAMPLES = ["two-layer-linear", "full-backward-hook", "shared-weights-fan-in", "retain-graph-accumulation"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_static_svg_is_self_contained_and_draws_every_node(example: str) -> None:
    trace = example_trace(example)
    svg = diagram_svg(trace)
    root = assert_self_contained_svg(svg)
    ids = {n.id for n in trace.doc.graph.nodes}
    assert drawn_node_ids(root) == ids
    # Every edge too, with its kind as the viewer's class.
    edges = {
        el.attrib["data-edge-id"]: el.attrib["class"]
        for el in root.iter(f"{SVG_NS}g")
        if "gt-edge" in el.attrib.get("class", "") and "data-edge-id" in el.attrib
    }
    for e in trace.doc.graph.edges:
        assert f"gt-edge--{e.kind}" in edges[e.id]
    # graph.css is inlined, so the picture is styled the same as the viewer.
    assert ".gt-role-parameter rect" in svg and "--gt-grad" in svg
    assert "@keyframes gt-fwd" not in svg  # static: no animation


@pytest.mark.parametrize("example", EXAMPLES)
def test_animated_svg_has_keyframes_for_both_phases(example: str) -> None:
    trace = example_trace(example)
    svg = diagram_svg(trace, animated=True)
    root = assert_self_contained_svg(svg)
    assert drawn_node_ids(root) >= {n.id for n in trace.doc.graph.nodes}
    fwd = re.findall(r"@keyframes (gt-fwd-\d+)", svg)
    bwd = re.findall(r"@keyframes (gt-bwd-\d+)", svg)
    assert fwd and bwd
    # Every rule is used by an element, and every element's rule exists.
    used = set(re.findall(r"animation-name:([\w-]+)", svg))
    assert (
        set(fwd) | set(bwd)
        <= used
        <= set(fwd) | set(bwd) | set(re.findall(r"@keyframes (gt-scene-\d+)", svg))
    )
    assert re.search(r"animation-iteration-count:infinite", svg)
    assert "prefers-reduced-motion" in svg


def test_phase_theme_and_values_options(two_layer) -> None:
    fwd = diagram_svg(two_layer, animated=True, phase="forward")
    assert re.search(r"@keyframes gt-fwd-", fwd) and not re.search(r"@keyframes gt-bwd-", fwd)
    bwd = diagram_svg(two_layer, animated=True, phase="backward")
    assert re.search(r"@keyframes gt-bwd-", bwd) and not re.search(r"@keyframes gt-fwd-", bwd)
    dark = diagram_svg(two_layer, theme="dark")
    assert 'class="gt-graph gt-theme-dark"' in dark
    # The seed's numbers: W1.grad = [[2.8, 5.6, 8.4, 11.2, 14], [-0.96, ...]] is too big for a chip,
    # but loss and its gradient 1.0 are scalars; without values no chip is drawn at all.
    with_values = diagram_svg(two_layer)
    without = diagram_svg(two_layer, values=False)
    assert 'class="gt-grad' in with_values and "gt-value" in with_values
    assert '<g class="gt-grad' not in without and '<g class="gt-value' not in without
    # The forward-only still has no gradients anywhere.
    still = diagram_svg(two_layer, phase="forward")
    assert 'data-state="done"' not in still.split("</style>")[1].split("gt-legend")[1]


def test_titles_are_escaped() -> None:
    trace = example_trace("two-layer-linear").to_dict()
    trace["title"] = '<script>alert("x")</script> & ]]> "quoted"'
    svg = diagram_svg(trace)
    assert_self_contained_svg(svg)
    assert "&lt;script&gt;" in svg


def test_bad_options_name_the_option(two_layer) -> None:
    with pytest.raises(ValueError, match="phase"):
        diagram_svg(two_layer, phase="sideways")
    with pytest.raises(ValueError, match="theme"):
        diagram_svg(two_layer, theme="neon")


def test_a_big_model_folds_like_the_viewer_and_every_node_is_accounted_for() -> None:
    torch = pytest.importorskip("torch")
    import gradtrace

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(
        d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True
    )
    model = torch.nn.TransformerEncoder(layer, num_layers=8, enable_nested_tensor=False)
    trace = gradtrace.trace(model, torch.randn(2, 3, 8), lambda out: out.pow(2).mean())
    assert len(trace.doc.graph.nodes) > 400
    svg = diagram_svg(trace)
    root = assert_self_contained_svg(svg)
    drawn = drawn_node_ids(root)
    boxes = [d[2:] for d in drawn if d.startswith("m:")]
    # The viewer's rule (issue 24: pictures fold like the viewer): the repeated encoder layers
    # fold into one box; still too tall for a page (issue 35: a picture of a big model fits),
    # the layers around it are one box each.
    (fold,) = [b for b in boxes if "~" in b]
    first, last = fold.split("~")
    parent, start = first.rsplit(".", 1)
    paths = [f"{parent}.{i}" for i in range(int(start), int(last) + 1)]
    assert parent == "layers" and len(paths) >= 5
    paths += [b for b in boxes if "~" not in b]
    assert all(b.startswith("layers.") for b in boxes)
    for n in trace.doc.graph.nodes:
        inside = any(n.module == p or (n.module or "").startswith(p + ".") for p in paths)
        assert n.id in drawn or inside, n.id
    height = float(root.get("height") or 0)
    print(f"8-layer encoder: {len(boxes)} boxes, {root.get('width')}×{height:.0f} px")
    assert height <= 2_000
