"""A real notebook executed by nbclient (ipykernel): traces show inline, interactive, offline."""

from __future__ import annotations

import json

import nbformat
import pytest
from nbclient import NotebookClient

CELLS = [
    "import torch, gradtrace\n"
    "torch.manual_seed(0)\n"
    "model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())\n"
    "x = torch.randn(4, 3)\n"
    "gradtrace.show(model, x, lambda out: out.pow(2).sum())",
    "from gradtrace.examples import get_example\n"
    "t = gradtrace.trace_spec(get_example('two-layer-linear'))\n"
    "t",
]


@pytest.mark.slow
def test_notebook_shows_the_player_inline(tmp_path) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in CELLS])
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    for cell in nb.cells:
        outputs = [o for o in cell.outputs if o.output_type == "execute_result"]
        assert outputs, f"no result for {cell.source!r}: {cell.outputs}"
        html = outputs[0]["data"]["text/html"]
        # The player itself (bundled viewer JS, no <script src>) inside an isolated iframe.
        assert html.startswith('<iframe class="gradtrace-player"')
        assert "srcdoc=" in html and "createRenderer" in html and "script src=" not in html
        assert "gradtrace-data" in html
        assert outputs[0]["data"]["text/plain"].startswith("<gradtrace.Trace")
    # The trace travels inside: the spec example's nodes, by title and op names.
    import html as html_lib

    second = html_lib.unescape(nb.cells[1].outputs[0]["data"]["text/html"])
    data = json.loads(second.split('id="gradtrace-data">')[1].split("</script>")[0])
    assert data["trace"]["title"] and data["layout"]["nodes"]
    assert any(n["op"] == "AccumulateGrad" for n in data["trace"]["graph"]["nodes"])
    first = html_lib.unescape(nb.cells[0].outputs[0]["data"]["text/html"])
    assert "TanhBackward0" in first
