"""The capture of one trace: the recorder, the forward and backward captures and what the
analyses ask of them, wired together.

Every capture (``record()``, ``trace()``, a spec) runs a program.ProgramSession (this session,
finding its passes as the code runs: ``backward_pass`` for each engine run) inside the one
entry, capture.Capture; ``assemble.assemble_trace`` then makes the trace (a TraceDoc) of what
it kept. The session owns every hook it installs
(an ExitStack closed in ``close()``) and restores grad mode itself. Its whole life, teardown included,
runs inside the GC pause (the entry sees to it).
"""

from __future__ import annotations

import gc
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from types import MappingProxyType
from typing import Any

import torch
from torch import nn

from gradtrace.engine import graph_walk
from gradtrace.engine.analyses import kept_call_types, new_analyses, saved_observer
from gradtrace.engine.analysis import Backward
from gradtrace.engine.backward_capture import BackwardCapture
from gradtrace.engine.caller_warnings import record_all_but_errors, reissue
from gradtrace.engine.forward_capture import ForwardCapture, compiled_and_inside, flat_tensors
from gradtrace.engine.model_hooks import ModelHooks
from gradtrace.engine.nested_runs import NestedRuns
from gradtrace.engine.recorder import Recorder, owning_module
from gradtrace.engine.summarize import (
    DEFAULT_FINAL_VALUE_LIMIT,
    DEFAULT_VALUE_BUDGET,
    Summarizer,
)
from gradtrace.problem import public_text
from gradtrace.spec.errors import SpecError
from gradtrace.trace_schema import (
    LIBRARY_MAX_NODES,
    Diagnostic,
    ErrorPayload,
    ModuleHook,
)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic GC off for a whole trace, the user's setting restored exactly after.

    A trace allocates several containers per node: with the GC on, its allocations keep
    triggering collections, and the older generations' collections rescan everything the
    capture built so far (they grow with the trace and can cost more than the capture
    itself). Nothing a
    trace builds is cyclic garbage (tests/engine/test_gc.py), so the session and everything
    it held are freed by reference counting: drop them inside the pause, and the first
    collection after it sees only the trace that is kept, not the session's objects too.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_capturing = threading.local()  # .what: the capture running in this thread (see one_capture)


def refuse_inside_capture(what: str) -> None:
    """RuntimeError, naming both, when a capture runs in this thread (see one_capture): for
    ``what`` to say before it does anything (a spec run's dry run would otherwise run under
    the outer capture's hooks)."""
    running = getattr(_capturing, "what", None)
    if running is not None:
        raise RuntimeError(
            f"{what} cannot start inside {running}: gradtrace records one program at a time "
            "(end the outer one first, or record the whole program once)"
        )


@contextmanager
def one_capture(what: str) -> Iterator[None]:
    """A capture runs inside this block: ``trace()``, ``record()`` or a spec run started
    inside it (in the same thread) raises RuntimeError, naming both. gradtrace records one
    program at a time: a capture inside another would hook the same nodes and modules twice."""
    refuse_inside_capture(what)
    _capturing.what = what
    try:
        yield
    finally:
        _capturing.what = None


