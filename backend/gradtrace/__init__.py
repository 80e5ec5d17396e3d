"""gradtrace: see what PyTorch's autograd really does.

Importing this package does not import torch (the service's API process must stay
torch-free); the tracing functions import the engine when first called.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from gradtrace.trace import GradtraceWarning, Trace, warn_diagnostics
from gradtrace.trace_schema import DEFAULT_FINAL_VALUE_LIMIT, DEFAULT_VALUE_BUDGET, LIBRARY_MAX_NODES

__all__ = [
    "GradtraceWarning",
    "Recording",
    "Trace",
    "__version__",
    "compare",
    "load_run",
    "record",
    "show",
    "trace",
    "trace_spec",
    "watch",
    "watch_lightning",
    "watch_trainer",
]

# The one version string: the package metadata reads it (pyproject: dynamic version).
__version__ = "0.1.0"


def trace(
    model: Any,
    inputs: Any,
    loss_fn: Callable[[Any], Any] | None = None,
    *,
    max_nodes: int = LIBRARY_MAX_NODES,
    value_budget: int = DEFAULT_VALUE_BUDGET,
    final_value_limit: int = DEFAULT_FINAL_VALUE_LIMIT,
    retain_grad: bool | Sequence[str] = False,
    title: str | None = None,
) -> Trace:
    """Trace one forward and backward of a real ``nn.Module``.

    ``inputs``: a tensor or a tuple of tensors. ``loss_fn(output) -> scalar``; without it a
    scalar output is the loss and a non-scalar output is reduced with ``.sum()``.
    ``Trace.grads`` holds every final gradient exactly, in memory.

    ``max_nodes``: the most graph nodes traced. ``value_budget``: tensor numbers kept in
    per-event snapshots (the rest keep their statistics). ``final_value_limit``: numbers of
    final gradients and named values serialised exactly. ``retain_grad``: True (keep
    ``output.grad``) or names among "output", "loss". ``title``: the trace's title.

    What the trace's diagnostics say (the output was reduced with ``.sum()``, a hook fires
    on outputs only, a tensor gets no gradient, …) is also issued as a
    :class:`GradtraceWarning` (see ``diagnostic_warnings``).

    An exception in the model's forward, the loss or the backward (a hook's, PyTorch's) is
    raised exactly as without gradtrace: the same exception object, type and message. The
    trace recorded up to it (with an ``error`` event where it broke) is attached to it as
    ``exc.gradtrace_trace``, a ``Trace`` that can still be saved and drawn. Warnings the model
    raises are issued again after the trace, through your filters (an "error" filter raises
    inside the model, where a plain run raises), and listed in the trace's diagnostics.
    """
    from gradtrace.engine import trace_module

    grads: dict[str, Any] = {}
    try:
        doc = trace_module(
            model,
            inputs,
            loss_fn,
            max_nodes=max_nodes,
            value_budget=value_budget,
            final_value_limit=final_value_limit,
            retain_grad=retain_grad,
            title=title,
            grads_out=grads,
        )
    except Exception as exc:
        partial = exc.__dict__.pop("gradtrace_partial", None)
        if partial is not None:
            exc.gradtrace_trace = Trace(partial[0], grads=partial[1])  # type: ignore[attr-defined]
        raise
    traced = Trace(doc, grads=_in_module_order(grads, model))
    warn_diagnostics(doc, stacklevel=2)  # (2: the line that called trace())
    return traced


def _in_module_order(grads: dict[str, Any], model: Any) -> dict[str, Any]:
    """``grads`` with the model's parameters first, in ``named_parameters()`` order (the order
    the model is written in, as the user reads it), then the other named tensors."""
    order = [name for name, _ in model.named_parameters()] if hasattr(model, "named_parameters") else []
    first = {name: grads[name] for name in order if name in grads}
    return {**first, **{name: g for name, g in grads.items() if name not in first}}


class Recording:
    """What ``with gradtrace.record() as rec:`` gives: ``rec.trace`` once the block is over
    (see :func:`record`)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self._options = options
        self._capture: Any = None
        self._trace: Trace | None = None

    def __enter__(self) -> Recording:
        from gradtrace.engine.program import start_recording

        if self._capture is not None or self._trace is not None:
            raise RuntimeError("a gradtrace.record() is entered once: make a new one for another block")
        # the frame running the `with`: its variables name the program's models and tensors
        self._capture = start_recording(sys._getframe(1), **self._options)
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        capture, self._capture = self._capture, None
        try:
            result = capture.finish(exc)
        except Exception as failure:
            if exc is None:
                raise
            # (the program's exception is what is raised, never gradtrace's in its place)
            exc.add_note(f"gradtrace could not finish the trace: {type(failure).__name__}: {failure}")
            return
        if exc is not None:
            partial = exc.__dict__.pop("gradtrace_partial", None)
            if partial is not None:
                self._trace = Trace(partial[0], grads=partial[1])
                exc.gradtrace_trace = self._trace  # type: ignore[attr-defined]
            return  # (the program's exception goes on, unchanged)
        doc, grads = result
        self._trace = Trace(doc, grads=grads)
        warn_diagnostics(doc, stacklevel=2)  # (2: the `with` line's block)

    @property
    def trace(self) -> Trace:
        """The trace of the block (once it is over; after an exception, what was recorded up
        to it, the same ``Trace`` as ``exc.gradtrace_trace``)."""
        if self._trace is None:
            raise RuntimeError(
                "rec.trace is made when the `with gradtrace.record() as rec:` block ends: read it after the block"
            )
        return self._trace


