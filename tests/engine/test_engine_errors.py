"""Every error path, with its exact message."""

from __future__ import annotations

import copy

import pytest
import torch
from design_specs import SEED_002

import gradtrace
from gradtrace.engine import TraceError
from gradtrace.spec import SpecError


def _spec(**over) -> dict:  # noqa: ANN003
    base = {
        "spec_version": 1,
        "title": "t",
        "inputs": {"x": {"value": [1.0, 2.0], "requires_grad": True}},
        "forward": ["y = x * 3"],
    }
    base.update(over)
    return base


def _torch_message(fn) -> str:  # noqa: ANN001
    with pytest.raises(RuntimeError) as raised:
        fn()
    return str(raised.value)


def test_non_scalar_backward_is_an_error_event_with_torch_message() -> None:
    doc = gradtrace.trace_spec(_spec(steps=[{"do": "backward", "of": "y"}])).doc
    [error] = [e for e in doc.events if e.kind == "error"]
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    assert error.message == _torch_message(lambda: (x * 3).backward())
    assert error.message == "grad can be implicitly created only for scalar outputs"
    assert error.phase == "backward" and doc.passes[error.pass_index].step == 0
    assert doc.grads["x"] is None


def test_grad_of_tensor_without_grad_is_an_error_event() -> None:
    spec = _spec(
        inputs={"x": {"value": [1.0, 2.0], "requires_grad": True}, "c": {"value": [1.0, 1.0]}},
        forward=["y = (x * c).sum()"],
        steps=[{"do": "grad", "of": "y", "inputs": ["c"], "as": ["gc"]}],
    )
    doc = gradtrace.trace_spec(spec).doc
    [error] = [e for e in doc.events if e.kind == "error"]
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    c = torch.tensor([1.0, 1.0])
    assert error.message == _torch_message(lambda: torch.autograd.grad((x * c).sum(), [c]))
    assert error.message == "One of the differentiated Tensors does not require grad"


def test_inplace_after_hooked_module_is_an_error_event() -> None:
    spec = {
        "spec_version": 1,
        "title": "t",
        "modules": {"lin": {"type": "Linear", "in_features": 2, "out_features": 2}},
        "inputs": {"x": {"value": [[1.0, -1.0]], "requires_grad": True}},
        "forward": ["h = lin(x)", "h2 = h.relu_()", "loss = h2.sum()"],
        "hooks": [{"type": "full_backward", "module": "lin"}],
    }
    doc = gradtrace.trace_spec(spec).doc
    [error] = [e for e in doc.events if e.kind == "error"]
    lin = torch.nn.Linear(2, 2)
    lin.register_full_backward_hook(lambda *a: None)
    expected = _torch_message(lambda: lin(torch.tensor([[1.0, -1.0]], requires_grad=True)).relu_())
    assert error.message == expected
    assert error.message.startswith(
        "Output 0 of BackwardHookFunction is a view and is being modified inplace."
    )
    assert error.phase == "forward" and error.payload["exception"] == "RuntimeError"
    codes = [d.code for d in doc.analyses.diagnostics]
    assert "inplace_after_hook" in codes and "steps_skipped" in codes
    assert not any(p.phase == "backward" for p in doc.passes)


def test_forward_shape_mismatch_is_a_spec_error_naming_the_line() -> None:
    spec = {
        "spec_version": 1,
        "title": "t",
        "modules": {"lin": {"type": "Linear", "in_features": 3, "out_features": 2}},
        "inputs": {"x": {"value": [[1.0, 2.0]]}},
        "forward": ["h = lin(x)", "loss = h.sum()"],
    }
    with pytest.raises(SpecError) as raised:
        gradtrace.trace_spec(spec)
    err = raised.value
    # the meta-device dry run finds it before anything is allocated
    assert err.code == "forward_error" and err.path == "/forward/0" and err.line == 1
    assert err.message.startswith("forward line 1 (`h = lin(x)`): ")
    # without the dry run, the engine's own forward reports torch's CPU message
    from gradtrace.engine import run_spec
    from gradtrace.spec import SpecLimits, parse_spec

    with pytest.raises(SpecError) as raised:
        run_spec(parse_spec(spec), SpecLimits.local(), dry_run_first=False)
    assert raised.value.path == "/forward/0" and raised.value.line == 1
    assert raised.value.message == (
        "forward line 1 (`h = lin(x)`): mat1 and mat2 shapes cannot be multiplied (1x2 and 3x2)"
    )


def test_hook_on_tensor_without_grad_is_a_spec_error() -> None:
    spec = _spec(
        inputs={"x": {"value": [1.0]}},
        forward=["y = (x * 2).sum()"],
        hooks=[{"tensor": "x", "type": "tensor"}],
    )
    with pytest.raises(SpecError) as raised:
        gradtrace.trace_spec(spec)
    # the spec's validation catches it first (E1); the engine's own check is the fallback
    assert raised.value.path.startswith("/hooks/0")
    assert "does not require grad" in raised.value.message


def test_too_many_nodes_in_a_spec() -> None:
    spec = _spec(forward=["a = x * 2", "b = a * 2", "c = b * 2", "d = c.sum()"])
    with pytest.raises(SpecError) as raised:  # the dry run counts nodes first
        gradtrace.trace_spec(spec, max_nodes=3)
    assert raised.value.code == "limit_exceeded" and "max_nodes" in raised.value.message
    # the engine's own cap, before any backward (what the dry run cannot foresee)
    from gradtrace.engine import run_spec
    from gradtrace.spec import SpecLimits, parse_spec

    with pytest.raises(TraceError) as raised_engine:
        run_spec(parse_spec(spec), SpecLimits.local().with_(max_nodes=3), dry_run_first=False)
    assert raised_engine.value.code == "too_many_nodes"
    assert raised_engine.value.message == "the autograd graph has more than max_nodes=3 nodes"


def test_unknown_trace_spec_option() -> None:
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['colour'\]"):
        gradtrace.trace_spec(copy.deepcopy(SEED_002), colour="red")


def test_hook_on_outputs_only_diagnostic() -> None:
    spec = {
        "spec_version": 1,
        "title": "t",
        "modules": {"lin": {"type": "Linear", "in_features": 2, "out_features": 1}},
        "inputs": {"x": {"value": [[1.0, 2.0]]}},
        "forward": ["loss = lin(x).sum()"],
        "hooks": [{"type": "full_backward", "module": "lin"}],
    }
    doc = gradtrace.trace_spec(spec).doc
    [diag] = [d for d in doc.analyses.diagnostics if d.code == "hook_on_outputs_only"]
    assert diag.module == "lin"
    assert diag.message == (
        "module 'lin' has a full backward hook but none of its inputs requires grad: "
        "the hook fires with the gradients of its outputs only (grad_input is None)"
    )
    [event] = [e for e in doc.events if e.kind == "module_backward"]
    assert event.payload["grad_input"] == [None]
