"""Integer tensors print as integers in the pictures (issue 24, item 7): an int64 target
[0, 2] drawn through the Node renderer reads ``[0, 2]``, not ``[0, 2.00]``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch

import gradtrace
from gradtrace.render import diagram_svg


def cross_entropy_trace() -> tuple[gradtrace.Trace, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    target = torch.tensor([0, 2])
    trace = gradtrace.trace(
        model, torch.randn(2, 4), lambda out: torch.nn.functional.cross_entropy(out, target)
    )
    return trace, target


def test_an_int64_target_is_drawn_as_integers() -> None:
    trace, target = cross_entropy_trace()
    ints = [n for n in trace.doc.graph.nodes if n.value is not None and n.value.dtype == "int64"]
    assert [n.value.values for n in ints] == [target.tolist()]  # the oracle: torch's own numbers
    chips = re.findall(r"<text[^>]*>([^<]*)</text>", diagram_svg(trace))
    assert "[0, 2]" in chips
    assert "[0, 2.00]" not in chips


@pytest.mark.browser
def test_the_inspector_prints_the_target_as_integers(browser: Any, tmp_path: Path) -> None:
    trace, _ = cross_entropy_trace()
    (node,) = [n for n in trace.doc.graph.nodes if n.value is not None and n.value.dtype == "int64"]
    page_file = trace.save(tmp_path / "player.html")
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    try:
        page.goto(page_file.as_uri())
        page.locator(f'g.gt-node[data-node-id="{node.id}"]').first.click(force=True, timeout=60_000)
        page.wait_for_selector(".tensor")
        text = page.locator(".tensor").first.inner_text()
    finally:
        page.close()
    lines = text.split("\n")
    assert lines[:2] == ["(2,) int64", "[0, 2]"]  # the numbers as torch holds them
    assert lines[2:6] == ["min", "0", "max", "2"]  # min and max are elements: integers too
    assert lines[6:8] == ["mean", "1.000"]  # a mean is not an element: 4 significant digits
