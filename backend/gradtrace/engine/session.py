"""The session of one capture: the recorder, the forward and backward captures and what the
analyses ask of them, wired together, finding the program's passes (and, with a frame, its
models and leaves) as its code runs.

Every capture (``record()``, ``trace()``, a spec, gradtrace.watch's step) runs one
``TraceSession`` inside the one entry, capture.Capture; ``assemble.assemble_trace`` then makes
the trace (a TraceDoc) of what it kept. The session owns every hook it installs (an ExitStack
closed in ``close()``) and restores grad mode itself. Its whole life, teardown included, runs
inside the GC pause (the entry sees to it).

``record()`` (program.py: a ``frame``, the block's) runs the block as written: the discovery
mode sees every torch call of the block, the process-wide module hooks every module call, and
every engine run (``backward()``, ``torch.autograd.grad``) becomes a backward pass with every
node hooked, in the engine's order. Nothing of torch is patched; everything comes off when the
block ends, however it ends.

Passes. There is no forward boundary in a plain program: a forward pass opens when the block
first records something (an op that builds graph, a module call) and closes when an engine run
starts at the top level (not inside a module's forward, nor inside a backward: those are
nested passes, see nested_runs). The next op opens the next forward pass. Without a frame
(``trace()``, a spec) the code declares its forward pass (``open_forward`` …
``close_forward``, or ``forward``: an engine run inside it is a nested pass), and every known
node is hooked for a backward (one forward: one graph).

Names (never an address). The block's frame (the one that runs the ``with``) is read when the
capture meets something it cannot name yet, and when the block ends, locals first, then the
frame's globals; variables whose names start with ``_`` are skipped:

* a model bound to a variable: its modules and parameters are named under that variable,
  ``model.fc1.weight`` (a model inside another one found there: under the outer one);
* a model no variable of the block holds that a local of a function the block called does
  (a ``main()`` that builds and trains it; the innermost such function's, ``self`` aside):
  under that local's name, ``netD.0.weight``;
* a module none of these holds, nor a member of one (``nn.Linear(3, 4)(x)``): ``Linear#0``,
  ``Linear#1``, …; one called while it or its model is being built (its ``__init__`` runs it)
  is not recorded then, and is named under the model once a variable holds it; a layer added to a model after
  it was found, under it (``model.fc#2`` where ``model.fc`` was taken); a layer of a model only
  a local of a function holds, under that local (``model.0``);
* a tensor: the variable bound to it, ``w``, ``x``, ``loss`` (a parameter keeps its path; a
  model's own parameter takes back its path from the tensors ``torch.func.functional_call``
  swapped in when the model was met there first);
* one level inside a list, tuple or dict a variable holds (frames.members), each member spelled
  as the program reaches it: ``params["w"]``, ``models[0]``, ``outputs.loss`` (a mapping's
  member that is also its attribute: a Hugging Face output): a leaf no variable holds, a leaf
  that requires grad (in ``grads`` under that name too), a model or one holding the module met
  (named there even while a loop variable holds it: ``models[0].fc.weight``), an optimizer
  (``optimizers[0]``, before its variable), a backward's root no variable holds; looked for
  only when something met has no name yet, and when the block ends;
* a backward's root no variable nor member holds: the local variable of the function that
  called backward, or a member of one (label only).

Without a frame, the model and named inputs are given (``root``, ``leaves``), a module no model
holds (a loss module inside ``loss_fn``) is not recorded, and a backward is labelled by the
name the code gave its root (``name``).

The trace's ``grads``: the final ``.grad`` of every parameter of every model met and of every
leaf tensor the block used that requires grad and is bound to a variable, or a member of one
(see above), when the block ends
(and of every tensor there that retains its grad); its ``values``: every tensor bound to a
variable then that the trace saw.

Steps. Code that drives a program step by step (a spec's steps) says which step runs
(``TraceSession.in_step``, a ``StepNote``): the passes found while it runs carry its number,
and an engine run is labelled by the kind and the root the step names (``grad #1 of a, b``).

One capture at a time in a thread: ``record()`` inside another ``record()`` or inside
``trace()``, and ``trace()`` or a spec run inside ``record()``, raise a RuntimeError when they
start (a spec run before its dry run).
"""

from __future__ import annotations

