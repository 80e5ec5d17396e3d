"""A watched run read where users already look: TensorBoard's own reader, wandb.log dicts,
pandas; and a DDP run (gloo, 2 processes on the CPU) recorded after the all-reduce."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import msgspec
import pytest
import torch
from watch_models import DeepMLP, mlp_step, train

import gradtrace


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("runs") / "run"
    torch.manual_seed(0)
    model = DeepMLP(depth=3, residual_relu=True)

    def loss_at(m: torch.nn.Module, step: int) -> torch.Tensor:
        loss = mlp_step(m, step)
        return loss * torch.inf if step == 4 else loss

    with gradtrace.watch(model, path, every=2, full_traces=False):
        train(model, loss_at, 6)
    return path


def test_tensorboard_reads_the_event_files(run_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = gradtrace.load_run(run_dir)
    run.to_tensorboard(tmp_path / "tb")
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert (
        "loss" in tags
        and "grad_norm/layers.0.weight" in tags
        and "node_grad_out/layers.2/AddmmBackward0#0" in tags
    )
    loss = acc.Scalars("loss")
    assert [e.step for e in loss] == [0, 2, 4] and loss[2].value == float("inf")
    got = [e.value for e in acc.Scalars("grad_norm/layers.0.weight")]
    want = run.grad_norm("layers.0.weight")
    assert got[:2] == pytest.approx(want[:2], rel=1e-7)
    assert [e.step for e in acc.Scalars("flags/nonfinite")] == [4]


def test_wandb_dicts_and_pandas(run_dir: Path) -> None:
    run = gradtrace.load_run(run_dir)
    rows = run.to_wandb()
    assert [r["step"] for r in rows] == run.steps == [0, 2, 4]
    assert rows[0]["loss"] == run.loss[0]
    assert rows[1]["grad_norm/layers.1.bias"] == run.grad_norm("layers.1.bias")[1]
    assert rows[2]["flags/nonfinite"] == 1.0 and "flags/nonfinite" not in rows[1]
    pd = pytest.importorskip("pandas")
    frame = run.to_pandas()
    assert isinstance(frame, pd.DataFrame)
    params = frame[(frame.kind == "param") & (frame.name == "layers.0.weight")]
    assert (
        list(params.step) == [0, 2, 4] and list(params.grad_norm)[:2] == run.grad_norm("layers.0.weight")[:2]
    )


def test_exports_without_their_package_name_it(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pandas and tensorboard are an extra: a run read without them says which one to install."""
    run = gradtrace.load_run(run_dir)
    for name in [m for m in sys.modules if m.split(".")[0] in ("pandas", "tensorboard")] + [
        "pandas",
        "tensorboard",
    ]:
        monkeypatch.setitem(sys.modules, name, None)  # (importing it raises ImportError)
    with pytest.raises(ImportError, match="run.to_pandas needs the pandas package: pip install pandas"):
        run.to_pandas()
    with pytest.raises(ImportError, match="run.to_tensorboard needs the tensorboard package"):
        run.to_tensorboard(run_dir.parent / "tb-missing")


def _ddp_rank(rank: int, world: int, port: int, run_dir: str) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model = DistributedDataParallel(DeepMLP(depth=2))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        with gradtrace.watch(model, run_dir, every=1, full_traces=False):
            for step in range(3):
                opt.zero_grad()
                mlp_step(model, 10 * rank + step).backward()  # each rank its own batch
                opt.step()
    finally:
        dist.destroy_process_group()


def test_ddp_ranks_record_after_the_all_reduce_and_read_as_one_run(tmp_path: Path) -> None:
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_ddp_rank, args=(2, port, str(tmp_path / "run")), nprocs=2, join=True)
    run = gradtrace.load_run(tmp_path / "run")
    assert run.ranks == [0, 1]
    assert run.steps == [0, 1, 2]
    # after the all-reduce both ranks hold the averaged gradient: one run, the same numbers
    for name in run.parameters:
        assert run.grad_norm(name) == run.rank(1).grad_norm(name)
    # the local gradients differed (each rank its own batch): the recorded ones are averaged
    first = run.node_grad_norm("(loss)/MseLossBackward0#0")
    assert first != run.rank(1).node_grad_norm("(loss)/MseLossBackward0#0")


def test_a_notebook_cell_ending_with_the_run_shows_its_view(run_dir: Path) -> None:
    """In IPython, a Run's rich output is the run view inline (the page's run document embedded,
    checked back by the view's own reader); plain-text front ends keep its repr."""
    pytest.importorskip("IPython")
    import base64
    import gzip
    import html
    import re

    from IPython.core.interactiveshell import InteractiveShell

    from gradtrace.runs.view_data import read_view

    shell = InteractiveShell.instance()
    run = gradtrace.load_run(run_dir)
    data, _ = shell.display_formatter.format(run)
    assert data["text/plain"].startswith("<gradtrace.runs.store.Run")
    cell = data["text/html"]
    assert cell.startswith('<iframe class="gradtrace-run"') and len(cell) < 100_000
    packed = re.search(r'id="gradtrace-page">([^<]+)<', html.unescape(cell))
    assert packed is not None
    page = gzip.decompress(base64.b64decode(packed.group(1))).decode()
    embedded = re.search(r'<script type="application/json" id="run-data">(.*?)</script>', page, re.S)
    assert embedded is not None
    view = read_view(embedded.group(1))
    assert view.steps == run.steps and [f.kind for f in view.flags] == [f.kind for f in run.flags]


def test_a_nan_loss_reads_back_as_nan_not_as_no_loss(tmp_path: Path) -> None:
    """SQLite stores a NaN REAL as NULL, which the run keeps for "no loss seen": a NaN loss must
    come back as NaN (None means only that no loss was seen)."""
    import math

    torch.manual_seed(0)
    model = DeepMLP(depth=2)

    def loss_at(m: torch.nn.Module, step: int) -> torch.Tensor:
        loss = mlp_step(m, step)
        return loss * torch.nan if step == 2 else loss

    with gradtrace.watch(model, tmp_path / "run", full_traces=False):
        train(model, loss_at, 3, lr=0.0)
    run = gradtrace.load_run(tmp_path / "run")
    assert run.loss[0] is not None and math.isnan(run.loss[2])
    assert math.isnan(run.step_values(2)["loss"])


def test_a_run_view_from_elsewhere_with_a_loss_that_is_no_number_is_refused(run_dir: Path) -> None:
    # (the jail's document is the pasted program's to forge: a loss of "pwned" went to the viewer)
    from gradtrace.runs.store import Run
    from gradtrace.runs.view_data import read_view, run_view

    with Run(run_dir) as run:
        doc = msgspec.to_builtins(run_view(run))
    doc["loss"][0] = "pwned"
    with pytest.raises(ValueError, match="a loss is 'pwned'"):
        read_view(msgspec.json.encode(doc))
    doc["loss"][0] = "NaN"
    assert read_view(msgspec.json.encode(doc)).loss[0] == "NaN"
