"""What the caller of ``gradtrace.trace`` sees of the model's exceptions and warnings: what a
clean run without gradtrace shows (the oracle), plus the trace — the partial one, attached to
the exception, or the diagnostics."""

from __future__ import annotations

import copy
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import gradtrace
from gradtrace.engine import TraceError
from gradtrace.examples import get_example


def _raised(run: Callable[[], Any]) -> BaseException:
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - the oracle's, whatever it is
        return exc
    raise AssertionError("nothing was raised")


_GRADTRACE = str(Path(gradtrace.__file__).parent)


def _where(exc: BaseException) -> tuple[str, int, str]:
    """The innermost frame outside gradtrace the exception came through: file, line and
    function. (An op's error comes through gradtrace's discovery mode, which made the call
    for the model: the traceback holds that frame too, innermost.)"""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(_GRADTRACE)]
    return frames[-1].filename, frames[-1].lineno or 0, frames[-1].name


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.b = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def _loss(out: torch.Tensor) -> torch.Tensor:
    return out.pow(2).sum()


def _plain(model: nn.Module, x: torch.Tensor, loss_fn: Callable[[Any], torch.Tensor] = _loss) -> None:
    loss_fn(model(x)).backward()


def _twins(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    return model, copy.deepcopy(model)


# ---- exceptions -------------------------------------------------------------------------------
def _hook_raising(kind: type[Exception]) -> Callable[[torch.Tensor], None]:
    def hook(grad: torch.Tensor) -> None:
        raise kind(f"refused a gradient of shape {tuple(grad.shape)}")

    return hook


@pytest.mark.parametrize("kind", [RuntimeError, ValueError])
def test_a_hook_raising_in_the_backward_raises_from_trace_with_the_partial_trace(kind: type) -> None:
    torch.manual_seed(0)
    model, twin = _twins(_Net())
    for m in (model, twin):
        m.a.weight.register_hook(_hook_raising(kind))
    x = torch.randn(5, 3)
    expected = _raised(lambda: _plain(twin, x))
    got = _raised(lambda: gradtrace.trace(model, x, _loss))
    assert type(got) is type(expected) is kind
    assert str(got) == str(expected) == "refused a gradient of shape (4, 3)"
    assert _where(got) == _where(expected)  # raised by the hook itself, as in the plain run
    partial = got.gradtrace_trace  # type: ignore[attr-defined]
    [error] = [e for e in partial.doc.events if e.kind == "error"]
    assert error.phase == "backward" and error.message == str(expected)
    assert error.payload["exception"] == kind.__name__
    # the gradients written before the hook stopped the backward, as the plain run left them
    for name, p in twin.named_parameters():
        if p.grad is None:
            assert partial.grads[name] is None, name
        else:
            np.testing.assert_array_equal(partial.grads[name], p.grad.numpy(), err_msg=name)
            np.testing.assert_array_equal(dict(model.named_parameters())[name].grad, p.grad)
    assert partial.grads["a.weight"] is None and partial.grads["b.weight"] is not None


def test_the_engines_own_error_is_raised_with_its_exact_message(tmp_path: Path) -> None:
    class InPlace(nn.Module):  # relu's output, saved for its backward, then changed in place
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.sigmoid(self.lin(x))
            out = h * 2.0
            h.add_(1.0)
            return out

    torch.manual_seed(0)
    model, twin = _twins(InPlace())
    x = torch.randn(4, 3)
    expected = _raised(lambda: _plain(twin, x))
    got = _raised(lambda: gradtrace.trace(model, x, _loss))
    assert type(got) is type(expected) is RuntimeError
    assert str(got) == str(expected)
    assert "modified by an inplace operation" in str(got)
    partial = got.gradtrace_trace  # type: ignore[attr-defined]
    [error] = [e for e in partial.doc.events if e.kind == "error"]
    assert error.message == str(expected) and error.node is not None
    assert partial.doc.graph.nodes  # it can still be drawn
    saved = partial.save(tmp_path / "partial.html")
    assert saved.stat().st_size > 0
    assert gradtrace.Trace.load(partial.save(tmp_path / "partial.json")).to_json() == partial.to_json()


def test_an_error_in_forward_is_raised_as_is_with_an_error_event_where_it_broke() -> None:
    torch.manual_seed(0)
    model, twin = _twins(_Net())
    x = torch.randn(5, 2)  # the wrong width
    expected = _raised(lambda: _plain(twin, x))
    got = _raised(lambda: gradtrace.trace(model, x, _loss))
    assert type(got) is type(expected) and str(got) == str(expected)
    assert _where(got) == _where(expected)
    partial = got.gradtrace_trace  # type: ignore[attr-defined]
    [error] = [e for e in partial.doc.events if e.kind == "error"]
    assert error.phase == "forward" and error.message == str(expected)
    assert all(grad is None for grad in partial.grads.values())


def test_a_loss_fn_error_is_raised_as_is() -> None:
    model = _Net()

    def loss_fn(out: torch.Tensor) -> torch.Tensor:
        return out.logits  # type: ignore[attr-defined]

    expected = _raised(lambda: loss_fn(model(torch.randn(2, 3))))
    got = _raised(lambda: gradtrace.trace(model, torch.randn(2, 3), loss_fn))
    assert type(got) is type(expected) and str(got) == str(expected)
    assert hasattr(got, "gradtrace_trace")


def test_gradtraces_own_limit_is_its_problem_with_no_trace_attached() -> None:
    got = _raised(lambda: gradtrace.trace(_Net(), torch.randn(2, 3), _loss, max_nodes=3))
    assert isinstance(got, TraceError) and got.code == "too_many_nodes"
    assert not hasattr(got, "gradtrace_trace")


def test_the_specs_freed_graph_error_is_still_an_event() -> None:
    # a spec that teaches the error records it as its error event and returns the trace
    trace = gradtrace.trace_spec(get_example("freed-graph-error"))
    [error] = [e for e in trace.doc.events if e.kind == "error"]
    assert error.message is not None and "second time" in error.message
    assert trace.grads["x"] == pytest.approx(2.0)


# ---- warnings ---------------------------------------------------------------------------------
class _Warns(nn.Module):
    def __init__(self, category: type[Warning] = UserWarning, times: int = 1) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.category = category
        self.times = times

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.times):
            warnings.warn("this layer is experimental", self.category, stacklevel=1)
        return self.lin(x)