class TraceSession:
    # what gradtrace's own recording raises is kept, not raised into the code it records
    # (Recorder.trip): gradtrace.watch's step capture, where the training must run as without it
    fail_safe = False

    def __init__(
        self,
        root: nn.Module | None,
        leaves: dict[str, torch.Tensor],
        *,
        max_nodes: int = LIBRARY_MAX_NODES,
        value_budget: int = DEFAULT_VALUE_BUDGET,
        final_value_limit: int = DEFAULT_FINAL_VALUE_LIMIT,
        root_path: str = "",
        model_hooks: bool = False,
        grad_mode: bool = True,
    ) -> None:
        """``model_hooks``: record the model's own hooks (the library; a spec's model has
        none, its hooks are the spec's). ``grad_mode``: whether the passes run with grad mode
        on (the library: the caller's, so that a trace under ``torch.no_grad()`` stops with
        PyTorch's own error where a plain run does)."""
        self.root = root
        self.grad_mode = grad_mode
        self.summarize = Summarizer(value_budget, final_value_limit)
        # every analysis (analyses.ANALYSES): what each observes is offered below, and by
        # backward_pass; assemble asks each for its records
        self.analyses = new_analyses()
        self._kept_types = kept_call_types(self.analyses)
        self.recorder = Recorder(
            self.summarize, graph_walk.sequence_base(), max_nodes, on_saved=saved_observer(self.analyses)
        )
        self.recorder.fail_safe = self.fail_safe
        self.leaves = dict(leaves)  # named leaves: spec inputs / module inputs
        self.params: dict[str, torch.Tensor] = {}
        self.param_modules: dict[str, str | None] = {}  # (see _scan_modules)
        modules: list[nn.Module] = []
        module_paths: dict[int, str] = {}
        self.module_types: dict[str, tuple[str, str | None, list[str]]] = {}
        if root is not None:
            self._scan_modules(root, root_path, modules, module_paths)
        for name, tensor in {**self.params, **self.leaves}.items():
            self.recorder.leaf_names[id(tensor)] = (tensor, name)
        self.forward_capture = ForwardCapture(
            self.recorder,
            modules,
            module_paths,
            {id(p): n for n, p in self.params.items()},
            kept_calls_of=self._kept_types,
        )
        self.backward_capture = BackwardCapture(self.recorder, set())
        self.env: dict[str, Any] = {}  # named tensors of the program (values)
        self.retained: dict[str, torch.Tensor] = {}
        self.diagnostics: list[Diagnostic] = []
        self.backward_roots: list[str] = []
        self.module_hooks: dict[str, list[ModuleHook]] = {}
        self._stack = ExitStack()
        self.model_hooks: ModelHooks | None = None
        self.nested: NestedRuns | None = None  # (from _install until close)
        try:
            self._install(model_hooks, modules, module_paths)
        except BaseException:
            self.close()  # nothing stays on the user's model when a later step fails
            raise
        self._forwards = 0
        self._backwards: dict[str, int] = {}

    def _scan_modules(
        self,
        root: nn.Module,
        root_path: str,
        modules: list[nn.Module],
        module_paths: dict[int, str],
    ) -> None:
        """One walk over the model: its modules, their paths (under ``root_path``), types and
        parameters, and ``self.params`` (as ``root.named_parameters()`` lists them: a shared
        parameter once, under its first name); the analyses are told of the weights of the
        module types whose calls they keep."""
        params = self.params  # (added to: a program's models are found one after another)
        seen = {id(p) for p in params.values()}
        module_types = self.module_types
        kinds: dict[type, str] = {}  # module class -> the type name the trace reports
        kept_types = self._kept_types
        kept_weights: list[tuple[nn.Module, str, torch.Tensor]] = []  # (module, weight name, weight)
        for path, module in root.named_modules():
            if id(module) in module_paths:  # (met before, under another model: its first path)
                continue
            modules.append(module)
            cls = type(module)
            full = path if not root_path else (f"{root_path}.{path}" if path else root_path)
            if kept_types and isinstance(module, kept_types):
                # (from _parameters, never module.weight: a parametrized weight (weight_norm,
                # spectral_norm) is a property that runs model code, e.g. one more power
                # iteration, changing the model; it is no leaf, so it has no .grad to rebuild)
                weight = module._parameters.get("weight")
                if weight is not None:
                    kept_weights.append((module, f"{full}.weight" if full else "weight", weight))
            module_paths[id(module)] = full
            parent = None if not path else (full.rsplit(".", 1)[0] if "." in full else "")
            names: list[str] = []
            # (read from the module's own dict: module.named_parameters(recurse=False) per
            # module and root.named_parameters() would walk the model twice more, through
            # generators)
            local_params = module._parameters
            if local_params:
                own: set[int] = set()
                for local, param in local_params.items():
                    if param is None or id(param) in own:
                        continue
                    own.add(id(param))
                    name = f"{full}.{local}" if full else local
                    names.append(name)
                    if id(param) not in seen:
                        seen.add(id(param))
                        params[name] = param
            kind = kinds.get(cls)
            if kind is None:
                # a module the spec built reports the spec's type ("Module" for a composite; a
                # class attribute: asked of the class, as nn.Module's __getattr__ fails slowly)
                kind = kinds[cls] = getattr(cls, "spec_type", None) or cls.__name__
            module_types[full] = (kind, parent, names)
        # each parameter's module as grad norms name it (its name's prefix), once per parameter
        for name in params:
            if name not in self.param_modules:
                self.param_modules[name] = owning_module(name)
        for analysis in self.analyses:
            if analysis.keeps_calls_of:
                analysis.weights_found(
                    {
                        name: w
                        for module, name, w in kept_weights
                        if isinstance(module, analysis.keeps_calls_of)
                    }
                )

    def add_model(self, root: nn.Module, root_path: str) -> None:
        """A model met while a program runs (``record()``): its modules, their paths under
        ``root_path`` and its parameters join the capture's, as a root given at the start."""
        before = set(self.params)
        self._scan_modules(root, root_path, self.forward_capture.modules, self.forward_capture.module_paths)
        for name, param in self.params.items():
            if name not in before:
                self.recorder.leaf_names[id(param)] = (param, name)
                self.forward_capture.param_names[id(param)] = name

    def _install(self, model_hooks: bool, modules: list[nn.Module], module_paths: dict[int, str]) -> None:
        """Wrap the model's own hooks and install gradtrace's, each undone by ``close()``."""
        self.recorded_warnings = self._stack.enter_context(warnings.catch_warnings(record=True))
        record_all_but_errors(self.recorded_warnings)
        if model_hooks:
            inside_compiled = compiled_and_inside(modules)[1]
            self.model_hooks = ModelHooks(
                self.recorder,
                self.forward_capture,
                [m for m in modules if id(m) not in inside_compiled],
                module_paths,
                {**self.params, **self.leaves},
                self.module_hooks,
                self.diagnostics,
            )
            self._stack.enter_context(self.model_hooks.wrapped())  # before gradtrace's own hooks
            self.backward_capture.node_dict_seen = self.model_hooks.node_hooks_seen
            self._stack.callback(setattr, self.backward_capture, "node_dict_seen", None)
        self._stack.enter_context(self.forward_capture.hooks_installed())
        self._stack.enter_context(self.backward_capture.grad_write_hooks)
        if self.model_hooks is not None:
            self._stack.enter_context(self.model_hooks.following())
        nested = self.nested = NestedRuns(
            self.recorder,
            self.forward_capture,
            self.backward_capture,
            self.retained,
            self.all_leaves,
            self.error_event,
            self.diagnostics,
        )
        self._stack.enter_context(nested.installed())

    def close(self) -> None:
        """The capture is over: its hooks come off, and the summarizer stops copying (nothing
        writes the model's tensors any more; see Summarizer.passes_over)."""
        self.summarize.passes_over()
        # (this also undoes NestedRuns' interception, which points back at this session: with
        # no cycle left the session and every tensor it holds are freed when the trace is done,
        # by reference counting, not by a later full GC pass over all of them)
        self._stack.close()
        self.nested = None  # (it points back at this session: see NestedRuns.installed)

    def reissue_warnings(self) -> None:
        """The model's warnings, recorded while the session ran, issued again to the caller
        (after ``close()``; see caller_warnings). Once: a second call issues nothing."""
        records, self.recorded_warnings = self.recorded_warnings, []
        reissue(records)

    # ---- the captured block (see capture.py) --------------------------------------------
    def begin_block(self) -> None:
        """The block the capture runs begins (a program's session: its passes are found as it
        runs from here on)."""

    def end_block(self, error: BaseException | None) -> None:
        """The block is over: ``error``, when given, recorded where it broke (once: an error
        a pass recorded already is not recorded again); the passes it left open end."""
        if error is not None:
            self.error_event(error, None)
        rec = self.recorder
        while rec.in_pass:
            if rec.phase == "forward" and rec.passes[rec.pass_index].parent is None:
                self.close_forward()
            else:
                rec.end_pass()

    def close_forward(self) -> None:
        """The open top-level forward pass (if any) ends."""
        rec = self.recorder
        if rec.in_pass and rec.passes[rec.pass_index].parent is None and rec.phase == "forward":
            rec.forward_ended()
            rec.end_pass()
            self._settle()

    # ---- passes -------------------------------------------------------------------------
    def _settle(self) -> None:
        """After a pass, what it left to read on the host: the large copies (read, and dropped)
        and the model's hooks' comparisons made on a device."""
        self.summarize.settle()
        if self.model_hooks is not None:
            self.model_hooks.settle()

    def name(self, name: str, value: Any) -> None:
        """The program assigned ``name`` (called while the forward runs)."""
        if isinstance(value, torch.Tensor):
            self.env[name] = value
            with self.forward_capture.quiet():
                self.forward_capture.discover_from([value])
                self.recorder.name_tensor(name, value)

    def name_node(self, name: str, value: Any) -> None:
        """Label the node that produced ``value`` (a module-local name), without a value."""
        if isinstance(value, torch.Tensor):
            with self.forward_capture.quiet():
                self.forward_capture.discover_from([value])
                self.recorder.name_tensor(name, value)

    def label_constant(self, text: str, value: Any) -> None:
        """A tensor the program computed outside autograd (``d * 5`` of a detached ``d``):
        its leaf node, when an op consumes it, is labelled with that text."""
        if isinstance(value, torch.Tensor):
            self.recorder.label_leaf(value, text)

    def backward_pass(
        self, kind: str, of: str, step: int | None, call: Callable[[], Any], root: Any = None
    ) -> Any:
        """Run ``call()`` (a backward or autograd.grad) with every node hooked. ``root``: the
        tensor it starts from (by default the tensor named ``of``)."""
        count = self._backwards[kind] = self._backwards.get(kind, 0) + 1
        rec = self.recorder
        rec.begin_pass("backward", f"{kind} #{count} of {of}", step)
        pass_index = rec.pass_index
        if root is None:
            root = self.env.get(of, self.leaves.get(of, self.params.get(of)))
        if isinstance(root, torch.Tensor):
            with self.forward_capture.quiet():  # a root that is a leaf: its AccumulateGrad
                self.forward_capture.discover_roots([root])
                if root.grad_fn in rec.node_ids:
                    self.backward_roots.append(rec.node_ids[root.grad_fn])
        if self.model_hooks is not None:
            self.model_hooks.catch_up()
        self._watch_kept_outputs()
        starting = self._backward(pass_index)
        for analysis in self.analyses:
            analysis.backward_starting(starting)
        result = None
        ok = False
        try:
            with (
                torch.set_grad_enabled(self.grad_mode),
                self.backward_capture.node_hooks(self.retained, self.pass_roots()),
            ):
                result = call()
            ok = True
            return result
        except Exception as exc:
            self.error_event(exc, step)
            raise
        finally:
            self._discover_created_in_backward(result)
            ended = self._backward(pass_index)
            for analysis in self.analyses:
                analysis.backward_ended(ended, ok)
            rec.end_pass()
            self._settle()

    def _backward(self, pass_index: int) -> Backward:
        """The top-level backward pass ``pass_index`` as the analyses see it (made as it starts
        and again as it ends: its events are read then)."""
        rec = self.recorder
        return Backward(
            pass_index,
            rec.passes[pass_index].first_seq,
            rec.events,
            MappingProxyType(self.params),
            MappingProxyType(self.param_modules),
        )

    def pass_roots(self) -> list[Any] | None:
        """The nodes the backward starting now runs from, when only the known nodes reachable
        from them are to be hooked; None: every known node (one forward, one graph)."""
        return None

    def _watch_kept_outputs(self) -> None:
        self.backward_capture.watch.update(self.forward_capture.kept_output_nodes())

    def _discover_created_in_backward(self, result: Any) -> None:
        """create_graph backwards build new nodes (in the engine): find them afterwards."""
        tensors = [grad for _name, t in self.all_leaves_named() if (grad := t.grad) is not None]
        tensors += flat_tensors(result)
        with self.forward_capture.quiet():
            self.forward_capture.discover_from(tensors)

    def all_leaves(self) -> list[torch.Tensor]:
        return [t for _name, t in self.all_leaves_named()]

    # ---- errors in steps ----------------------------------------------------------------
    def error_event(self, exc: BaseException, step: int | None) -> None:
        """An ``error`` event with PyTorch's exact message, inside the pass it broke."""
        if getattr(exc, "_gradtrace_recorded", False):
            return
        rec = self.recorder
        # the interpreter wraps torch's errors in a SpecError naming the line: show torch's own
        cause = exc.__cause__ if isinstance(exc, SpecError) and exc.__cause__ is not None else exc
        opened = not rec.in_pass
        if opened:
            rec.begin_pass("step", f"error in step {step}", step)
        payload = ErrorPayload(exception=type(cause).__name__, step=step)
        if cause is not exc:
            payload.where = str(exc)
        node = rec.take_failed_node()
        rec.emit("error", node=node, message=public_text(str(cause), type(cause).__name__), payload=payload)
        if opened:
            rec.end_pass()
        exc._gradtrace_recorded = True  # type: ignore[attr-defined]

    def step_error(self, exc: BaseException, step: int | None, skipped: int) -> None:
        self.error_event(exc, step)
        if skipped:
            self.diagnostics.append(
                Diagnostic(
                    code="steps_skipped",
                    severity="error",
                    message=f"{'the forward' if step is None else f'step {step}'} failed "
                    f"({type(exc).__name__}); the {skipped} later step(s) were not run",
                )
            )
        if "BackwardHookFunction" in str(exc.__cause__ or exc):
            self.diagnostics.append(
                Diagnostic(
                    code="inplace_after_hook",
                    severity="error",
                    message="an in-place operation modified the output of a module that has a full backward "
                    "hook; PyTorch forbids this (the hook's BackwardHookFunctionBackward node returns "
                    "a view)",
                )
            )

    def all_leaves_named(self) -> list[tuple[str, torch.Tensor]]:
        """The parameters and the named inputs whose ``.grad`` a backward fills: leaves that
        require grad. (An input computed from other tensors is no leaf: its ``.grad`` stays
        None, and reading it makes PyTorch warn.)"""
        leaves = [(n, t) for n, t in self.leaves.items() if t.requires_grad and t.is_leaf]
        return list(self.params.items()) + leaves