def record(
    *,
    max_nodes: int = LIBRARY_MAX_NODES,
    value_budget: int = DEFAULT_VALUE_BUDGET,
    final_value_limit: int = DEFAULT_FINAL_VALUE_LIMIT,
    title: str | None = None,
) -> Recording:
    """Record everything autograd does in a block of ordinary PyTorch code::

        with gradtrace.record() as rec:
            loss = torch.nn.functional.binary_cross_entropy_with_logits(x @ w + b, y)
            loss.backward()
        rec.trace.grads["w"]        # exactly w.grad

    The block runs as written (nothing of torch is patched: a function mode, process-wide
    module hooks and node hooks, all removed when it ends). ``rec.trace`` is a :class:`Trace`
    of every graph built, every ``backward()`` and ``torch.autograd.grad`` (each its own
    pass, in the engine's real order) and every module call. Names come from the block's
    variables: a model's parameters by their path under the variable holding the model
    (``model.fc1.weight``; a module no variable holds is ``Linear#0``), tensors by their
    variable (``w``, ``x``, ``loss``). ``rec.trace.grads``: the final ``.grad`` of every
    parameter and of every named leaf that requires grad, exact.

    An exception in the block is raised exactly as without gradtrace (the same object); the
    trace up to it is attached as ``exc.gradtrace_trace`` (and is ``rec.trace``). One
    capture at a time: ``record()``, ``trace()`` or ``trace_spec()`` inside a ``record()``
    (or ``record()`` inside ``trace()``) raises RuntimeError as it starts, naming both.
    Python's cyclic GC is paused while the block runs (as in ``trace()``) and restored
    after. Options as in :func:`trace`.
    """
    return Recording(
        {
            "max_nodes": max_nodes,
            "value_budget": value_budget,
            "final_value_limit": final_value_limit,
            "title": title,
        }
    )


def trace_spec(spec: dict[str, Any], **options: Any) -> Trace:
    """Trace a model spec (the JSON format of the service and the examples).

    Raises ``gradtrace.spec.SpecError`` for an invalid spec (naming the field or line) and
    ``gradtrace.engine.TraceError`` for a limit. Options: ``max_nodes`` (default 40,000),
    ``value_budget`` and ``final_value_limit`` (as in :func:`trace`), and any other
    ``SpecLimits`` field.
    """
    from gradtrace.engine import run_spec
    from gradtrace.spec import SpecLimits, parse_spec

    values = {k: options.pop(k) for k in ("value_budget", "final_value_limit") if k in options}
    limits = SpecLimits.local()
    unknown = sorted(k for k in options if not hasattr(limits, k))
    if unknown:
        raise TypeError(
            f"unknown option(s) {unknown}: use value_budget, final_value_limit or SpecLimits fields"
        )
    limits = limits.with_(**options)
    model_spec = parse_spec(spec)  # run_spec checks the limits (meta dry run) before allocating
    grads: dict[str, Any] = {}
    return Trace(run_spec(model_spec, limits, grads_out=grads, **values), grads=grads)


def show(model: Any, inputs: Any = None, loss_fn: Any = None, **options: Any) -> None:
    """Show the player in a notebook, now, wherever the call is in the cell.

    ``show(model, inputs, loss_fn, **options)`` traces like ``trace`` (keeping fewer tensor
    numbers unless ``value_budget`` is given, so the cell stays small: every tensor keeps its
    statistics); ``show(a_trace)`` shows a trace you already have. Returns None, so the
    player is not shown twice; keep the trace with ``t = gradtrace.trace(...)`` and
    ``gradtrace.show(t)``. ``show(gradtrace.load_run(path))`` shows a watched run's view
    (a cell ending with the run shows it too). Outside IPython it raises ``RenderUnavailable``
    (save an HTML file).
    """
    from gradtrace.render.notebook import NOTEBOOK_VALUE_BUDGET, display_trace
    from gradtrace.runs import Run

    if isinstance(model, Run):  # a watched run: its run view
        _show_runs_in_notebooks()
        display_trace(model)
        return
    if isinstance(model, Trace):
        if inputs is not None or loss_fn is not None or options:
            raise TypeError("show(a_trace) takes no inputs, loss_fn or options: the trace is already made")
        display_trace(model)
        return
    if inputs is None:
        raise TypeError("show(model, inputs, loss_fn=None, **options): inputs are missing")
    options.setdefault("value_budget", NOTEBOOK_VALUE_BUDGET)
    display_trace(trace(model, inputs, loss_fn, **options))


