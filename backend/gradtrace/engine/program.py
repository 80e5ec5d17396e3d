"""A program recorded as it runs: the engine beneath ``gradtrace.record()``.

``with gradtrace.record() as rec:`` runs the block as written, with the capture of a trace on
for its duration (``start_recording``: the one capture entry, capture.Capture, that
``trace()`` and a spec run use too, with a ``ProgramSession``): the discovery mode sees every
torch call of the block,
the process-wide module hooks every module call, and every engine run (``backward()``,
``torch.autograd.grad``) becomes a backward pass with every node hooked, in the engine's order.
Nothing of torch is patched; everything comes off when the block ends, however it ends.

Passes. There is no forward boundary in a plain program: a forward pass opens when the block
first records something (an op that builds graph, a module call) and closes when an engine run
starts at the top level (not inside a module's forward, nor inside a backward: those are
nested passes, see nested_runs). The next op opens the next forward pass.

Names (never an address). The block's frame (the one that runs the ``with``) is read when the
capture meets something it cannot name yet, and when the block ends, locals first, then the
frame's globals; variables whose names start with ``_`` are skipped:

* a model bound to a variable: its modules and parameters are named under that variable,
  ``model.fc1.weight`` (a model inside another one found there: under the outer one);
* a module no variable holds (``nn.Linear(3, 4)(x)``): ``Linear#0``, ``Linear#1``, …;
* a tensor: the variable bound to it, ``w``, ``x``, ``loss`` (a parameter keeps its path).

The trace's ``grads``: the final ``.grad`` of every parameter of every model met and of every
leaf tensor the block used that requires grad and is bound to a variable when the block ends
(and of every tensor there that retains its grad); its ``values``: every tensor bound to a
variable then that the trace saw.

Steps. Code that drives a program step by step (a spec's steps) says which step runs
(``ProgramSession.in_step``, a ``StepNote``): the passes found while it runs carry its number,
and an engine run is labelled by the kind and the root the step names (``grad #1 of a, b``).

One capture at a time in a thread: ``record()`` inside another ``record()`` or inside
``trace()``, and ``trace()`` or a spec run inside ``record()``, raise a RuntimeError when they
start (a spec run before its dry run).
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.autograd.graph import get_gradient_edge
from torch.optim.optimizer import (
    Optimizer,
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from gradtrace.engine.capture import Capture
from gradtrace.engine.forward_capture import flat_tensors, leave_mode
from gradtrace.engine.nested_runs import ENGINE_CALLS, call_arguments
from gradtrace.engine.session import LIBRARY_MAX_NODES, TraceSession
from gradtrace.engine.summarize import DEFAULT_FINAL_VALUE_LIMIT, DEFAULT_VALUE_BUDGET
from gradtrace.trace_schema import OptimizerStepPayload, SgdStepPayload, ZeroGradPayload

# frames that are not the program's: gradtrace's and torch's (loss.backward() reaches the
# discovery mode through torch/_tensor.py and torch/overrides.py)
_LIBRARIES = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.dirname(torch.__file__) + os.sep,
)
_ZEROING = (torch.Tensor.zero_, torch._foreach_zero_)  # (how zero_grad(set_to_none=False) zeroes)
_GRAD_SET = torch.Tensor.grad.__set__  # type: ignore[union-attr]  # (a torch function: the discovery mode sees `t.grad = v`)


def _variables(frame: types.FrameType | None) -> Iterator[tuple[str, Any]]:
    """The frame's variables the program named: its locals, then its globals (a function's
    frame: the module's models and tensors it uses), none starting with ``_`` (no frame:
    none)."""
    if frame is None:
        return
    scopes = [frame.f_locals]
    if frame.f_globals is not scopes[0]:
        scopes.append(frame.f_globals)
    seen: set[str] = set()
    for scope in scopes:
        for name, value in list(scope.items()):
            if name[:1] != "_" and name not in seen:
                seen.add(name)
                yield name, value


def _callers_variable(obj: object) -> str | None:
    """The name a local variable of the program's code that made this call (the innermost
    frame outside torch and gradtrace: a ``train()`` the block called) gives this very object,
    if one does (none starting with ``_``)."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_LIBRARIES):
        frame = frame.f_back
    if frame is None:
        return None
    return next((n for n, value in frame.f_locals.items() if value is obj and n[:1] != "_"), None)


