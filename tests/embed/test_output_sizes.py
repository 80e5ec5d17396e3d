"""How much a saved player weighs: the standalone HTML of a small model ≤ 400 KB (it was ~2 MB
while the 1.6 MB layout engine travelled in it), laid out at export time and gzipped."""

from __future__ import annotations

import pytest
from svg_checks import example_trace

from gradtrace.render import standalone_html

MAX_SMALL_MODEL_HTML = 400_000


@pytest.mark.parametrize(
    "name", ["two-layer-linear", "conv-net", "tiny-attention", "mlp-hooks-reconstruction"]
)
def test_standalone_html_of_a_small_model_is_light(name: str) -> None:
    page = standalone_html(example_trace(name))
    size = len(page.encode("utf-8"))
    print(f"{name}: standalone HTML {size:,} bytes")
    assert size <= MAX_SMALL_MODEL_HTML, f"{size:,} bytes"
    assert "g.ELK = f()" not in page  # laid out at export time: the layout engine stays home
    assert 'id="gradtrace-packed-player"' in page and 'id="gradtrace-packed-data"' in page