import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import get_gradient_edge
from torch.optim.optimizer import (
    Optimizer,
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from gradtrace.engine import graph_walk
from gradtrace.engine.analyses import kept_call_types, new_analyses, saved_observer
from gradtrace.engine.analysis import Backward
from gradtrace.engine.backward_capture import BackwardCapture
from gradtrace.engine.caller_warnings import record_all_but_errors, reissue
from gradtrace.engine.forward_capture import ForwardCapture, compiled_and_inside, flat_tensors, leave_mode
from gradtrace.engine.frames import callers_variable, local_name, member_of, members, variables
from gradtrace.engine.model_hooks import ModelHooks
from gradtrace.engine.nested_runs import ENGINE_CALLS, NestedRuns, call_arguments
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
    OptimizerStepPayload,
    SgdStepPayload,
    ZeroGradPayload,
)

_ZEROING = (torch.Tensor.zero_, torch._foreach_zero_)  # (how zero_grad(set_to_none=False) zeroes)
_GRAD_SET = torch.Tensor.grad.__set__  # type: ignore[union-attr]  # (a torch function: the discovery mode sees `t.grad = v`)


@dataclass(frozen=True, slots=True)
class StepNote:
    """The step the code driving a program runs now (see ``TraceSession.in_step``):
    ``index``, the number its passes carry; for a step that is one engine run, ``kind`` and
    ``of``, its pass's label (``grad`` … ``of a, b``), the root looked up by that name; for an
    optimizer step that is a spec's ``sgd_step``, ``kind`` "sgd_step"."""

    index: int
    kind: str | None = None
    of: str | None = None


def _has_tensor_hooks(tensor: torch.Tensor) -> bool:
    return bool(tensor._backward_hooks or getattr(tensor, "_post_accumulate_grad_hooks", None))


