"""``gradtrace.record()`` around programs as people write them: the gradients and the weights
after the program are bit-equal to the same program run plainly (PyTorch itself is the
oracle), and what it prints is the same."""

from __future__ import annotations

import contextlib
import io
import re
import textwrap
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from engine_specs import SEED001_RETAIN
from record_programs import PROGRAMS, recorded_as_plain, run_program
from torch import nn

import gradtrace


@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_program_grads_and_weights_bit_equal_to_plain_run(program: str) -> None:
    recorded_as_plain(PROGRAMS[program])


def test_autograd_tutorial_trace_names_and_passes() -> None:
    recorded, _ = run_program(textwrap.dedent(PROGRAMS["autograd_tutorial"]), recorded=True)
    doc = recorded["rec"].trace.doc
    assert [p.label for p in doc.passes] == ["forward #1", "backward #1 of loss"]
    tensors = {n.tensor for n in doc.graph.nodes if n.kind == "tensor"}
    assert tensors == {"x", "y", "w", "b"}
    ops = {n.tensor: n.op for n in doc.graph.nodes if n.tensor in ("z", "loss")}
    assert ops == {"z": "AddBackward0", "loss": "BinaryCrossEntropyWithLogitsBackward0"}
    writes = [e.target for e in doc.events if e.kind == "grad_write"]
    assert sorted(doc.graph.nodes[int(t[1:])].tensor for t in writes) == ["b", "w"]
    assert set(doc.values) == {"x", "y", "w", "b", "z", "loss"}


def test_models_named_by_the_program_variables() -> None:
    recorded, _ = run_program(textwrap.dedent(PROGRAMS["quickstart"]), recorded=True)
    doc = recorded["rec"].trace.doc
    paths = {m.path for m in doc.graph.modules}
    assert {"model", "model.flatten", "model.linear_relu_stack.0", "loss_fn"} <= paths
    assert next(m for m in doc.graph.modules if m.path == "model.linear_relu_stack.0").parent == (
        "model.linear_relu_stack"
    )
    assert next(m for m in doc.graph.modules if m.path == "model").parent is None
    labels = [p.label for p in doc.passes if p.parent is None]
    assert labels == [
        "forward #1",
        "backward #1 of loss",
        "optimizer.step #1",
        "zero_grad",
        "forward #2",
        "backward #2 of loss",
        "optimizer.step #2",
        "zero_grad",
        "forward #3",
        "backward #3 of loss",
    ]


def test_record_in_a_function_names_its_locals_and_globals() -> None:
    torch.manual_seed(0)
    model = nn.Linear(3, 2)

    def train() -> gradtrace.Recording:
        data = torch.randn(4, 3)
        with gradtrace.record() as rec:
            loss = model(data).square().mean()
            loss.backward()
        return rec

    rec = train()
    assert set(rec.trace.grads) == {"model.weight", "model.bias"}
    assert torch.equal(torch.from_numpy(rec.trace.grads["model.weight"]), model.weight.grad)
    inputs = [n.tensor for n in rec.trace.doc.graph.nodes if n.kind == "tensor" and not n.requires_grad]
    assert inputs == ["data"]


def test_module_no_variable_holds_is_named_by_its_type() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3)
    with gradtrace.record() as rec:
        nn.Linear(3, 1)(x).sum().backward()
    assert {m.path for m in rec.trace.doc.graph.modules} == {"Linear#0"}
    assert set(rec.trace.grads) == {"Linear#0.weight", "Linear#0.bias"}


def test_exception_raised_as_plain_with_partial_trace() -> None:
    my_module = nn.Linear(2, 2)
    input_tensor = torch.tensor([[1.0, 2.0]], requires_grad=True)
    with pytest.raises(RuntimeError) as plain:
        my_module(input_tensor).backward()
    with pytest.raises(RuntimeError) as caught:
        with gradtrace.record() as rec:
            output = my_module(input_tensor)
            output.backward()  # non-scalar: PyTorch refuses
    assert type(caught.value) is type(plain.value) and str(caught.value) == str(plain.value)
    partial = caught.value.gradtrace_trace
    assert partial is rec.trace
    errors = [e for e in partial.doc.events if e.kind == "error"]
    assert len(errors) == 1 and "implicitly created only for scalar outputs" in (errors[0].message or "")
    assert [m.path for m in partial.doc.graph.modules] == ["my_module"]


