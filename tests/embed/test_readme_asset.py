"""The README's animated diagram (frontend/assets/readme-backward*.svg, `make readme-diagram`)
is committed, self-contained for GitHub's <img>, and animates the backward pass of seed 000."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from svg_checks import assert_self_contained_svg, drawn_node_ids, example_trace

ASSETS = Path(__file__).resolve().parents[2] / "frontend" / "assets"


@pytest.mark.parametrize("name", ["readme-backward.svg", "readme-backward-dark.svg"])
def test_readme_diagram_is_committed_and_animated(name: str) -> None:
    svg = (ASSETS / name).read_text(encoding="utf-8")
    root = assert_self_contained_svg(svg)
    assert re.search(r"@keyframes gt-bwd-\d+", svg)
    assert drawn_node_ids(root) == {n.id for n in example_trace("two-layer-linear").doc.graph.nodes}
    assert len(svg) < 200_000  # small enough for a README