class TraceSession:
    """The session of one capture (see the module's docstring): with a ``frame`` (a program's
    block, ``record()``) its models and leaves are found and named by the frame's variables;
    without one (``trace()``, a spec, a watched step) they are given (``root``, ``leaves``)."""

    # what gradtrace's own recording raises is kept, not raised into the code it records
    # (Recorder.trip): gradtrace.watch's step capture, where the training must run as without it
    fail_safe = False
    # an optimizer's step() is recorded by process-wide step hooks of the session's own
    # (gradtrace.watch's step capture: its watch, which has its own, says when: step_capture.py)
    optimizer_hooks = True

    def __init__(
        self,
        frame: types.FrameType | None,
        root: nn.Module | None = None,
        leaves: dict[str, torch.Tensor] | None = None,
        *,
        max_nodes: int = LIBRARY_MAX_NODES,
        value_budget: int = DEFAULT_VALUE_BUDGET,
        final_value_limit: int = DEFAULT_FINAL_VALUE_LIMIT,
        model_hooks: bool = True,
        grad_mode: bool = True,
    ) -> None:
        """``model_hooks``: record the model's own hooks (a spec's model has none: its hooks
        are the spec's, recording themselves). ``grad_mode``: whether the passes run with grad
        mode on (the library: the caller's, so that a trace under ``torch.no_grad()`` stops
        with PyTorch's own error where a plain run does; a program's: as each engine run is
        called)."""
        self.frame = frame
        self.program = frame is not None
        # the code declares its forward pass (trace(): an engine run inside it is nested);
        # else a top-level engine run ends the open forward (a program's, a watched step's)
        self.declared = frame is None
        self._anonymous = 0
        self._thread = threading.get_ident()  # (the program's: the one running the block)
        self._roots: list[Any] = []  # the nodes the top-level backward starting now runs from
        self._steps: dict[str, int] = {}  # optimizer.step pass label -> how many so far
        # per step() running: its parameters and their versions before it
        self._stepping: list[tuple[list[torch.Tensor], list[int]]] = []
        # the zero_grad event a run of ``.grad = None`` adds to, and the seq it must be last at
        self._zeroing: tuple[ZeroGradPayload, int] | None = None
        self._models: dict[str, nn.Module] = {}  # each model found, by the path it was named under
        self._mode: Any = None  # the discovery mode, on for the whole block
        self.step: StepNote | None = None  # (see in_step)
        self._forwards = 0
        self._backwards: dict[str, int] = {}
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
        self.leaves = dict(leaves or {})  # named leaves: spec inputs / module inputs
        self.params: dict[str, torch.Tensor] = {}
        self.param_modules: dict[str, str | None] = {}  # (see _scan_modules)
        modules: list[nn.Module] = []
        module_paths: dict[int, str] = {}
        self.module_types: dict[str, tuple[str, str | None, list[str]]] = {}
        if root is not None:
            self._scan_modules(root, "", modules, module_paths)
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

    def add_model(self, root: nn.Module, root_path: str, starting: nn.Module | None = None) -> None:
        """A model met while a program runs (``record()``): its modules, their paths under
        ``root_path`` and its parameters join the capture's, as a root given at the start, and
        their hooks are wrapped (``starting``: the module whose call is beginning, see
        ModelHooks.adopt)."""
        modules = self.forward_capture.modules
        known = len(modules)
        taken = self.module_types
        if root_path in taken:  # (the variable now holds another model: the first kept its name)
            root_path = next(
                f"{root_path}#{k}" for k in range(2, len(taken) + 3) if f"{root_path}#{k}" not in taken
            )
        before = set(self.params)
        self._scan_modules(root, root_path, modules, self.forward_capture.module_paths)
        rec = self.recorder
        for name, param in self.params.items():
            if name not in before:
                rec.leaf_names[id(param)] = (param, name)
                self.forward_capture.param_names[id(param)] = name
                if rec.leaf_id(param) is not None:
                    # (used before its model was found, while it was being built: its leaf
                    # node, unnamed then, takes its path)
                    rec.name_tensor(name, param)
        self._models[root_path] = root
        if self.model_hooks is not None:
            self.model_hooks.adopt(modules[known:], starting)

    def _install(self, model_hooks: bool, modules: list[nn.Module], module_paths: dict[int, str]) -> None:
        """Wrap the model's own hooks and install gradtrace's, each undone by ``close()``."""
        capture = self.forward_capture
        capture.outside_pass = self.open_forward
        if self.program:
            capture.unknown_module = self._module_met
            self.recorder.name_of = self._leaf_met
        # the models and hooked leaves the frame holds already, found first: their hooks are
        # wrapped as a traced model's are (those registered later: as they come, see adopt)
        self._scan_models()
        for name, value in variables(self.frame):
            if isinstance(value, torch.Tensor) and value.is_leaf and _has_tensor_hooks(value):
                self.leaves.setdefault(name, value)
                self.recorder.leaf_names.setdefault(id(value), (value, name))
        self.recorded_warnings = self._stack.enter_context(warnings.catch_warnings(record=True))
        record_all_but_errors(self.recorded_warnings)
        if model_hooks:
            inside_compiled = compiled_and_inside(modules)[1]
            self.model_hooks = ModelHooks(
                self.recorder,
                capture,
                [m for m in modules if id(m) not in inside_compiled],
                module_paths,
                {**self.params, **self.leaves},
                self.module_hooks,
                self.diagnostics,
            )
            self._stack.enter_context(self.model_hooks.wrapped())  # before gradtrace's own hooks
            self.backward_capture.node_dict_seen = self.model_hooks.node_hooks_seen
            self._stack.callback(setattr, self.backward_capture, "node_dict_seen", None)
        self._stack.enter_context(capture.hooks_installed())
        self._stack.enter_context(self.backward_capture.grad_write_hooks)
        if self.model_hooks is not None:
            self._stack.enter_context(self.model_hooks.following())
        nested = self.nested = NestedRuns(
            self.recorder,
            capture,
            self.backward_capture,
            self.retained,
            self.all_leaves,
            self.error_event,
            self.diagnostics,
        )
        self._stack.enter_context(nested.installed())
        capture.intercepts.update(dict.fromkeys(ENGINE_CALLS, self._engine_run))
        capture.intercepts[_GRAD_SET] = self._grad_set
        capture.intercepts.update(dict.fromkeys(_ZEROING, self._grad_zeroed))
        # (process-wide: every optimizer's steps; removed by close(), as every hook here)
        if self.optimizer_hooks:
            for register, hook in (
                (register_optimizer_step_pre_hook, self._step_starts),
                (register_optimizer_step_post_hook, self._step_ends),
            ):
                self._stack.callback(register(hook).remove)

    def close(self) -> None:
        """The capture is over: its hooks come off, and the summarizer stops copying (nothing
        writes the model's tensors any more; see Summarizer.passes_over)."""
        self.summarize.passes_over()
        # (this also undoes NestedRuns' interception; with no cycle left the session and every
        # tensor it holds are freed when the trace is done, by reference counting, not by a
        # later full GC pass over all of them)
        self._stack.close()
        self.nested = None  # (it points back at this session: see NestedRuns.installed)
        # (each points back at this session too)
        capture = self.forward_capture
        capture.unknown_module = capture.outside_pass = self.recorder.name_of = None
        self.frame = None  # (the block's frame: its variables stay the program's)
        for func in (_GRAD_SET, *_ZEROING):
            capture.intercepts.pop(func, None)

    def reissue_warnings(self) -> None:
        """The model's warnings, recorded while the session ran, issued again to the caller
        (after ``close()``; see caller_warnings). Once: a second call issues nothing."""
        records, self.recorded_warnings = self.recorded_warnings, []
        reissue(records)

    # ---- the captured block (see capture.py) --------------------------------------------
    def begin_block(self) -> None:
        """The block the capture runs begins: the discovery mode is on for the whole block
        (the program's passes are found as it runs, see the module's docstring)."""
        self._mode = self.forward_capture.new_mode()
        self._mode.__enter__()

    def end_block(self, error: BaseException | None) -> None:
        """The block is over: the discovery mode off; ``error``, when given, recorded where it
        broke (once: an error a pass recorded already is not recorded again); the passes it
        left open end; then a program's variables name what it left."""
        mode, self._mode = self._mode, None
        if mode is not None:
            leave_mode(mode)
        if error is not None:
            self.error_event(error, None)
        rec = self.recorder
        while rec.in_pass:
            if rec.phase == "forward" and rec.passes[rec.pass_index].parent is None:
                self.close_forward()
            else:
                rec.end_pass()
        if self.program:
            self.name_variables()

    def close_forward(self) -> None:
        """The open top-level forward pass (if any) ends."""
        rec = self.recorder
        if rec.in_pass and rec.passes[rec.pass_index].parent is None and rec.phase == "forward":
            rec.forward_ended()
            rec.end_pass()
            self._settle()

    # ---- names --------------------------------------------------------------------------
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

    def _scan_models(self, starting: nn.Module | None = None) -> None:
        """Every model the frame's variables hold that the capture does not know yet, named
        under its variable (the outermost first: a model inside another one found here is
        named under the outer one)."""
        paths = self.forward_capture.module_paths
        found = [(n, v) for n, v in variables(self.frame) if isinstance(v, nn.Module) and id(v) not in paths]
        if not found:
            return
        # (a model a list or dict of the frame holds, or holds a model of, is named by its place
        # there, not by the loop variable that holds it now: models[0], models[1], not model, model#2)
        found = [self._held_by_member(v) or (n, v) for n, v in found]
        inner = {id(sub) for _n, m in found for sub in m.modules() if sub is not m}
        for name, model in sorted(found, key=lambda item: id(item[1]) in inner):
            if id(model) not in paths:
                self.add_model(model, name, starting)

    def _module_met(self, module: nn.Module) -> str | None:
        """The path of a module called for the first time (its model joins the capture);
        None for a module another thread calls (the module hooks are process-wide)."""
        if threading.get_ident() != self._thread:
            return None
        self._scan_models(starting=module)
        paths = self.forward_capture.module_paths
        if id(module) in paths:
            return paths[id(module)]
        owner = self._owner(module)
        if self._being_built(owner[0] if owner is not None else module):
            return None  # (recorded once its model is found: its variable names it then)
        held = None if owner is not None and id(owner[0]) in paths else self._held_by_member(module)
        if held is not None:  # (a model in a list or dict of the frame: models[0])
            self.add_model(held[1], held[0], starting=module)
        elif owner is not None and id(owner[0]) in paths:  # (a layer added to a model after it was found)
            self.add_model(module, f"{paths[id(owner[0])]}.{owner[1]}", starting=module)
        else:
            # a model no variable of the block holds: named by the local variable of the
            # function the block called that holds it (a main() that builds and trains it),
            # else by its type
            model = module if owner is None else owner[0]
            name = local_name(model, self._below_the_block())
            if name is None:
                name = f"{type(model).__name__}#{self._anonymous}"
                self._anonymous += 1
            self.add_model(model, name, starting=module)
        return paths[id(module)]

    def _held_by_member(self, module: nn.Module) -> tuple[str, nn.Module] | None:
        """The path of a member of a list, tuple or dict of the frame's variables (see
        frames.members) that is this module, or a model the capture does not know yet that
        holds it (an ``nn.ModuleList`` in a list), and that member."""
        paths = self.forward_capture.module_paths
        for path, value in members(variables(self.frame)):
            if value is module:
                return path, value
            if isinstance(value, nn.Module) and id(value) not in paths:
                if any(sub is module for sub in value.modules()):
                    return path, value
        return None

    def _below_the_block(self) -> Iterator[types.FrameType]:
        """The frames of the code the block is running, innermost first (gradtrace's too)."""
        frame: types.FrameType | None = sys._getframe(1)
        while frame is not None and frame is not self.frame:
            yield frame
            frame = frame.f_back

    def _owner(self, module: nn.Module) -> tuple[nn.Module, str] | None:
        """A model that holds ``module``, and its path there, if a local variable of the code
        the block is running holds one: ``self`` in a model's ``__init__`` that calls its
        layers to size the next one, or in a model's forward calling a layer added to it after
        it was found."""
        for frame in self._below_the_block():
            for value in list(frame.f_locals.values()):
                if isinstance(value, nn.Module) and value is not module:
                    path = next((p for p, sub in value.named_modules() if sub is module), None)
                    if path is not None:
                        return value, path
        return None

    def _being_built(self, module: nn.Module) -> bool:
        """Its ``__init__`` is running (it calls its layers, or itself: torch's
        ParametrizationList does, in ``register_parametrization``): no variable can hold it yet."""
        return any(
            frame.f_code.co_name == "__init__" and frame.f_locals.get("self") is module
            for frame in self._below_the_block()
        )

    def _leaf_met(self, tensor: torch.Tensor) -> str | None:
        """The name of a leaf seen for the first time: a parameter's path, or the variable
        bound to it; None when nothing names it."""
        self._scan_models()
        named = self.recorder.leaf_names.get(id(tensor))
        if named is not None and named[0] is tensor:
            return named[1]
        if isinstance(tensor, nn.Parameter):
            path = self._own_parameter_path(tensor)
            if path is not None:
                return path
        return self.variable_of(tensor) or (
            member_of(tensor, variables(self.frame)) if self.program else None
        )

    def _own_parameter_path(self, param: nn.Parameter) -> str | None:
        """The path of a known model's own parameter met only now, if it is one: its model
        was met inside ``torch.func.functional_call``, which had swapped the tensors it was
        given (no Parameters: detached ones, torch.func's wrappers) into the modules'
        ``_parameters`` for the call, so that path went to one of those. The model's own
        parameter takes its path back (its ``.grad`` is the one ``grads`` reports); a
        Parameter swapped in while the path holds the model's own Parameter is not named by it."""
        paths = self.forward_capture.module_paths
        for module in self.forward_capture.modules:
            for local, candidate in module._parameters.items():
                if candidate is not param:
                    continue
                full = paths[id(module)]
                path = f"{full}.{local}" if full else local
                held = self.params.get(path)
                if isinstance(held, nn.Parameter) and held is not param:
                    return None
                self.params[path] = param
                self.recorder.leaf_names[id(param)] = (param, path)
                self.forward_capture.param_names[id(param)] = path
                return path
        return None

    def variable_of(self, obj: object) -> str | None:
        """The name of the frame's variable bound to this very object (a tensor, an
        optimizer), if one is (no frame: the last name the code gave it, see ``name``)."""
        if not self.program:
            return next((name for name, value in reversed(self.env.items()) if value is obj), None)
        return next((name for name, value in variables(self.frame) if value is obj), None)

    def name_variables(self) -> None:
        """The block is over: the tensors its variables hold now are the trace's named leaves,
        retained tensors and values (see the module's docstring)."""
        self._scan_models()
        rec = self.recorder
        for name in [n for n, t in self.leaves.items() if rec.leaf_id(t) is None]:
            del self.leaves[name]  # (a hooked leaf of the frame the block never used)
        self._drop_unused_models()
        params = {id(p) for p in self.params.values()}
        for name, value in variables(self.frame):
            if not isinstance(value, torch.Tensor) or id(value) in params:
                continue
            if value.is_leaf:
                if rec.leaf_id(value) is not None:  # (a leaf the block used)
                    self.leaves[name] = value
                    rec.leaf_names.setdefault(id(value), (value, name))
            elif rec.tensor_node(value) is not None:
                self.env[name] = value
                if value.retains_grad:
                    self.retained[name] = value
                with self.forward_capture.quiet():
                    rec.name_tensor(name, value)
        for name, value in members(variables(self.frame)):  # (params["w"], a hand-written model's)
            if (
                isinstance(value, torch.Tensor)
                and value.is_leaf
                and value.requires_grad
                and id(value) not in params
            ):
                if rec.leaf_id(value) is not None and name not in self.leaves:
                    self.leaves[name] = value
                    rec.leaf_names.setdefault(id(value), (value, name))

    def _drop_unused_models(self) -> None:
        """The models the frame held that the block never used (no module of theirs called,
        no parameter of theirs in a graph) leave the trace: their parameters' ``.grad`` is none
        of the block's doing (None there would read as "got no gradient", a ``.grad`` from
        before the block as the block's)."""
        rec = self.recorder
        called = {event.module for event in rec.events if event.kind == "module_forward_pre"}
        for root_path, root in self._models.items():
            inside = root_path + "."
            if any(path == root_path or path.startswith(inside) for path in called if path):
                continue
            if any(rec.leaf_id(param) is not None for param in root.parameters()):
                continue
            for table in (self.params, self.param_modules, self.module_types):
                for name in [n for n in table if n == root_path or n.startswith(inside)]:
                    del table[name]

    # ---- passes -------------------------------------------------------------------------
    def _settle(self) -> None:
        """After a pass, what it left to read on the host: the large copies (read, and dropped)
        and the model's hooks' comparisons made on a device."""
        self.summarize.settle()
        if self.model_hooks is not None:
            self.model_hooks.settle()

    @contextmanager
    def in_step(self, note: StepNote) -> Iterator[None]:
        """The passes found inside this block are the step ``note`` says (see StepNote); its
        clearings of ``.grad`` are a run of their own (one zero_grad event per step)."""
        self.step = note
        self._zeroing = None
        try:
            yield
        finally:
            self.step = None

    def _step_index(self) -> int | None:
        return self.step.index if self.step is not None else None

    def open_forward(self) -> None:
        """Something is recorded while no pass is open (or the code declares its forward): a
        forward pass begins (the models the frame holds now are looked for: a hook registered
        on one before its first call is wrapped before that call collects it)."""
        self._scan_models()
        self._forwards += 1
        self.recorder.begin_pass("forward", f"forward #{self._forwards}", self._step_index())

    def forward(
        self, run: Callable[[], Any], error_is_event: Callable[[Exception], bool] | None = None
    ) -> Any:
        """``run()`` as a forward pass the code declares (a spec's program; trace()'s forward
        is the caller's code between ``open_forward`` and ``close_forward``); returns what it
        returns. An exception is re-raised; it is also recorded as an ``error`` event in the
        pass when it is a step's (see in_step) or ``error_is_event(exc)`` says so."""
        self.open_forward()
        try:
            return run()
        except Exception as exc:
            if self.step is not None or (error_is_event is not None and error_is_event(exc)):
                self.error_event(exc, self._step_index())
            raise
        finally:
            self.close_forward()

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
                # (a program: only the graph the backward can run, a loop's earlier graphs are
                # known too; no frame: one forward, one graph, every known node)
                self.backward_capture.node_hooks(self.retained, self._roots if self.program else None),
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

    def _engine_run(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """``backward()`` or ``torch.autograd.grad``: a backward pass of its own at the top
        level of the program, a nested pass inside a module's forward or a backward."""
        rec = self.recorder
        if rec.in_pass and (
            rec.phase != "forward"
            or rec.module_running()
            or rec.passes[rec.pass_index].parent
            or self.declared  # (inside a forward the code declared)
        ):
            assert self.nested is not None  # (installed until close)
            return self.nested.run(func, args, kwargs)
        self.close_forward()
        roots = flat_tensors(call_arguments(func, args, kwargs)[0])
        root = roots[0] if roots else None
        kind = ENGINE_CALLS[func]
        note = self.step
        if note is not None and note.of is not None:  # (labelled by the step: its root by name)
            kind, of, root = note.kind or kind, note.of, None
        else:
            of = (self.variable_of(root) if root is not None else None) or self.unnamed_root(root, kind)
        self.grad_mode = torch.is_grad_enabled()  # (the program's, as the call is made)
        # (gradtrace's reads of the roots: no calls a __torch_function__ subclass sees)
        with torch._C.DisableTorchFunction():
            self._roots = [
                t.grad_fn if t.grad_fn is not None else get_gradient_edge(t).node
                for t in roots
                if t.requires_grad
            ]
        try:
            result = self.backward_pass(
                kind,
                of,
                self._step_index(),
                lambda: self.forward_capture.real(func, *args, **kwargs),
                root=root,
            )
        finally:
            self._roots = []
        self.backward_ended(kind)
        return result

    def unnamed_root(self, root: torch.Tensor | None, kind: str) -> str:
        """What a top-level engine run (``kind``: "backward", "autograd.grad") is "of" when no
        variable of the block holds its root: in a program, a member of a mapping the block
        holds (a Hugging Face output, ``outputs.loss``), else the local variable of the
        function that made the call (``loss`` in a ``train()`` the block called), or a member
        of one. (This
        and ``backward_ended``: what gradtrace.watch's StepSession changes.)"""
        if not self.program or root is None:
            return "tensor"
        return member_of(root, variables(self.frame)) or callers_variable(root) or "tensor"

    def backward_ended(self, kind: str) -> None:
        """A top-level engine run has ended (inside the call the mode intercepted)."""

    # ---- optimizers and zero_grad --------------------------------------------------------
    def _step_starts(self, optimizer: Optimizer, _args: tuple, _kwargs: dict) -> None:
        """An optimizer's ``step()`` begins: a pass of its own at the top level (inside a
        backward, e.g. in a post-accumulate-grad hook, its event goes in that pass). Another
        thread's optimizers are not the program's (the step hooks are process-wide)."""
        if threading.get_ident() != self._thread:
            return
        params = [p for group in optimizer.param_groups for p in group["params"]]
        self._stepping.append((params, [p._version for p in params]))
        rec = self.recorder
        if rec.in_pass and (rec.phase != "forward" or rec.module_running()):
            return
        self.close_forward()
        if self._sgd_step():
            rec.begin_pass("step", f"sgd_step lr={optimizer.param_groups[0]['lr']:g}", self._step_index())
            return
        name = self._optimizer_name(optimizer)
        label = f"{name or type(optimizer).__name__}.step"
        count = self._steps[label] = self._steps.get(label, 0) + 1
        rec.begin_pass("step", f"{label} #{count}", None)

    def _optimizer_name(self, optimizer: Optimizer) -> str | None:
        """The variable holding the optimizer: in a program, its place in a list or dict of the
        block's (``optimizers[0]``, not the loop variable holding it now), else the block's
        variable, else the local one of the function that called its ``step()`` (an optimizer
        made in a ``train()``)."""
        if not self.program:
            return self.variable_of(optimizer)
        return (
            member_of(optimizer, variables(self.frame))
            or self.variable_of(optimizer)
            or callers_variable(optimizer)
        )

    def sgd_step_event(self, lr: float, after: dict[str, Any]) -> None:
        """A spec's ``sgd_step`` event: its learning rate, the parameters it changed (after
        the step). In the optimizer step's pass; in one of its own when no optimizer ran (a
        spec with no parameter: nothing to update, the step's event all the same)."""
        rec = self.recorder
        opened = not rec.in_pass
        if opened:
            rec.begin_pass("step", f"sgd_step lr={lr:g}", self._step_index())
        rec.emit("sgd_step", payload=SgdStepPayload(lr=lr, after=after))
        rec.end_pass()
        self._settle()

    def _sgd_step(self) -> bool:
        """The optimizer step running is a spec's ``sgd_step`` (see StepNote): its event is
        the trace format's ``sgd_step`` (the learning rate, the parameters after)."""
        return self.step is not None and self.step.kind == "sgd_step"

    def _step_ends(self, optimizer: Optimizer, _args: tuple, _kwargs: dict) -> None:
        """Its ``optimizer_step`` event: the parameters it changed, after the step."""
        if threading.get_ident() != self._thread:
            return
        params, versions = self._stepping.pop()
        rec = self.recorder
        after: dict[str, Any] = {}
        with self.forward_capture.quiet():
            for k, (param, version) in enumerate(zip(params, versions, strict=True)):
                if param._version != version:
                    name = self._leaf_met(param) or f"param_groups.{k}"
                    after[name] = rec.summarize(param)
        lr = optimizer.param_groups[0].get("lr") if optimizer.param_groups else None
        if self._sgd_step():
            self.sgd_step_event(optimizer.param_groups[0]["lr"], after)
            return
        payload = OptimizerStepPayload(
            optimizer=type(optimizer).__name__,
            name=self._optimizer_name(optimizer),
            lr=float(lr) if isinstance(lr, int | float) else None,
            after=after,
        )
        rec.emit("optimizer_step", message=rec.passes[rec.pass_index].label, payload=payload)
        if rec.in_pass and rec.phase == "step":
            rec.end_pass()
            self._settle()

    def _grad_set(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """``tensor.grad = value`` (what ``zero_grad()`` does by default): a ``zero_grad``
        event when it clears the gradient of a tensor the trace has (one event for a run of
        them, as one ``zero_grad()`` call makes)."""
        tensor = args[0]
        before = tensor.grad
        result = self.forward_capture.real(func, *args, **kwargs)
        if before is not None and args[1] is None:
            self._cleared(self.recorder.leaf_id(tensor), set_to_none=True)
        return result

    def _grad_zeroed(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        """``grad.zero_()`` / ``torch._foreach_zero_(grads)`` (``zero_grad(set_to_none=False)``):
        a ``zero_grad`` event for the leaves whose ``.grad`` it filled with zeros."""
        result = self.forward_capture.real(func, *args, **kwargs)
        zeroed = flat_tensors(args[0])
        if zeroed:  # (few calls: a look at the known leaves' .grad each time)
            ids = {id(t) for t in zeroed}
            for leaf, node in self.recorder.known_leaves():
                grad = leaf.grad
                if grad is not None and id(grad) in ids:
                    self._cleared(node, set_to_none=False)
        return result

    def _cleared(self, leaf: str | None, set_to_none: bool) -> None:
        """The ``.grad`` of the leaf with this node was cleared: its name joins the zero_grad
        event of this run of clearings (a new one: see zero_grad_event)."""
        if leaf is None:
            return
        rec = self.recorder
        name = rec.by_id[leaf].tensor or leaf
        zero = self._zeroing
        if zero is not None and zero[1] == rec.next_seq() - 1 and zero[0].set_to_none == set_to_none:
            zero[0].tensors.append(name)
            return
        self.zero_grad_event(set_to_none, [name])

    def zero_grad_event(self, set_to_none: bool, tensors: list[str]) -> None:
        """A new ``zero_grad`` event naming ``tensors`` (in a pass of its own outside any
        pass), which the clearings right after it join. (Called as is by a step that is a
        zero_grad and cleared nothing: its event all the same, naming no tensor.)"""
        rec = self.recorder
        payload = ZeroGradPayload(set_to_none=set_to_none, tensors=tensors)
        if rec.in_pass:
            rec.emit("zero_grad", payload=payload)
        else:
            rec.begin_pass("step", "zero_grad", self._step_index())
            rec.emit("zero_grad", payload=payload)
            rec.end_pass()
        self._zeroing = (payload, rec.next_seq() - 1)

    # ---- errors in steps ----------------------------------------------------------------
    def error_event(self, exc: BaseException, step: int | None) -> None:
        """An ``error`` event with PyTorch's exact message, inside the pass it broke."""
        if getattr(exc, "_gradtrace_recorded", False):
            return
        rec = self.recorder
        # the interpreter wraps torch's errors in a SpecError naming the line: show torch's own
        cause = exc.__cause__ if isinstance(exc, SpecError) and exc.__cause__ is not None else exc
        opened = not rec.in_pass
        if opened:  # (between passes: a spec's step, or a program's own code between them)
            label = f"error in step {step}" if step is not None else f"{type(cause).__name__} raised"
            rec.begin_pass("step", label, step)
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