def _shown(run: Callable[[], Any], action: str) -> list[tuple[type, str, str, int]]:
    """What the caller's warnings machinery shows under ``action``: (category, message, file,
    line) of each."""
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter(action)
        run()
    return [(w.category, str(w.message), w.filename, w.lineno) for w in shown]


@pytest.mark.parametrize("action", ["always", "default", "once", "ignore"])
@pytest.mark.parametrize("category", [UserWarning, DeprecationWarning, FutureWarning])
def test_the_callers_filters_see_the_models_warnings_as_a_plain_run_shows_them(
    action: str, category: type[Warning]
) -> None:
    torch.manual_seed(0)
    model, twin = _twins(_Warns(category, times=3))
    x = torch.randn(4, 3)
    expected = _shown(lambda: _plain(twin, x), action)
    got = _shown(lambda: gradtrace.trace(model, x, _loss), action)
    assert got == expected
    assert len(expected) == {"always": 3, "default": 1, "once": 1, "ignore": 0}[action]


def test_the_trace_keeps_the_warnings_as_diagnostics_whatever_the_filters() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = gradtrace.trace(_Warns(FutureWarning), torch.randn(4, 3), _loss)
    [note] = [d for d in trace.doc.analyses.diagnostics if d.code == "torch_warning"]
    assert note.message == "this layer is experimental"


def test_an_error_filter_stops_the_model_where_a_plain_run_stops() -> None:
    torch.manual_seed(0)
    model, twin = _twins(_Warns(UserWarning))
    x = torch.randn(4, 3)

    def under_error(run: Callable[[], Any]) -> BaseException:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return _raised(run)

    expected = under_error(lambda: _plain(twin, x))
    got = under_error(lambda: gradtrace.trace(model, x, _loss))
    assert type(got) is type(expected) is UserWarning
    assert str(got) == str(expected)
    assert _where(got) == _where(expected) == (__file__, _where(expected)[1], "forward")
    partial = got.gradtrace_trace  # type: ignore[attr-defined]
    [error] = [e for e in partial.doc.events if e.kind == "error"]
    assert error.phase == "forward" and error.payload["exception"] == "UserWarning"
    assert model.lin.weight.grad is None  # stopped before the backward, as the plain run


def test_a_warning_in_the_backward_under_an_error_filter_raises_from_the_backward() -> None:
    torch.manual_seed(0)
    model, twin = _twins(_Net())

    def hook(grad: torch.Tensor) -> None:
        warnings.warn("a large gradient", RuntimeWarning, stacklevel=1)

    for m in (model, twin):
        m.b.weight.register_hook(hook)
    x = torch.randn(4, 3)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=RuntimeWarning)
        expected = _raised(lambda: _plain(twin, x))
        got = _raised(lambda: gradtrace.trace(model, x, _loss))
    assert type(got) is type(expected) is RuntimeWarning
    assert str(got) == str(expected) and _where(got) == _where(expected)
    assert [e.phase for e in got.gradtrace_trace.doc.events if e.kind == "error"] == ["backward"]  # type: ignore[attr-defined]


class _CopyConstructs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.tensor(x))  # PyTorch's C++ code warns: copy with clone()


def test_a_warning_from_pytorchs_cpp_code_is_placed_at_the_models_line() -> None:
    torch.manual_seed(0)
    model, twin = _twins(_CopyConstructs())
    x = torch.randn(4, 3)
    expected = _shown(lambda: _plain(twin, x), "always")
    got = _shown(lambda: gradtrace.trace(model, x, _loss), "always")
    assert got == expected and len(expected) == 1
    assert expected[0][2] == __file__


class _OutputsOnly(nn.Module):
    """A full backward hook on a module whose inputs need no gradient: PyTorch warns in the
    backward, which gradtrace runs (a plain run places the warning at its ``backward()``)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.lin.register_full_backward_hook(lambda module, grad_in, grad_out: None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


def test_a_warning_from_the_backward_gradtrace_runs_is_placed_at_the_callers_line() -> None:
    torch.manual_seed(0)
    model, twin = _twins(_OutputsOnly())
    x = torch.randn(4, 3)
    expected = _shown(lambda: _plain(twin, x), "always")
    got = _shown(lambda: gradtrace.trace(model, x, _loss), "always")
    assert [w[:2] for w in got] == [w[:2] for w in expected] and len(expected) == 1
    assert "no inputs require gradients" in expected[0][1]
    # the plain run's line is its backward(); the traced one's, the call of gradtrace.trace
    assert got[0][2] == __file__ and got[0][3] != expected[0][3]


def test_record_places_a_warning_from_a_backward_at_the_programs_backward_line() -> None:
    """Inside record() the program calls backward() itself: the warning PyTorch raises in it is
    shown where a plain run shows it, at that line (not in torch's or gradtrace's frames)."""
    torch.manual_seed(0)
    model, twin = _twins(_OutputsOnly())
    x = torch.randn(4, 3)

    def recorded() -> None:
        with gradtrace.record():
            _plain(model, x)

    expected = _shown(lambda: _plain(twin, x), "always")
    got = _shown(recorded, "always")
    assert len(expected) == 1 and got == expected
