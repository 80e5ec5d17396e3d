"""A pasted program that calls ``gradtrace.watch``, posted to ``POST /api/v1/run``: its run comes
back as the run view's document (``runs/view_data.py``), checked against plain PyTorch.

The gallery's two programs (GET /program-examples) as posted: the sigmoid MLP flags
``vanishing`` at step 0 on layers.0's weight, its ReLU + residual twin flags nothing, and the
norms the run view shows are ``p.grad.norm()`` of the same loop run here without gradtrace.
A program that watches nothing is a 422 at the line of its call; one past the service's step
budget is sampled, and the document says what it cut.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import torch
from server_process import ServerProcess, runner_server

import gradtrace
from gradtrace.service import jail_watch

pytestmark = pytest.mark.slow


# the service's budget for a run's document, set lower than its default (500 steps): a
# setting like the others (GRADTRACE_RUN_WATCH_STEPS), reaching the jail with each run
MAX_STEPS = 100


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with runner_server(
        tmp_path_factory.mktemp("run_watch"), {"GRADTRACE_RUN_WATCH_STEPS": str(MAX_STEPS)}
    ) as proc:
        yield proc


def post(server: ServerProcess, source: str) -> httpx.Response:
    return httpx.post(server.url + "/api/v1/run", json={"python": source}, timeout=120)


def program(server: ServerProcess, program_id: str) -> str:
    return httpx.get(f"{server.url}/api/v1/program-examples/{program_id}", timeout=30).json()["python"]


def plain_norms(source: str, param: str, steps: int) -> list[float]:
    """``p.grad.norm()`` of ``param`` at each step of the program's loop, run here without
    gradtrace: the program up to its ``with gradtrace.watch`` line, then the same loop."""
    setup = source.split("with gradtrace.watch")[0]
    namespace: dict[str, Any] = {"__name__": "__main__"}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the jail
    try:
        exec(compile(setup, "<program>", "exec"), namespace)
        model, optimizer, x, y = (namespace[k] for k in ("model", "optimizer", "x", "y"))
        weight = dict(model.named_parameters())[param]
        norms = []
        for _ in range(steps):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            norms.append(float(weight.grad.norm()))
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return norms


def test_the_gallery_pair_vanishes_on_one_and_flows_on_the_other(server: ServerProcess) -> None:
    sigmoid = program(server, "watch-sigmoid-mlp")
    r = post(server, sigmoid)
    assert r.status_code == 200, r.text[:500]
    doc = r.json()
    assert doc["exception"] is None, doc["exception"]
    run = doc["watch"]
    assert run["format"] == "gradtrace-run-view/1" and run["steps"] == list(range(50)) and not run["cut"]
    first = run["flags"][0]
    assert (first["kind"], first["step"], first["node"]) == ("vanishing", 0, "layers.0/AccumulateGrad#weight")
    assert "vanishing at step 0 on layers.0/AccumulateGrad#weight" in doc["stdout"]
    keys = [n["key"] for n in run["nodes"]]
    column = keys.index("layers.0/AccumulateGrad#weight")
    shown = [row[column] for row in run["grad_out"]]
    assert shown == pytest.approx(plain_norms(sigmoid, "layers.0.weight", 50), rel=1e-6)  # float32 kept
    assert shown[0] < 1e-6
    # the first logged step's full trace is the answer's trace: the player draws it
    assert doc["trace"]["schema_version"] and run["traces"]["0"] == "first logged step"
    assert doc["trace"] == run["full_traces"]["0"]
    # it is the program's real step 0: its mse_loss (the run's loss at step 0), then its backward
    # and its optimizer's step
    trace = gradtrace.Trace.from_dict(doc["trace"])
    assert trace.value("loss").item() == run["loss"][0]
    assert [p.label for p in trace.doc.passes] == ["forward #1", "backward #1 of loss", "SGD.step #1"]

    relu = post(server, program(server, "watch-relu-residual")).json()
    assert relu["exception"] is None
    assert [f for f in relu["watch"]["flags"] if f["kind"] == "vanishing"] == []
    column = [n["key"] for n in relu["watch"]["nodes"]].index("layers.0/AccumulateGrad#weight")
    assert relu["watch"]["grad_out"][0][column] > 0.1


WATCHES_NOTHING = """import torch
import gradtrace as gt

model = torch.nn.Linear(2, 1)
with gt.watch(model, "runs/idle"):
    with torch.no_grad():
        model(torch.ones(1, 2))
"""

MANY_STEPS = f"""import torch
from gradtrace import watch

model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.ones(4, 2)
with watch(model, "runs/long", full_traces=False):
    for step in range({MAX_STEPS + 40}):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
"""


def test_a_program_that_watches_nothing_is_told_why_at_its_line(server: ServerProcess) -> None:
    r = post(server, WATCHES_NOTHING)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "watch_empty" and error["line"] == 5
    assert "logged no step" in error["message"] and "no_grad" in error["message"]


def test_a_run_past_the_step_budget_says_what_it_cut(server: ServerProcess) -> None:
    r = post(server, MANY_STEPS)
    assert r.status_code == 200, r.text[:500]
    run = r.json()["watch"]
    assert run["sampled"] and len(run["steps"]) <= MAX_STEPS + 1
    assert run["steps"][0] == 0 and run["steps"][-1] == MAX_STEPS + 39
    assert run["cut"] == [
        f"{len(run['steps'])} of the {MAX_STEPS + 40} logged steps are shown (sampled evenly: the "
        f"view holds at most {MAX_STEPS} steps; the first, the last and every flagged step are kept)"
    ]


REWRITES_ITS_RUN = """import sqlite3
import torch
import gradtrace

model = torch.nn.Linear(2, 1)
with gradtrace.watch(model, "/tmp/forged") as w:
    model(torch.ones(4, 2)).sum().backward()
db = sqlite3.connect("/tmp/forged/run.sqlite")
db.execute("UPDATE steps SET node_ids = x'00'")
db.commit()
"""


def test_a_program_that_rewrites_its_run_is_told_it_could_not_be_read_back(server: ServerProcess) -> None:
    # (before: 422 run_failed, "ended without a result (it exited or crashed outside Python)")
    r = post(server, REWRITES_ITS_RUN)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "watch_unreadable" and error["line"] == 6
    assert "/tmp/forged could not be read back" in error["message"], error["message"]


def test_watch_calls_are_found_under_any_name() -> None:
    assert jail_watch.watch_calls(WATCHES_NOTHING) == [5]
    assert jail_watch.watch_calls(MANY_STEPS) == [7]
    assert jail_watch.watch_calls("import torch\nw = torch.ones(2)\nw.watch = 1\n") == []