def test_an_error_between_passes_is_a_pass_named_by_its_exception() -> None:
    # a program's own raise after a backward (no pass open): its error pass names the exception
    w = torch.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="diverged"):
        with gradtrace.record() as rec:
            (w * 3).sum().backward()
            raise ValueError("diverged")
    labels = [p.label for p in rec.trace.doc.passes]
    assert labels == ["forward #1", "backward #1 of tensor", "ValueError raised"]
    error = [e for e in rec.trace.doc.events if e.kind == "error"]
    assert len(error) == 1 and error[0].message == "diverged" and error[0].pass_index == 2


def test_one_capture_at_a_time() -> None:
    model = nn.Linear(2, 1)
    x = torch.ones(1, 2)
    with pytest.raises(RuntimeError, match="inside gradtrace.record"):
        with gradtrace.record():
            with gradtrace.record():
                pass
    with pytest.raises(RuntimeError, match=r"gradtrace.trace\(\) cannot start inside gradtrace.record"):
        with gradtrace.record():
            gradtrace.trace(model, x)
    with pytest.raises(RuntimeError, match=r"a spec run cannot start inside gradtrace.record"):
        with gradtrace.record():
            gradtrace.trace_spec(SEED001_RETAIN)

    class Recording(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with gradtrace.record():
                return x * 2

    with pytest.raises(RuntimeError, match=r"gradtrace.record\(\) cannot start inside gradtrace.trace"):
        gradtrace.trace(Recording(), x.clone().requires_grad_())
    # nothing stays on: a plain run afterwards records nothing and a new record() works
    with gradtrace.record() as rec:
        model(x).sum().backward()
    assert set(rec.trace.grads) == {"model.weight", "model.bias"}


def test_trace_read_inside_the_block_is_refused() -> None:
    with gradtrace.record() as rec:
        with pytest.raises(RuntimeError, match="when the `with gradtrace.record"):
            _ = rec.trace


def test_optimizer_steps_and_zero_grad_are_events_with_the_parameters_they_changed() -> None:
    recorded, _ = run_program(textwrap.dedent(PROGRAMS["adam_regression"]), recorded=True)
    trace = recorded["rec"].trace
    doc = trace.doc
    steps = [e for e in doc.events if e.kind == "optimizer_step"]
    assert len(steps) == 6  # 3 epochs of 2 batches
    assert [doc.passes[e.pass_index].label for e in steps] == [f"optimizer.step #{k}" for k in range(1, 7)]
    assert all(doc.passes[e.pass_index].phase == "step" for e in steps)
    last = steps[-1].payload
    assert last["optimizer"] == "Adam" and last["name"] == "optimizer" and last["lr"] == 0.01
    model = recorded["model"]
    assert set(last["after"]) == {f"model.{name}" for name, _p in model.named_parameters()}
    for name, param in model.named_parameters():  # the values after the last step: the final weights
        assert torch.equal(torch.from_numpy(trace.array(last["after"][f"model.{name}"])), param.detach())
    # the first zero_grad() clears nothing (no .grad yet): no event; each later one, every .grad
    cleared = [e for e in doc.events if e.kind == "zero_grad"]
    assert len(cleared) == 5
    assert all(sorted(e.payload["tensors"]) == sorted(last["after"]) for e in cleared)
    # the passes in the program's order: forward, zero_grad (inside it), backward, step
    tops = [p.label for p in doc.passes if p.parent is None][:4]
    assert tops == ["forward #1", "backward #1 of loss", "optimizer.step #1", "forward #2"]


def test_a_freed_graph_error_is_pytorchs_with_the_passes_before_it() -> None:
    def program() -> None:
        x = torch.tensor(2.0, requires_grad=True)
        y = x.exp() * x
        y.backward()
        y.backward()  # the graph is freed: PyTorch refuses

    with pytest.raises(RuntimeError) as plain:
        program()
    with pytest.raises(RuntimeError) as caught:
        with gradtrace.record():
            x = torch.tensor(2.0, requires_grad=True)
            y = x.exp() * x
            y.backward()
            y.backward()
    assert str(caught.value) == str(plain.value)
    doc = caught.value.gradtrace_trace.doc
    assert [p.label for p in doc.passes] == ["forward #1", "backward #1 of y", "backward #2 of y"]
    errors = [e for e in doc.events if e.kind == "error"]
    assert (
        len(errors) == 1
        and errors[0].pass_index == 2
        and "Trying to backward through the graph" in (errors[0].message or "")
    )
    np.testing.assert_array_equal(caught.value.gradtrace_trace.grads["x"], x.grad.numpy())


def test_the_programs_hooks_are_events_where_they_fire() -> None:
    recorded, printed = run_program(textwrap.dedent(PROGRAMS["seed_tensor_hooks"]), recorded=True)
    assert printed.splitlines() == [
        "register_hook: tensor(2.)",
        "post_accumulate: tensor(2.)",
        "register_hook: tensor(3.)",
        "post_accumulate: tensor(5.)",
    ]
    doc = recorded["rec"].trace.doc
    fired = [(doc.passes[e.pass_index].label, e.kind) for e in doc.events if e.hook is not None]
    assert fired == [
        ("backward #1 of y1", "tensor_hook"),
        ("backward #1 of y1", "post_accumulate_grad"),
        ("backward #2 of y2", "tensor_hook"),
        ("backward #2 of y2", "post_accumulate_grad"),
    ]

    recorded, _ = run_program(textwrap.dedent(PROGRAMS["hooks_that_store"]), recorded=True)
    doc = recorded["rec"].trace.doc
    hooks = {m.path: [h.type for h in m.hooks] for m in doc.graph.modules if m.hooks}
    assert hooks == {"model.0": ["forward"], "model.2": ["full_backward"]}
    kinds = [e.kind for e in doc.events if e.hook is not None]
    assert kinds == ["module_forward", "module_backward", "tensor_hook"]
    assert not [d for d in doc.analyses.diagnostics if d.code == "hook_unrecorded"]


def test_a_hook_registered_before_the_block_is_recorded() -> None:
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    model.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    x = torch.randn(2, 3, requires_grad=True)
    x.register_hook(lambda g: g + 1)
    with gradtrace.record() as rec:
        model(x).sum().backward()
    expected_w = (x.detach() * 2).sum(0, keepdim=True)
    assert torch.equal(torch.from_numpy(rec.trace.grads["model.weight"]), expected_w)
    np.testing.assert_array_equal(rec.trace.grads["x"], x.grad.numpy())
    doc = rec.trace.doc
    fired = [(doc.passes[e.pass_index].label, e.kind) for e in doc.events if e.hook is not None]
    assert fired == [("forward #1", "module_forward_pre"), ("backward #1 of tensor", "tensor_hook")]
    assert doc.events[0].kind == "pass_start"  # (the hook fires first: it opens the forward)
    for p in doc.passes:  # every event inside the pass it says
        assert all(e.pass_index == p.index for e in doc.events[p.first_seq : p.last_seq + 1]), p.label
    # the program's hook objects are back as they were
    assert all(not hasattr(h, "__wrapped__") for h in model._forward_pre_hooks.values())


def test_the_readme_record_examples_work_as_written(tmp_path: Any, monkeypatch: Any) -> None:
    """README's 'Record your own code' blocks, verbatim, in a fresh namespace each."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    section = readme.split("\n## Record your own code (Python)\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    monkeypatch.chdir(tmp_path)
    printed = io.StringIO()
    namespaces = []
    with contextlib.redirect_stdout(printed):
        for block in blocks:
            namespace: dict[str, Any] = {}
            exec(compile(block, "<README>", "exec"), namespace)
            namespaces.append(namespace)
    assert (tmp_path / "autograd.html").stat().st_size > 0
    lines = printed.getvalue().splitlines()
    assert lines[0] == "['forward #1', 'backward #1 of loss']"
    assert lines[1] == "['forward #1', 'backward #1 of loss', 'optimizer.step #1', 'zero_grad', 'forward #2']"
    assert lines[2] == "['model.0.bias', 'model.0.weight', 'model.2.bias', 'model.2.weight']"
    trained = namespaces[1]
    for name, param in trained["model"].named_parameters():
        assert torch.equal(torch.from_numpy(trained["rec"].trace.grads[f"model.{name}"]), param.grad)


def test_a_loop_hooks_only_the_graph_each_backward_canrun_program() -> None:
    """A training loop's later backward passes hook the graph they run, not every graph the
    program built before (the engine cannot run those): each pass has the same node events,
    and the zero_grad at the loop's end is told by its event, not by a grad_cleared warning."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(5, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gradtrace.GradtraceWarning)
        with gradtrace.record() as rec:
            for _step in range(4):
                loss = model(x).square().mean()
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    doc = rec.trace.doc
    backwards = [p for p in doc.passes if p.phase == "backward"]
    counts = [sum(e.kind == "node_pre" for e in doc.events[p.first_seq : p.last_seq + 1]) for p in backwards]
    assert len(counts) == 4 and len(set(counts)) == 1, counts
    assert all(rec.trace.grads[name] is None for name in rec.trace.grads)  # (zeroed: set to None)
    assert not [d for d in doc.analyses.diagnostics if d.code == "grad_cleared"]


def test_a_variable_given_a_new_model_names_it_apart() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3)
    with gradtrace.record() as rec:
        model = nn.Linear(3, 1)
        first = model
        model(x).sum().backward()
        model = nn.Linear(3, 1)
        model(x).sum().backward()
    grads = rec.trace.grads
    assert set(grads) == {"model.weight", "model.bias", "model#2.weight", "model#2.bias"}
    assert torch.equal(torch.from_numpy(grads["model.weight"]), first.weight.grad)
    assert torch.equal(torch.from_numpy(grads["model#2.weight"]), model.weight.grad)


