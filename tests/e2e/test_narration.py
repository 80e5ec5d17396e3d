"""The backward pass told as a story, in real Chromium: the Narration region follows the engine
through two-layer-linear, seed 002 (full-backward-hook) and freed-graph-error played to the end,
and its sentences carry the numbers plain PyTorch computes here — the gradients sent and the
local derivative of the chain-rule step — and PyTorch's own RuntimeError message."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from e2e_helpers import open_example, wait_step

pytestmark = pytest.mark.browser

KINDS = ("node_post", "node_pre", "grad_write", "pass_end", "pass_start", "module_backward", "node_created")


def num(x: float) -> str:
    """The narration's number: 4 significant digits, no trailing zeros, a real minus."""
    return f"{x:.4g}".replace("-", "\u2212")


def vec(t: torch.Tensor) -> str:
    flat = [float(v) for v in t.detach().reshape(-1)]
    return num(flat[0]) if len(flat) == 1 else "[" + ", ".join(num(v) for v in flat) + "]"


def factor(t: torch.Tensor) -> str:
    """A factor of the chain-rule product: a negative number in parentheses."""
    text = vec(t)
    return f"({text})" if text.startswith("\u2212") else text


def rows(t: torch.Tensor) -> str:
    return "[" + ", ".join("[" + ", ".join(num(float(v)) for v in r) + "]" for r in t.detach()) + "]"


def local_elementwise(f: Any, at: torch.Tensor) -> torch.Tensor:
    """∂f(v)/∂v at `at` for an elementwise f: autograd of the sum is the Jacobian's diagonal."""
    v = at.detach().clone().requires_grad_()
    (grad,) = torch.autograd.grad(f(v).sum(), v)
    return grad


def narration(page: Any) -> str:
    return page.get_by_role("region", name="Narration").inner_text()


def play_to_end(page: Any, trace: dict[str, Any]) -> None:
    page.locator("#speed").select_option("60")
    page.get_by_role("button", name="Play").click()
    wait_step(page, len(trace["events"]) - 1)
    page.wait_for_selector("body:not(.is-playing)", state="attached")


def seek(page: Any, step: int) -> None:
    page.evaluate(
        "(s) => { const r = document.getElementById('timeline'); r.value = s; r.dispatchEvent(new Event('input')); }",
        step,
    )
    wait_step(page, step)


def node_event(trace: dict[str, Any], kind: str, op: str, nth: int = 0, **match: Any) -> int:
    ops = {n["id"]: n for n in trace["graph"]["nodes"]}
    seqs = [
        e["seq"]
        for e in trace["events"]
        if e["kind"] == kind
        and ops.get(e.get("node"), {}).get("op") == op
        and all(ops[e["node"]].get(k) == v for k, v in match.items())
    ]
    return seqs[nth]


def assert_status_speaks_words(page: Any) -> None:
    status = page.locator("#current-event").inner_text()
    assert status and not any(k in status for k in KINDS), status


