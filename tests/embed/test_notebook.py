"""The example notebook (docs/notebooks/quickstart.ipynb) executed by nbclient (ipykernel):
``show`` displays at once wherever it is in a cell, exactly once; the player and the trace
travel inside the output (offline); the 2-layer transformer's cell stays under 1 MB."""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "notebooks" / "quickstart.ipynb"
MAX_CELL_BYTES = 1_000_000


def player_page(output: Any) -> str:
    """The standalone page packed (gzip, base64) inside a show() output's iframe."""
    frame = output["data"]["text/html"]
    assert frame.startswith('<iframe class="gradtrace-player"') and "script src=" not in frame
    inner = html.unescape(re.search(r'srcdoc="([^"]*)"', frame).group(1))
    packed = re.search(r'id="gradtrace-page">([A-Za-z0-9+/=]+)</script>', inner).group(1)
    return gzip.decompress(base64.b64decode(packed)).decode("utf-8")


def embedded_trace(page: str) -> dict:
    found = re.search(r'<script type="application/json" id="gradtrace-data">(.*?)</script>', page, re.S)
    assert found, "no gradtrace-data block"
    return json.loads(found.group(1))["trace"]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    workdir = tmp_path_factory.mktemp("notebook")
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    ).execute()
    return nb


def code_cell(nb: Any, fragment: str) -> Any:
    return next(c for c in nb.cells if c.cell_type == "code" and fragment in c.source)


@pytest.mark.slow
def test_show_displays_once_wherever_it_is_in_the_cell(executed: Any) -> None:
    cell = code_cell(executed, "gradtrace.show(model, x")
    kinds = [o.output_type for o in cell.outputs]
    # The player comes first, before the print that follows the call; no execute_result repeats it.
    assert kinds == ["display_data", "stream"], kinds
    assert "the player is above this line" in cell.outputs[1]["text"]
    assert cell.outputs[0]["data"]["text/plain"].startswith("<gradtrace.Trace")
    page = player_page(cell.outputs[0])
    assert "createRenderer" in page and "g.ELK = f()" in page  # the player and its layout engine
    ops = {n["op"] for n in embedded_trace(page)["graph"]["nodes"]}
    assert {"TanhBackward0", "AddmmBackward0", "AccumulateGrad"} <= ops


@pytest.mark.slow
def test_the_transformer_cell_is_under_1_mb(executed: Any) -> None:
    cell = code_cell(executed, "gradtrace.show(encoder")
    (output,) = cell.outputs
    size = len(json.dumps(output))
    assert size <= MAX_CELL_BYTES, f"{size:,} bytes"
    trace = embedded_trace(player_page(output))
    assert len(trace["graph"]["nodes"]) > 150
    assert any(n["module"] == "layers.1.self_attn" for n in trace["graph"]["nodes"])


@pytest.mark.slow
def test_the_notebook_checks_its_numbers_and_draws_an_svg(executed: Any) -> None:
    # The gradient cell asserts against torch.autograd.grad: it ran, so the numbers matched.
    grads = code_cell(executed, "torch.autograd.grad")
    assert grads.outputs[0]["data"]["text/plain"] == "['0.bias', '0.weight', '2.bias', '2.weight']"
    svg = code_cell(executed, "quickstart.svg").outputs[0]["data"]["image/svg+xml"]
    assert "<svg" in svg and "TanhBackward0" in svg