def test_another_threads_modules_and_optimizers_are_not_the_programs() -> None:
    import threading

    torch.manual_seed(0)
    go, done = threading.Event(), threading.Event()

    def elsewhere() -> None:  # (its model and optimizer in no variable of the block's frame)
        other = nn.Linear(3, 1)
        other_opt = torch.optim.SGD(other.parameters(), lr=0.1)
        go.wait(10)
        with torch.no_grad():
            other(torch.ones(1, 3))
        other.weight.grad = torch.ones_like(other.weight)
        other_opt.step()
        done.set()

    worker = threading.Thread(target=elsewhere)
    worker.start()
    x = torch.randn(2, 3, requires_grad=True)
    with gradtrace.record() as rec:
        y = (x * 2).sum()
        go.set()
        done.wait(10)
        y.backward()
    worker.join()
    doc = rec.trace.doc
    assert doc.graph.modules == [] and not [e for e in doc.events if e.kind == "optimizer_step"]
    assert set(rec.trace.grads) == {"x"}


def test_zero_grad_filling_zeros_is_an_event_too() -> None:
    """``zero_grad(set_to_none=False)`` (``grad.zero_()``) and a hand-written ``W.grad.zero_()``."""
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 3)
    with gradtrace.record() as rec:
        W = torch.randn(3, 1, requires_grad=True)
        for _step in range(2):
            (model(x).sum() + (x @ W).sum()).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
            with torch.no_grad():
                W -= 0.1 * W.grad
                W.grad.zero_()
        ones = torch.ones(3).zero_()  # (no gradient: no event)
    zeroed = [e.payload for e in rec.trace.doc.events if e.kind == "zero_grad"]
    # (clearings with nothing recorded between them are one event, as one zero_grad() call's)
    assert zeroed == [{"set_to_none": False, "tensors": ["model.weight", "model.bias", "W"]}] * 2
    assert not ones.any()
    assert all(not grad.any() for grad in rec.trace.grads.values())


def test_a_model_the_block_never_used_is_not_in_the_trace() -> None:
    # one used before the block (its .grad is from then), one never used at all
    before = nn.Linear(2, 2)
    before(torch.ones(1, 2)).sum().backward()
    unused = nn.Linear(2, 2)
    frozen = nn.Linear(3, 3)  # called in the block, but under no_grad: in the trace, no gradient
    model = nn.Linear(3, 1)
    with gradtrace.record() as rec:
        with torch.no_grad():
            frozen(torch.ones(1, 3))
        model(torch.ones(1, 3)).sum().backward()
    grads = rec.trace.grads
    assert sorted(grads) == ["frozen.bias", "frozen.weight", "model.bias", "model.weight"]
    assert grads["frozen.weight"] is None
    assert np.array_equal(grads["model.weight"], model.weight.grad.numpy())
    modules = {m.path for m in rec.trace.doc.graph.modules}
    assert not any(path.startswith(("before", "unused")) for path in modules)
    del before, unused