def test_two_layer_story(
    page: Any, live_server: str, example_traces: dict[str, Any], screenshots: Any
) -> None:
    trace = example_traces["two-layer-linear"]
    # the program, in plain PyTorch
    x = torch.tensor([[1.0, 2.0]])
    y = torch.tensor([[0.5, -0.5]])
    w0 = torch.tensor([[0.1, 0.2], [-0.3, 0.4], [0.5, -0.6]], requires_grad=True)
    w1 = torch.tensor([[0.7, -0.8, 0.9], [-0.1, 0.2, 0.3]], requires_grad=True)
    a0 = x @ w0.T
    a1 = a0 @ w1.T
    d = a1 - y
    p = d**2
    s = p.sum()
    loss = 0.5 * s
    for t in (a0, a1, d, p, s):
        t.retain_grad()
    loss.backward()

    open_example(page, live_server, "two-layer-linear")
    # a first visit: the story is in the backward pass, and ▶ calls for a click
    first = narration(page)
    assert "The story is in the backward pass" in first and "press ▶" in first
    assert page.locator("body.is-fresh").count() == 1
    assert "Press ▶" in page.locator("#follow-note").inner_text()
    play_to_end(page, trace)
    assert page.locator("body.is-fresh").count() == 0
    assert "backward #1 of L is done" in narration(page)
    assert f"W0.weight.grad = {vec(w0.grad)}" in narration(page)
    # the inspector followed the engine to its last node, nothing pinned
    last_node = next(e["node"] for e in reversed(trace["events"]) if e.get("node"))
    op = next(n for n in trace["graph"]["nodes"] if n["id"] == last_node)["op"]
    assert page.locator("#inspector h2").inner_text() == op
    assert "Following the engine" in page.locator("#follow-note").inner_text()

    seek(page, node_event(trace, "node_post", "MulBackward0"))
    text = narration(page)
    assert f"receives ∂L/∂L = 1 and sends ∂L/∂sum(pow(…)) = {vec(s.grad)} to SumBackward0" in text
    local = local_elementwise(lambda v: 0.5 * v, s)
    assert f"Local derivative ∂(a·b)/∂a = b = {vec(local)}" in text
    assert_status_speaks_words(page)

    seek(page, node_event(trace, "node_post", "PowBackward0"))
    text = narration(page)
    local = local_elementwise(lambda v: v**2, d)
    assert f"= 2·x = {vec(local)}" in text
    assert f"sends ∂L/∂sub(a1, y) = {vec(d.grad)} to SubBackward0" in text
    assert f"{vec(p.grad)} ⊙ {vec(local)} = {vec(d.grad)}" in text

    seek(page, node_event(trace, "node_post", "MmBackward0", tensor="a1"))
    text = narration(page)
    # ∂(a0·W1ᵀ)/∂a0: δ times (W1ᵀ)ᵀ = W1, the saved mat2's transpose
    assert f"multiply δ by Bᵀ = {rows(w1)}" in text
    assert f"∂L/∂a0 = {vec(a1.grad)} · Bᵀ = {vec(a0.grad)}" in text

    w1_leaf = next(n["id"] for n in trace["graph"]["nodes"] if n["label"] == "W1.weight")
    seek(page, next(e["seq"] for e in trace["events"] if e["kind"] == "grad_write" and e["node"] == w1_leaf))
    assert f"W1.weight.grad is written: None → {vec(w1.grad)}" in narration(page)
    assert_status_speaks_words(page)
    page.screenshot(path=str(screenshots / "narration-two-layer-1440.png"))


def test_seed002_hook_story(page: Any, live_server: str, example_traces: dict[str, Any]) -> None:
    trace = example_traces["full-backward-hook"]
    x = torch.tensor([0.3], requires_grad=True)
    x1 = 0.3 * x + 0.1
    x1.retain_grad()
    s = 0.4 * x1 + 0.2
    s.retain_grad()
    y = s**2
    y.retain_grad()
    loss = (y - 1) ** 2
    loss.backward()

    open_example(page, live_server, "full-backward-hook")
    play_to_end(page, trace)
    assert f"x.grad = {vec(x.grad)}" in narration(page)

    seek(page, next(e["seq"] for e in trace["events"] if e["kind"] == "module_backward"))
    text = narration(page)
    assert "The full backward hook on f1 sees" in text
    assert f"grad_output ∂loss/∂(f1's output) = {vec(y.grad)}" in text
    assert f"grad_input ∂loss/∂(f1's input) = {vec(x1.grad)}" in text
    assert "It returns None: nothing is changed." in text

    # PowBackward0 inside f1: y = s², local derivative 2s
    seek(page, node_event(trace, "node_post", "PowBackward0", module="f1"))
    text = narration(page)
    local = local_elementwise(lambda v: v**2, s)
    assert f"2·x = {vec(local)}" in text
    assert f"{factor(y.grad)} · {factor(local)} = {vec(s.grad)}" in text
    assert_status_speaks_words(page)


