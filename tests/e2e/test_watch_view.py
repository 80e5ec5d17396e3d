"""``gradtrace view RUN_DIR``: the run view of a gradtrace.watch run, in real Chromium. The Step
slider moves the graph's colours (the gradient norms of another step); a flag's button goes to
its step and node; the inspector draws the node's sparkline."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "watch"))


@pytest.fixture(scope="module")
def sigmoid_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from watch_models import DeepMLP, mlp_step, train

    import gradtrace

    path = tmp_path_factory.mktemp("watch") / "sigmoid-mlp"
    torch.manual_seed(0)
    model = DeepMLP(depth=8)
    with gradtrace.watch(model, path, every=1, full_traces=False):
        train(model, mlp_step, 12, lr=0.5)
    return path


def _serve(run_dir: Path, tmp_path: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "GRADTRACE_WORKERS": "1", "GRADTRACE_DB": str(tmp_path / "p.db")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gradtrace", "view", str(run_dir), "--no-browser"],
        cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        found = re.search(r"http://\S+", line)
        if found:
            return proc, found.group(0)
    proc.kill()
    raise AssertionError(proc.stderr.read() if proc.stderr else "no URL printed")


def _fills(page: Any) -> list[str]:
    return page.eval_on_selector_all("#graph .watch-node rect", "rs => rs.map(r => r.getAttribute('fill'))")


def test_the_step_slider_moves_the_colours(
    page: Any, sigmoid_run: Path, tmp_path: Path, screenshots: Path
) -> None:
    proc, url = _serve(sigmoid_run, tmp_path)
    try:
        assert "/watch.html?run=sigmoid-mlp" in url
        page.goto(url)
        page.wait_for_selector("body.is-ready", timeout=60000)
        slider = page.get_by_role("slider", name="Step", exact=True)
        assert slider.get_attribute("type") == "range" and slider.get_attribute("max") == "11"
        assert slider.input_value() == "11"  # opens at the last logged step
        last = _fills(page)
        assert len(last) > 40 and len(set(last)) > 5  # a log-scale ramp, not one colour
        slider.fill("0")
        first = _fills(page)
        assert first != last
        assert page.locator("#step-now").inner_text().startswith("0 ")
        # the vanishing flag: its button goes to its step and node, whose sparkline is drawn
        flag = page.get_by_role("button", name=re.compile(r"^vanishing · step 0"))
        slider.fill("5")
        flag.click()
        assert slider.input_value() == "0"
        assert page.locator("#inspector h2").inner_text() == "layers.0/AccumulateGrad#weight"
        assert page.locator("#inspector .watch-spark polyline").count() == 1
        assert (
            page.locator(".watch-node.is-selected").get_attribute("data-key")
            == "layers.0/AccumulateGrad#weight"
        )
        page.get_by_role("button", name="Play").click()
        deadline = time.monotonic() + 20
        while slider.input_value() != "11" and time.monotonic() < deadline:
            page.wait_for_timeout(100)
        assert slider.input_value() == "11"  # played to the last step
        page.screenshot(path=str(screenshots / "watch-run-view.png"))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