def input_names(args: tuple, kwargs: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A model call's input tensors by their names in the trace (``trace()``'s inputs, a
    watched step's): positional ``x`` (several: ``x0``, ``x1``, …, in order), keyword ones by
    their keyword (the first tensor inside a nested one); a tensor given twice
    (``input_ids=ids, labels=ids``) under its first name."""
    positional = flat_tensors(args)
    names = {"x": positional[0]} if len(positional) == 1 else {f"x{k}": t for k, t in enumerate(positional)}
    seen = {id(t) for t in names.values()}
    for key, value in kwargs.items():
        found = flat_tensors(value)
        if found and key not in names and id(found[0]) not in seen:
            names[key] = found[0]
            seen.add(id(found[0]))
    return names


@dataclass(frozen=True, slots=True)
class StepNote:
    """The step the code driving a program runs now (see ``ProgramSession.in_step``):
    ``index``, the number its passes carry; for a step that is one engine run, ``kind`` and
    ``of``, its pass's label (``grad`` … ``of a, b``), the root looked up by that name; for an
    optimizer step that is a spec's ``sgd_step``, ``kind`` "sgd_step"."""

    index: int
    kind: str | None = None
    of: str | None = None


def _has_tensor_hooks(tensor: torch.Tensor) -> bool:
    return bool(tensor._backward_hooks or getattr(tensor, "_post_accumulate_grad_hooks", None))


class ProgramSession(TraceSession):
    """A TraceSession whose passes are found while the code runs; with a ``frame`` (a
    program's block, ``record()``) its models and leaves too, named by the frame's variables.

    Without one (``trace()``): the model and named inputs are given (``root``, ``leaves``),
    a module no model holds (a loss module inside ``loss_fn``) is not recorded, the code
    declares its forward pass (``open_forward`` … ``close_forward``: an engine run inside it is
    a nested pass), a backward is labelled by the name the code gave its root
    (``name``), and every known node is hooked (one forward: one graph)."""

    # an optimizer's step() is recorded by process-wide step hooks of the session's own
    # (gradtrace.watch's step capture: its watch, which has its own, says when: step_capture.py)
    optimizer_hooks = True

    def __init__(
        self,
        frame: types.FrameType | None,
        root: nn.Module | None = None,
        leaves: dict[str, torch.Tensor] | None = None,
        *,
        model_hooks: bool = True,
        **options: Any,
    ) -> None:
        """``model_hooks``: the model's own hooks recorded (a spec's model has none: its hooks
        are the spec's, recording themselves)."""
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
        super().__init__(root, leaves or {}, model_hooks=model_hooks, **options)

    def _install(self, model_hooks: bool, modules: list[nn.Module], module_paths: dict[int, str]) -> None:
        capture = self.forward_capture
        capture.outside_pass = self.open_forward
        if self.program:
            capture.unknown_module = self._module_met
            self.recorder.name_of = self._leaf_met
        # the models and hooked leaves the frame holds already, found first: their hooks are
        # wrapped as a traced model's are (those registered later: as they come, see adopt)
        self._scan_models()
        for name, value in _variables(self.frame):
            if isinstance(value, torch.Tensor) and value.is_leaf and _has_tensor_hooks(value):
                self.leaves.setdefault(name, value)
                self.recorder.leaf_names.setdefault(id(value), (value, name))
        super()._install(model_hooks, modules, module_paths)
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
        super().close()
        # (each points back at this session: no cycle left behind, see TraceSession.close)
        capture = self.forward_capture
        capture.unknown_module = capture.outside_pass = self.recorder.name_of = None
        self.frame = None  # (the block's frame: its variables stay the program's)
        for func in (_GRAD_SET, *_ZEROING):
            capture.intercepts.pop(func, None)

    # ---- the block ----------------------------------------------------------------------
    def begin_block(self) -> None:
        """The discovery mode is on for the whole block (the program's passes are found as it
        runs, see the module's docstring)."""
        self._mode = self.forward_capture.new_mode()
        self._mode.__enter__()

    def end_block(self, error: BaseException | None) -> None:
        """See TraceSession.end_block; then the block's variables name what it left."""
        mode, self._mode = self._mode, None
        if mode is not None:
            leave_mode(mode)
        super().end_block(error)
        if self.program:
            self.name_variables()

    # ---- names --------------------------------------------------------------------------
    def _scan_models(self, starting: nn.Module | None = None) -> None:
        """Every model the frame's variables hold that the capture does not know yet, named
        under its variable (the outermost first: a model inside another one found here is
        named under the outer one)."""
        paths = self.forward_capture.module_paths
        found = [(n, v) for n, v in _variables(self.frame) if isinstance(v, nn.Module) and id(v) not in paths]
        if not found:
            return
        inner = {id(sub) for _n, m in found for sub in m.modules() if sub is not m}
        for name, model in sorted(found, key=lambda item: id(item[1]) in inner):
            if id(model) not in paths:
                self.add_model(model, name, starting)

    def add_model(self, root: nn.Module, root_path: str, starting: nn.Module | None = None) -> None:
        """See TraceSession.add_model; the new modules' hooks are wrapped (``starting``: the
        module whose call is beginning, see ModelHooks.adopt)."""
        modules = self.forward_capture.modules
        known = len(modules)
        taken = self.module_types
        if root_path in taken:  # (the variable now holds another model: the first kept its name)
            root_path = next(
                f"{root_path}#{k}" for k in range(2, len(taken) + 3) if f"{root_path}#{k}" not in taken
            )
        super().add_model(root, root_path)
        self._models[root_path] = root
        if self.model_hooks is not None:
            self.model_hooks.adopt(modules[known:], starting)

    def _module_met(self, module: nn.Module) -> str | None:
        """The path of a module called for the first time (its model joins the capture);
        None for a module another thread calls (the module hooks are process-wide)."""
        if threading.get_ident() != self._thread:
            return None
        self._scan_models(starting=module)
        paths = self.forward_capture.module_paths
        if id(module) not in paths:  # no variable holds it: named by its type
            self.add_model(module, f"{type(module).__name__}#{self._anonymous}", starting=module)
            self._anonymous += 1
        return paths[id(module)]

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
        return self.variable_of(tensor)

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
        return next((name for name, value in _variables(self.frame) if value is obj), None)

    def name_variables(self) -> None:
        """The block is over: the tensors its variables hold now are the trace's named leaves,
        retained tensors and values (see the module's docstring)."""
        self._scan_models()
        rec = self.recorder
        for name in [n for n, t in self.leaves.items() if rec.leaf_id(t) is None]:
            del self.leaves[name]  # (a hooked leaf of the frame the block never used)
        self._drop_unused_models()
        params = {id(p) for p in self.params.values()}
        for name, value in _variables(self.frame):
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
        name = self.variable_of(optimizer)
        label = f"{name or type(optimizer).__name__}.step"
        count = self._steps[label] = self._steps.get(label, 0) + 1
        rec.begin_pass("step", f"{label} #{count}", None)

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
            name=self.variable_of(optimizer),
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
        variable of the block holds its root: in a program, the local variable of the function
        that made the call, if one holds it (``loss`` in a ``train()`` the block called)."""
        caller = _callers_variable(root) if self.program and root is not None else None
        return caller or "tensor"

    def backward_ended(self, kind: str) -> None:
        """A top-level engine run has ended (inside the call the mode intercepted)."""

    def pass_roots(self) -> list[Any] | None:
        """Only the graph the backward can run is hooked: a loop's earlier graphs are known too
        (no frame: one forward, one graph, every known node)."""
        return self._roots if self.program else None


def start_recording(
    frame: types.FrameType,
    *,
    max_nodes: int = LIBRARY_MAX_NODES,
    value_budget: int = DEFAULT_VALUE_BUDGET,
    final_value_limit: int = DEFAULT_FINAL_VALUE_LIMIT,
    title: str | None = None,
) -> Capture:
    """A ``record()`` block's capture, started (``frame``: the frame running the ``with``);
    ``finish(exc)`` it as the block ends."""
    capture = Capture("gradtrace.record()", "program", title or "program")
    capture.start(
        functools.partial(
            ProgramSession,
            frame,
            max_nodes=max_nodes,
            value_budget=value_budget,
            final_value_limit=final_value_limit,
        )
    )
    return capture
