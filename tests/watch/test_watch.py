"""gradtrace.watch: training unchanged, the recorded numbers PyTorch's own, the flags, the
run on disk (killed mid-training, read while written)."""

from __future__ import annotations

import gc
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from watch_models import DeepMLP, SmallCNN, cnn_step, gpt2_step, gpt2_tiny, mlp_step, train

import gradtrace

CASES = {
    "mlp": (lambda: DeepMLP(depth=3, residual_relu=True), mlp_step),
    "cnn": (SmallCNN, cnn_step),
    "gpt2": (gpt2_tiny, gpt2_step),
}


@pytest.mark.parametrize("every", [1, 3])
@pytest.mark.parametrize("case", list(CASES))
def test_weights_bit_equal_to_an_unwatched_run(case: str, every: int, tmp_path: Path) -> None:
    make, loss_at = CASES[case]
    torch.manual_seed(0)
    plain = train(make(), loss_at, 7)
    torch.manual_seed(0)
    model = make()
    with gradtrace.watch(model, tmp_path / "run", every=every, full_traces=every == 1):
        train(model, loss_at, 7)
    for (name, a), b in zip(plain.state_dict().items(), model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    run = gradtrace.load_run(tmp_path / "run")
    assert run.steps == list(range(0, 7, every))
    assert all(isinstance(v, float) and math.isfinite(v) for v in run.loss)
    if every == 1:
        assert run.trace_steps[0] == "first logged step"
        trace = gradtrace.Trace.from_json(run.trace_bytes(0))  # the graph and its values
        assert len(trace.doc.graph.nodes) > 3 and trace.doc.grads


@pytest.mark.parametrize("case", ["mlp", "gpt2"])
def test_the_first_logged_steps_full_trace_is_the_real_step(case: str, tmp_path: Path) -> None:
    """The saved trace is the loop's own step, recorded as it ran: the loop's loss (not the
    output's sum), the final grads are ``p.grad`` after that step's backward, and the loop's
    optimizer step is in it, with the parameters as it left them."""
    make, loss_at = CASES[case]
    torch.manual_seed(0)
    model = make()
    losses: list[torch.Tensor] = []
    grads: dict[str, torch.Tensor] = {}
    stepped: dict[str, torch.Tensor] = {}

    def loss_of(m: torch.nn.Module, step: int) -> torch.Tensor:
        if step == 1:  # (the parameters after step 0's optimizer step)
            stepped.update({n: p.detach().clone() for n, p in m.named_parameters()})
        loss = loss_at(m, step)
        losses.append(loss.detach().clone())
        return loss

    def each(step: int) -> None:  # after backward, before the optimizer's step
        if step == 0:
            grads.update({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})

    with gradtrace.watch(model, tmp_path / "run", every=1):
        train(model, loss_of, 3, each=each)
    run = gradtrace.load_run(tmp_path / "run")
    assert run.trace_steps == {0: "first logged step"} and run.steps == [0, 1, 2]
    trace = gradtrace.Trace.from_json(run.trace_bytes(0))
    assert trace.value("loss").item() == losses[0].item() == run.loss[0]
    assert [p.label for p in trace.doc.passes] == ["forward #1", "backward #1 of loss", "SGD.step #1"]
    assert grads and {n: g for n, g in trace.grads.items() if g is not None}.keys() == grads.keys()
    for name, grad in grads.items():
        assert np.array_equal(trace.grads[name], grad.numpy()), name
    [step] = [e for e in trace.events if e.kind == "optimizer_step"]
    assert step.payload["optimizer"] == "SGD" and step.payload["after"].keys() == grads.keys()
    kept = [name for name, after in step.payload["after"].items() if not after.get("truncated")]
    assert kept  # (the numbers kept within the trace's value budget: all of the MLP's)
    for name in kept:
        assert np.array_equal(trace.array(step.payload["after"][name]), stepped[name].numpy()), name
    # the watch's hooks are not the model's: none wrapped, none listed as unrecorded
    assert not [d.code for d in trace.doc.analyses.diagnostics if "hook" in d.code]


def test_the_traced_step_records_what_an_untraced_one_does(tmp_path: Path) -> None:
    """The capture's hooks and the watch's leave each other alone: the traced step's numbers
    are those of the same run without full traces."""
    runs = []
    for traced in (True, False):
        torch.manual_seed(0)
        model = DeepMLP(depth=3, residual_relu=True)
        with gradtrace.watch(model, tmp_path / f"run{traced}", every=1, full_traces=traced):
            train(model, mlp_step, 2)
        runs.append(gradtrace.load_run(tmp_path / f"run{traced}"))
    assert runs[0].trace_steps and not runs[1].trace_steps
    for step in (0, 1):
        assert runs[0].step_values(step) == runs[1].step_values(step)


class NestedBuffer(torch.nn.Module):
    """A model with a tensor the recorder cannot read (a nested tensor)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 1)
        self.register_buffer(
            "ragged", torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def test_a_step_the_recorder_refuses_leaves_the_run_going(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gradtrace.engine import step_capture

    torch.manual_seed(0)
    model = NestedBuffer()
    with pytest.warns(RuntimeWarning, match="no full trace of this step.*nested tensor"):
        with gradtrace.watch(model, tmp_path / "nested", every=1):
            train(model, mlp_step, 2)
    run = gradtrace.load_run(tmp_path / "nested")
    assert run.steps == [0, 1] and not run.trace_steps
    assert [(f.kind, f.step) for f in run.flags] == [("no_full_trace", 0)]
    assert "nested tensor" in run.flags[0].message
    # a graph past the node limit: refused at the step's end, never in the middle of it
    monkeypatch.setattr(step_capture, "LIBRARY_MAX_NODES", 5)
    torch.manual_seed(0)
    plain = train(DeepMLP(depth=3), mlp_step, 2)
    torch.manual_seed(0)
    model = DeepMLP(depth=3)
    with pytest.warns(RuntimeWarning, match="more than max_nodes=5"):
        with gradtrace.watch(model, tmp_path / "big", every=1):
            train(model, mlp_step, 2)
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), model.parameters(), strict=True))
    run = gradtrace.load_run(tmp_path / "big")
    assert run.steps == [0, 1] and not run.trace_steps
    assert [(f.kind, f.step) for f in run.flags] == [("no_full_trace", 0)]
    assert torch.overrides._get_current_function_mode_stack() == []  # nothing of the capture left


class MakesUnreadable(torch.nn.Module):
    """A forward that makes a tensor whose numbers gradtrace cannot read: a nested (jagged)
    tensor, or a ``__torch_dispatch__`` wrapper subclass (no storage of its own)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.fc = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        if self.kind == "nested":
            rows = torch.nested.as_nested_tensor([h[:3], h[3:]], layout=torch.jagged)
            h = h + (rows * 2).values()
        else:
            from torch.testing._internal.two_tensor import TwoTensor

            h = h + (TwoTensor(h, h * 2) * 3).a
        return self.head(torch.tanh(h))


@pytest.mark.parametrize("kind", ["nested", "subclass"])
def test_a_tensor_made_in_the_forward_that_the_recorder_cannot_read_never_breaks_training(
    kind: str, tmp_path: Path
) -> None:
    """The full trace's recording fails inside the step: the step runs on as without gradtrace
    (weights bit-equal), the trace is dropped, and the run says why (a flag, and a warning)."""
    torch.manual_seed(0)
    plain = train(MakesUnreadable(kind), mlp_step, 4)
    torch.manual_seed(0)
    model = MakesUnreadable(kind)
    with pytest.warns(RuntimeWarning, match="no full trace of this step.*UnreadableTensor"):
        with gradtrace.watch(model, tmp_path / "run", every=1):
            train(model, mlp_step, 4)
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), model.parameters(), strict=True))
    run = gradtrace.load_run(tmp_path / "run")
    assert run.steps == [0, 1, 2, 3] and not run.trace_steps  # (a failed trace is not tried again)
    assert [(f.kind, f.step) for f in run.flags] == [("no_full_trace", 0)]
    what = "a nested tensor" if kind == "nested" else "a TwoTensor"
    assert f"cannot read the numbers of {what}" in run.flags[0].message
    assert torch.overrides._get_current_function_mode_stack() == []  # nothing of the capture left
    assert gc.isenabled()