def test_freed_graph_error_story(
    page: Any, live_server: str, example_traces: dict[str, Any], screenshots: Any
) -> None:
    trace = example_traces["freed-graph-error"]
    x = torch.tensor(1.0, requires_grad=True)
    y = x**2
    y.backward()
    with pytest.raises(RuntimeError) as raised:
        y.backward()
    message = str(raised.value)

    open_example(page, live_server, "freed-graph-error")
    play_to_end(page, trace)
    banner = page.locator("#event-banner")
    assert banner.is_visible()
    assert f"PowBackward0 raised RuntimeError: {message}" == banner.inner_text()
    raised_node = next(e["node"] for e in trace["events"] if e["kind"] == "error")
    assert page.locator(f'#graph .gt-node.gt-raised[data-node-id="{raised_node}"]').count() == 1
    assert "backward #2 of y stopped: PowBackward0 raised RuntimeError" in narration(page)
    page.screenshot(path=str(screenshots / "narration-freed-graph-1440.png"))

    seek(page, next(e["seq"] for e in trace["events"] if e["kind"] == "error"))
    assert message in narration(page)
    seek(page, node_event(trace, "node_post", "PowBackward0"))
    text = narration(page)
    assert banner.is_hidden()
    assert (
        f"= 2·x = {vec(local_elementwise(lambda v: v**2, x))}" in text
        and f"sends ∂y/∂x = {vec(x.grad)} to AccumulateGrad (x)" in text
    )


def test_pinning_and_unpinning(page: Any, live_server: str, example_traces: dict[str, Any]) -> None:
    trace = example_traces["two-layer-linear"]
    open_example(page, live_server, "two-layer-linear")
    page.locator('#graph .gt-node[data-node-id="n11"]').click()
    note = page.locator("#follow-note")
    assert "Press Esc" in note.inner_text()
    play_to_end(page, trace)
    assert page.locator("#inspector h2").inner_text() == "PowBackward0"  # pinned: it stays
    note.get_by_role("button", name="Follow the engine").click()
    assert page.locator("body.has-selection").count() == 0
    assert "Following the engine" in note.inner_text()


@pytest.mark.parametrize("size", [(1280, 720), (1440, 900)])
def test_narration_fits_beside_the_graph(
    page: Any, live_server: str, screenshots: Any, size: tuple[int, int]
) -> None:
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_example(page, live_server, "two-layer-linear", "&step=30")
    wait_step(page, 30)
    region = page.get_by_role("region", name="Narration").bounding_box()
    graph = page.locator("#graph").bounding_box()
    assert region and graph
    assert region["x"] >= graph["x"] + graph["width"] - 0.5  # beside the graph, not over it
    assert region["y"] + region["height"] <= size[1] and region["height"] >= 60
    assert graph["height"] >= 0.6 * size[1]
    # the sentence and its chain-rule lines are there to read (the region scrolls past its height)
    assert "Local derivative" in narration(page)
    page.screenshot(path=str(screenshots / f"narration-two-layer-{size[0]}x{size[1]}.png"))


@pytest.mark.parametrize("example", ["two-layer-linear", "full-backward-hook", "freed-graph-error"])
def test_every_step_is_told_in_words(
    page: Any, live_server: str, example_traces: dict[str, Any], example: str
) -> None:
    """At every step of the three stories the Narration says something, in words (no event kind
    shown raw), and the forward construction explains once — at its first op — why forward nodes
    are named …Backward0."""
    trace = example_traces[example]
    open_example(page, live_server, example)
    why = []
    for step in range(len(trace["events"])):
        seek(page, step)
        text = narration(page)
        assert text.strip(), step
        assert not any(k in text for k in KINDS + ("error", "hook_call")) or "RuntimeError" in text, (
            step,
            text,
        )
        if "Why " in text and "…Backward" in text:
            why.append(step)
    first_op = next(
        e["seq"]
        for e in trace["events"]
        if e["kind"] == "node_created"
        and any(
            n["id"] == e["node"] and n["kind"] == "op" and not n.get("variable") and not n.get("inserted")
            for n in trace["graph"]["nodes"]
        )
    )
    assert why == [first_op]
    assert trace["events"][first_op]["phase"] == "forward"
