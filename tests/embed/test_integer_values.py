"""Integer tensors print as integers in the pictures (issue 24, item 7): an int64 target
[0, 2] drawn through the Node renderer reads ``[0, 2]``, not ``[0, 2.00]``."""

from __future__ import annotations

import re

import torch

import gradtrace
from gradtrace.render import diagram_svg


def test_an_int64_target_is_drawn_as_integers() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    target = torch.tensor([0, 2])
    trace = gradtrace.trace(
        model, torch.randn(2, 4), lambda out: torch.nn.functional.cross_entropy(out, target)
    )
    ints = [n for n in trace.doc.graph.nodes if n.value is not None and n.value.dtype == "int64"]
    assert [n.value.values for n in ints] == [target.tolist()]  # the oracle: torch's own numbers
    chips = re.findall(r"<text[^>]*>([^<]*)</text>", diagram_svg(trace))
    assert "[0, 2]" in chips
    assert "[0, 2.00]" not in chips