def test_a_traced_step_no_optimizer_step_follows_ends_at_the_next_forward(tmp_path: Path) -> None:
    """Gradient accumulation: the traced step's trace ends at the next forward, with no
    optimizer step in it, and nothing the loop computes after the backward (here a graph of
    its own, never backpropagated) is recorded."""
    torch.manual_seed(0)
    model = DeepMLP(depth=2)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with gradtrace.watch(model, tmp_path / "run", every=1):
        for step in range(4):  # two backward passes per optimizer step
            mlp_step(model, step).backward()
            (model.head.weight * 2).sum()  # (the loop's own computing: not the step's)
            if step % 2:
                opt.step()
                opt.zero_grad()
    run = gradtrace.load_run(tmp_path / "run")
    trace = gradtrace.Trace.from_json(run.trace_bytes(0))
    assert [p.label for p in trace.doc.passes] == ["forward #1", "backward #1 of loss"]
    assert not [e for e in trace.events if e.kind == "optimizer_step"]
    assert torch.overrides._get_current_function_mode_stack() == []


class SubclassOutput(torch.nn.Module):
    """A model whose output, and so every gradient of the backward, is a ``__torch_dispatch__``
    wrapper subclass (its norms cannot be read to the host as numbers)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.testing._internal.two_tensor import TwoTensor

        h = self.fc(x)
        return TwoTensor(h, h * 2) * 3


def test_a_step_the_watch_cannot_read_is_not_logged_and_never_breaks_training(tmp_path: Path) -> None:
    """The watch's own numbers fail (a gradient it cannot read to the host): the step runs on
    as without it, is not logged, and the run says why, once."""

    def loss_at(m: torch.nn.Module, step: int) -> torch.Tensor:
        return m(torch.randn(8, 16, generator=torch.Generator().manual_seed(step))).sum()

    torch.manual_seed(0)
    plain = train(SubclassOutput(), loss_at, 3)
    torch.manual_seed(0)
    model = SubclassOutput()
    with pytest.warns(RuntimeWarning, match="step 0 was not logged: RuntimeError"):
        with gradtrace.watch(model, tmp_path / "run", every=1, full_traces=False):
            train(model, loss_at, 3)
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), model.parameters(), strict=True))
    run = gradtrace.load_run(tmp_path / "run")
    assert run.steps == []
    assert [(f.kind, f.step) for f in run.flags] == [("not_logged", 0)]
    assert "tensor subclasses" in run.flags[0].message


def test_a_traced_forward_without_backward_passes_the_trace_to_the_next_step(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = DeepMLP(depth=2)
    with gradtrace.watch(model, tmp_path / "run", every=1):
        model(torch.randn(4, 16))  # an evaluation with grad on: no backward follows
        train(model, mlp_step, 2)
    run = gradtrace.load_run(tmp_path / "run")
    assert run.steps == [1, 2] and run.trace_steps == {1: "first logged step"}
    trace = gradtrace.Trace.from_json(run.trace_bytes(1))
    assert [p.label for p in trace.doc.passes] == ["forward #1", "backward #1 of loss", "SGD.step #1"]
    assert torch.overrides._get_current_function_mode_stack() == []


@pytest.mark.parametrize("case", ["mlp", "gpt2"])
def test_param_grad_norms_are_p_grad_norm_at_every_logged_step(case: str, tmp_path: Path) -> None:
    make, loss_at = CASES[case]
    torch.manual_seed(0)
    model = make()
    oracle: dict[int, dict[str, torch.Tensor]] = {}

    def each(step: int) -> None:  # after backward, before the optimizer's step
        oracle[step] = {n: p.grad.norm() for n, p in model.named_parameters() if p.grad is not None}

    with gradtrace.watch(model, tmp_path / "run", every=2, full_traces=False):
        train(model, loss_at, 6, each=each)
    run = gradtrace.load_run(tmp_path / "run")
    assert run.steps == [0, 2, 4]
    for name in run.parameters:
        recorded = run.grad_norm(name)
        expected = [oracle[s].get(name) for s in run.steps]
        for got, want in zip(recorded, expected, strict=True):
            assert (got is None) == (want is None), name
            if want is not None:
                assert torch.tensor(got, dtype=want.dtype) == want, (name, got, want.item())


def test_weight_norms_and_update_ratios_are_torchs(tmp_path: Path) -> None:
    """‖w‖ before the optimizer's step and ‖Δw‖/‖w‖ across it, as torch computes them from a
    copy of the weights (float32 recorded: a relative tolerance of 1e-6); a parameter the
    optimizer does not step has its norm and no ratio."""
    torch.manual_seed(0)
    model = DeepMLP(depth=3, residual_relu=True)
    stepped = [p for n, p in model.named_parameters() if n != "head.bias"]
    opt = torch.optim.SGD(stepped, lr=0.05, momentum=0.9)
    before: dict[int, dict[str, torch.Tensor]] = {}
    after: dict[int, dict[str, torch.Tensor]] = {}
    with gradtrace.watch(model, tmp_path / "run", every=2, full_traces=False):
        for step in range(5):
            opt.zero_grad()
            mlp_step(model, step).backward()
            before[step] = {n: p.detach().clone() for n, p in model.named_parameters()}
            opt.step()
            after[step] = {n: p.detach().clone() for n, p in model.named_parameters()}
    run = gradtrace.load_run(tmp_path / "run")
    assert run.steps == [0, 2, 4]
    for name in run.parameters:
        for k, step in enumerate(run.steps):
            w = before[step][name].norm().item()
            assert run.param_norm(name)[k] == pytest.approx(w, rel=1e-6), (name, step)
            ratio = run.update_ratio(name)[k]
            if name == "head.bias":
                assert ratio is None
            else:
                dw = (after[step][name] - before[step][name]).norm().item()
                assert ratio == pytest.approx(dw / w, rel=1e-5), (name, step)


def test_node_keys_stable_and_in_engine_order(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = DeepMLP(depth=3, residual_relu=True)
    with gradtrace.watch(model, tmp_path / "run", full_traces=False):
        train(model, mlp_step, 3)
    run = gradtrace.load_run(tmp_path / "run")
    keys = [n.key for n in run.nodes]
    assert keys[0] == "(loss)/MseLossBackward0#0"  # the root runs first
    assert "layers.2/AddmmBackward0#0" in keys and "(model)/ReluBackward0#2" in keys
    assert "layers.0/AccumulateGrad#weight" in keys
    edges = set(run.edges)  # the graph, as the viewer draws it
    assert ("(loss)/MseLossBackward0#0", "head/AddmmBackward0#0") in edges
    assert ("layers.2/AddmmBackward0#0", "layers.2/AccumulateGrad#bias") in edges
    per_step = [list(run.step_values(s)["nodes"]) for s in run.steps]
    assert per_step[0] == per_step[1] == per_step[2]  # the same keys, in the same order
    # what flows out of the last Linear's Addmm is what its ReLU received (one consumer)
    v = run.step_values(1)["nodes"]
    assert v["layers.2/AddmmBackward0#0"]["grad_out"] > 0
    relu = run.node_zero_fraction("(model)/ReluBackward0#0")
    assert all(0 < z < 1 for z in relu)
    assert run.update_ratio("layers.0.weight")[0] > 0


def test_the_sigmoid_mlp_vanishes_its_relu_residual_twin_does_not(tmp_path: Path) -> None:
    kinds = {}
    for residual in (False, True):
        torch.manual_seed(0)
        model = DeepMLP(depth=8, residual_relu=residual)
        path = tmp_path / f"run{residual}"
        with gradtrace.watch(model, path, every=1, full_traces=False):
            train(model, mlp_step, 5)
        kinds[residual] = {f.kind: f for f in gradtrace.load_run(path).flags}
    vanishing = kinds[False]["vanishing"]
    assert vanishing.step == 0 and vanishing.node == "layers.0/AccumulateGrad#weight"
    assert "vanishing" not in kinds[True] and "exploding" not in kinds[True]


def test_a_nan_at_step_17_flags_nonfinite_at_step_17_and_arms_a_full_trace(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = DeepMLP(depth=3, residual_relu=True)

    def loss_at(m: torch.nn.Module, step: int) -> torch.Tensor:
        loss = mlp_step(m, step)
        return loss * torch.nan if step == 17 else loss

    with gradtrace.watch(model, tmp_path / "run", every=1):
        train(model, loss_at, 19)
    run = gradtrace.load_run(tmp_path / "run")
    nonfinite = [f for f in run.flags if f.kind == "nonfinite"]
    assert len(nonfinite) == 1 and nonfinite[0].step == 17
    assert run.trace_steps == {0: "first logged step", 18: "flag: nonfinite"}


def test_each_flag_kind_arms_one_full_trace_the_first_time_it_fires(tmp_path: Path) -> None:
    """The head stops moving at step 0 (stalled at step 4: a trace of step 5); the layers at
    step 6 (stalled again at step 10, at other parameters: no second trace for the kind)."""
    torch.manual_seed(0)
    model = DeepMLP(depth=3, residual_relu=True)
    head = list(model.head.parameters())
    layers = list(model.layers.parameters())
    opt = torch.optim.SGD([{"params": head, "lr": 0.0}, {"params": layers, "lr": 0.05}])
    with gradtrace.watch(model, tmp_path / "run", every=1):
        for step in range(13):
            if step == 6:
                opt.param_groups[1]["lr"] = 0.0
            opt.zero_grad()
            mlp_step(model, step).backward()
            opt.step()
    run = gradtrace.load_run(tmp_path / "run")
    stalled = {f.node: f.step for f in run.flags if f.kind == "stalled"}
    assert stalled == {
        "head.weight": 4,
        "head.bias": 4,
        **{n: 10 for n, _p in model.layers.named_parameters(prefix="layers")},
    }
    assert [f.kind for f in run.flags] == ["stalled"] * 8
    assert run.trace_steps == {0: "first logged step", 5: "flag: stalled"}


def test_a_run_killed_at_step_20_keeps_its_steps_and_reads_while_written(tmp_path: Path) -> None:
    program = textwrap.dedent(
        f"""
        import sys, torch, gradtrace
        from watch_models import DeepMLP, mlp_step
        torch.manual_seed(0)
        model = DeepMLP(depth=3)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        with gradtrace.watch(model, {str(tmp_path / "run")!r}, full_traces=False):
            for step in range(10_000):
                if step == 20:
                    print("20", flush=True)
                    sys.stdin.readline()  # killed here, inside step 20
                opt.zero_grad()
                mlp_step(model, step).backward()
                opt.step()
        """
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(gradtrace.__file__).parents[1]), str(Path(__file__).parent)]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", program], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "20"
        live = gradtrace.load_run(tmp_path / "run")  # read while the writer holds it open
        assert len(live.steps) >= 19
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    run = gradtrace.load_run(tmp_path / "run")
    assert run.steps[:19] == list(range(19)) and len(run.steps) >= 19
    assert all(v is not None for v in run.grad_norm("layers.0.weight"))


def test_unlogged_steps_add_no_hooks(tmp_path: Path) -> None:
    model = DeepMLP(depth=2)
    plain_backward = torch.autograd.backward
    global_hooks = torch.nn.modules.module._global_forward_hooks
    seen = []
    model.layers[0].register_forward_hook(lambda *a: seen.append(len(global_hooks)))
    with gradtrace.watch(model, tmp_path / "run", every=5, full_traces=False):
        for step in range(6):
            loss = mlp_step(model, step)
            seen.append(torch.autograd.backward is not plain_backward)
            loss.backward()
    assert torch.autograd.backward is plain_backward
    # logged steps 0 and 5: module hooks during step 0's forward (step 5's made as many nodes:
    # it reuses step 0's module spans), the loss seen at backward
    assert seen == [1, True] + [0, False] * 4 + [0, True]
    assert gradtrace.load_run(tmp_path / "run").steps == [0, 5]


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="every"):
        gradtrace.watch(DeepMLP(), tmp_path / "a", every=0)
    with pytest.raises(TypeError, match="nn.Module"):
        gradtrace.watch(object(), tmp_path / "b")
    with gradtrace.watch(DeepMLP(), tmp_path / "c"):
        pass
    with pytest.raises(FileExistsError), gradtrace.watch(DeepMLP(), tmp_path / "c"):
        pass
    with pytest.raises(FileNotFoundError, match="no run"):
        gradtrace.load_run(tmp_path / "nothing")
    assert time.time() > 0


def test_plan_counts_the_graph_from_example_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    torch.manual_seed(0)
    model = DeepMLP(depth=3, residual_relu=True)
    before = [p.clone() for p in model.parameters()]
    with gradtrace.watch(model, tmp_path / "run", every=10, full_traces=False) as w:
        text = w.plan(torch.randn(8, 16))
        train(model, mlp_step, 1)
        after = w.plan()
    assert text in capsys.readouterr().out
    assert "one step in 10 logged" in text and "3 ReLU-like" in text and "per parameter (8)" in text
    assert f"{w.last_nodes} grad_fn nodes" in after
    torch.manual_seed(0)
    assert all(
        torch.equal(a, b)
        for a, b in zip(before, DeepMLP(depth=3, residual_relu=True).parameters(), strict=True)
    )


class Branchy(torch.nn.Module):
    """A forward that takes an extra op at some steps (data-dependent control flow)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 1)
        self.extra = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.a(x))
        if self.extra:
            h = h * 2
        return self.b(h)