def compare(a: Any, b: Any, *, rtol: float = 1e-6) -> Any:
    """Compare two traces of one model: matched nodes, edges and hooks, and every gradient and
    value that changed, with by how much (a ``comparison_schema.CompareDoc``).

    ``a`` and ``b``: ``Trace`` objects (from ``trace``/``trace_spec``/``Trace.load``), trace
    dicts, or specs (traced here first). E.g. seed 002 with and without its ×2 hook::

        diff = gradtrace.compare(gradtrace.trace_spec(spec), gradtrace.trace_spec(spec_x2))
        diff.summary.changed_grads   # ['f0.bias', 'f0.weight', 'x'], each with ratio 2.0
    """
    from gradtrace.comparison import compare as compare_traces

    def as_trace(x: Any) -> Any:
        return trace_spec(x) if isinstance(x, dict) and "spec_version" in x else x

    return compare_traces(as_trace(a), as_trace(b), rtol=rtol)


def watch(model: Any, path: Any, every: int = 1, **options: Any) -> Any:
    """Record gradient flow over training, on the autograd graph's own nodes::

        with gradtrace.watch(model, "runs/mlp", every=10) as w:
            for x, y in data:
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
        run = gradtrace.load_run("runs/mlp")

    A step is one backward pass through ``model`` (each forward of it with grad enabled
    starts one, counted from 0); steps ``0, every, 2*every, …`` are logged. On a logged step
    it records, per grad_fn node (keyed ``module/op#ordinal``, the same at every step) and per
    parameter: the gradient norms flowing in and out, NaN and inf counts, the zero fraction
    behind ReLU-like nodes, each parameter's gradient norm, weight norm and update ratio
    ‖Δw‖/‖w‖ after the optimizer's step, and the loss; all computed on the device and read
    to the host once per logged step. Unlogged steps run as without gradtrace, and the
    weights are bit-equal to an unwatched run's.

    ``path``: a new directory; the run is ``path/run.sqlite`` (SQLite, WAL: readable while it
    is written, each logged step committed as it ends). Flags (``vanishing``, ``exploding``,
    ``nonfinite``, ``dead_relu``, ``stalled``: see ``gradtrace.runs.flags``) are written with
    the step they fire at. Options: ``rules`` (a ``gradtrace.runs.FlagRules``), ``rank``
    (default: the torch.distributed rank, 0 without it), ``full_traces`` (default True: the
    first logged step, and the step after the first flag of each kind, are also saved as
    full gradtrace traces, ``run.trace_bytes(step)``: the real step, its forward, the loop's loss
    and its backward, recorded as they run, see ``gradtrace.engine.step_capture``).
    """
    from gradtrace.engine.watch import Watch

    return Watch(model, path, every, **options)


def watch_trainer(path: Any, every: int = 1, **options: Any) -> Any:
    """``gradtrace.watch`` as a Hugging Face ``Trainer`` callback::

        trainer = Trainer(model=model, args=args, train_dataset=data,
                          callbacks=[gradtrace.watch_trainer("runs/gpt2", every=10)])
        trainer.train()

    It watches the Trainer's model from ``on_train_begin`` to ``on_train_end``: the same run
    as ``gradtrace.watch(model, path, every)`` around the loop (a step is one backward pass;
    with gradient accumulation, several per optimizer step). The parameter gradient norms
    are read at the backward's end, before the Trainer clips them. Options: as ``watch``.
    Needs transformers (imported here, not with gradtrace)."""
    from gradtrace.engine.watch_callbacks import trainer_callback

    return trainer_callback(path, every, options)


def watch_lightning(path: Any, every: int = 1, *, module: str | None = None, **options: Any) -> Any:
    """``gradtrace.watch`` as a Lightning callback::

        trainer = lightning.Trainer(max_steps=1000,
                                    callbacks=[gradtrace.watch_lightning("runs/mlp", every=10)])
        trainer.fit(lit_model, loader)

    It watches the LightningModule from ``on_fit_start`` to ``on_fit_end`` (a step: one
    backward pass through it, so its ``forward`` must be what ``training_step`` calls, as
    ``self(x)``), or its submodule ``module`` (a dotted attribute path, ``"net"`` for
    ``self.net(x)``). Options: as ``watch``. Needs lightning (imported here)."""
    from gradtrace.engine.watch_callbacks import lightning_callback

    return lightning_callback(path, every, module, options)


def load_run(path: Any) -> Any:
    """The run ``watch`` wrote (or is writing) in ``path``: a ``gradtrace.runs.Run``
    (``.steps``, ``.nodes``, ``.parameters``, ``.grad_norm(param)``,
    ``.node_grad_norm(node)``, ``.flags``, ``.to_pandas()``, …)."""
    from gradtrace.runs import load_run as load

    run = load(path)
    _show_runs_in_notebooks()
    return run


def _show_runs_in_notebooks() -> None:
    """In IPython (Jupyter, VS Code), a cell that ends with a Run shows its run view inline
    (``render.run_page``: the graph coloured by gradient norm, the Step slider, the loss, the
    flags, the layer × step heatmaps), as a cell ending with a Trace shows the player."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    from gradtrace.render.run_page import run_notebook_html
    from gradtrace.runs import Run

    shell.display_formatter.formatters["text/html"].for_type(Run, run_notebook_html)
