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


def _gunzip(b64: str) -> str:
    return gzip.decompress(base64.b64decode(b64)).decode("utf-8")


def player_page(output: Any) -> str:
    """The page a show() output's iframe opens: the player's code (from this cell, when it
    carries it) with the cell's own trace and layout put in."""
    cell = output["data"]["text/html"]
    assert "script src=" not in cell
    frame = cell[cell.index('<iframe class="gradtrace-player"') :]
    inner = html.unescape(re.search(r'srcdoc="([^"]*)"', frame).group(1))
    whole = re.search(r'id="gradtrace-page">([A-Za-z0-9+/=]+)</script>', inner)
    if whole:  # no Node: the whole page travels in the cell
        return _gunzip(whole.group(1))
    data = _gunzip(re.search(r'id="gradtrace-trace">([A-Za-z0-9+/=]+)</script>', inner).group(1))
    code = re.search(r'id="gradtrace-player-[0-9a-f]+">([A-Za-z0-9+/=]+)</script>', cell)
    slot = '<script type="application/json" id="gradtrace-data">__GRADTRACE_PAYLOAD__</script>'
    return (_gunzip(code.group(1)) if code else slot).replace("__GRADTRACE_PAYLOAD__", data)


def player_outputs(nb: Any) -> list[Any]:
    return [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "gradtrace-player" in o.get("data", {}).get("text/html", "")
    ]


@pytest.mark.slow
def test_the_players_code_travels_once_per_notebook(executed: Any) -> None:
    outputs = player_outputs(executed)
    assert len(outputs) >= 2
    carries = ['id="gradtrace-player-' in o["data"]["text/html"] for o in outputs]
    assert carries == [True] + [False] * (len(outputs) - 1), carries
    assert "createRenderer" in player_page(outputs[0])
    sizes = [len(json.dumps(o)) for o in outputs]
    print("notebook player outputs (bytes):", sizes)
    assert sizes[0] <= 250_000


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
    # the layout computed at export time: the layout engine does not travel
    assert '"layout": {"width"' in page and "g.ELK = f()" not in page
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
    # (a drawing slower than 2 s, on a loaded machine, first prints its progress line on stderr)
    shown = [o for o in code_cell(executed, "quickstart.svg").outputs if "data" in o]
    svg = shown[0]["data"]["image/svg+xml"]
    assert "<svg" in svg and "TanhBackward0" in svg


def test_keep_values_keeps_a_budget_of_numbers_and_every_statistic() -> None:
    from svg_checks import example_trace

    from gradtrace.render.source import keep_values

    doc = json.loads(example_trace("mlp-hooks-reconstruction").to_json())
    before = json.dumps(doc)
    small = keep_values(doc, budget=10)
    assert json.dumps(doc) == before  # the input is not changed
    assert len(tensors(small)) == len(tensors(doc))  # every tensor is still there, with its stats
    kept = [t for t in with_numbers(small) if _numel(t["shape"]) > 3]
    assert sum(_numel(t["shape"]) for t in kept) <= 10
    assert all(t in with_numbers(small) for t in with_numbers(doc) if _numel(t["shape"]) <= 3)
    reduced = len(with_numbers(doc)) - len(with_numbers(small))
    assert reduced > 0 and small["limits"]["values_truncated"] == doc["limits"]["values_truncated"] + reduced
    assert all(t["truncated"] for t in tensors(small) if t not in tensors(doc))
    assert keep_values(doc, budget=10**9) == doc
    # a block of tensor_data is kept once for every value that shows it, and renumbered
    blocks = {t["data"] for t in with_numbers(small) if t["data"] is not None}
    assert blocks == set(range(len(small["tensor_data"])))
    assert all(
        small["tensor_data"][t["data"]] == doc["tensor_data"][d["data"]]
        for t, d in zip(tensors(small), tensors(doc), strict=True)
        if t["data"] is not None
    )


def tensors(doc: Any) -> list[dict]:
    """Every tensor value in the trace, in document order."""
    return [t for t in _walk(doc) if isinstance(t, dict) and "shape" in t and "stats" in t]


def with_numbers(doc: Any) -> list[dict]:
    return [t for t in tensors(doc) if t.get("values") is not None or t.get("data") is not None]


def _walk(node: Any) -> Any:
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    for child in children:
        yield from _walk(child)


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


@pytest.mark.slow
def test_any_trace_makes_a_cell_under_1_mb() -> None:
    # A trace made with the default budget (all numbers) as a cell's last value: _repr_html_.
    import torch

    import gradtrace

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    trace = gradtrace.trace(encoder, torch.randn(8, 16, 64), lambda out: out.pow(2).mean())
    assert len(trace.to_json_bytes()) > 2 * MAX_CELL_BYTES
    cell = trace._repr_html_()
    assert len(cell) <= MAX_CELL_BYTES, f"{len(cell):,} bytes"
    assert embedded_trace(player_page({"data": {"text/html": cell}}))["limits"]["values_truncated"] > 0


def test_show_outside_a_notebook_says_what_to_do_instead(two_layer: Any) -> None:
    import gradtrace
    from gradtrace.render import RenderUnavailable

    with pytest.raises(RenderUnavailable, match=r"trace.save\('trace.html'\)"):
        gradtrace.show(two_layer)
    with pytest.raises(RenderUnavailable, match=r"trace.save\('trace.html'\)"):
        two_layer.show()  # the method a Trace's user reaches for first
    with pytest.raises(TypeError, match="already made"):
        gradtrace.show(two_layer, inputs=1)