def test_a_forward_of_another_shape_is_numbered_again(tmp_path: Path) -> None:
    model = Branchy()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gradtrace.watch(model, tmp_path / "run", every=2, full_traces=False):
        for step in range(6):
            model.extra = step == 2
            opt.zero_grad()
            mlp_step(model, step).backward()
            opt.step()
    run = gradtrace.load_run(tmp_path / "run")
    assert run.steps == [0, 3, 4]  # step 2 made one node more: logged at step 3 instead, renumbered
    keys = {n.key for n in run.nodes}
    assert {"a/AddmmBackward0#0", "(model)/TanhBackward0#0", "b/AddmmBackward0#0"} <= keys
    assert not any("MulBackward" in k for k in keys)


@pytest.mark.alone  # tracemalloc counts the whole process: run where no other test's threads allocate
def test_memory_stays_flat_over_many_logged_steps(tmp_path: Path) -> None:
    import tracemalloc

    # What the watch could keep per step is allocated by gradtrace's, torch's or sqlite3's code
    # (or this loop's); other threads of a long test session (a server, a browser's driver) are
    # not counted.
    ours = [
        tracemalloc.Filter(True, pattern) for pattern in ("*/gradtrace/*", "*/torch/*", "*sqlite3*", __file__)
    ]
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(2, 4), torch.randn(2, 1)
    snapshots = []
    with gradtrace.watch(model, tmp_path / "run", every=1, full_traces=False):
        tracemalloc.start()
        try:
            for step in range(600):
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
                if step in (199, 599):
                    snapshots.append(tracemalloc.take_snapshot().filter_traces(ours))
        finally:
            tracemalloc.stop()
    grown = snapshots[1].compare_to(snapshots[0], "lineno")
    # 400 logged steps later: nothing kept per step
    assert sum(stat.size_diff for stat in grown) < 64 * 1024, [str(stat) for stat in grown[:5]]
    run = gradtrace.load_run(tmp_path / "run")
    assert len(run.steps) == 600
    assert run.path.stat().st_size < 600 * 1024  # a few bytes per quantity (plus SQLite's pages)


@pytest.mark.parametrize("case", list(CASES))
def test_accumulate_nodes_listed_by_their_feeder_are_where_their_own_hooks_put_them(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parameter's AccumulateGrad node fed by one node is listed by that node's hook (not
    hooked itself): the same order and numbers as with a hook on every node."""
    from gradtrace.engine import watch as engine_watch

    make, loss_at = CASES[case]
    runs = []
    for hook_every_node in (False, True):
        if hook_every_node:
            monkeypatch.setattr(engine_watch, "_single_feeds", lambda found, accumulates: {})
        torch.manual_seed(0)
        model = make()
        with gradtrace.watch(model, tmp_path / f"run{hook_every_node}", every=2, full_traces=False):
            train(model, loss_at, 5)
        runs.append(gradtrace.load_run(tmp_path / f"run{hook_every_node}"))
    listed, hooked = runs
    assert listed.steps == hooked.steps == [0, 2, 4]
    for step in listed.steps:
        a, b = listed.step_values(step), hooked.step_values(step)
        assert list(a["nodes"]) == list(b["nodes"])  # the engine's order
        assert a == b
