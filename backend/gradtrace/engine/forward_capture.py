"""Recording a forward pass: module hooks on every module, node discovery as ops run.

The module hooks are one process-wide pair that records the model's modules (see
:meth:`ForwardCapture.hooks_installed`); a module that has forward hooks of its own when the
trace starts gets its own pair, after them.

Node discovery uses a ``TorchFunctionMode``: after each torch call it walks the outputs'
``grad_fn`` for nodes not seen yet (stopping at seen ones), so ``node_created`` events are
emitted in real time, interleaved with the module events. Inside the mode's handler PyTorch
has popped the mode, so a Python-level function (``F.multi_head_attention_forward``) is seen
once and the walk picks up all nodes it created, sorted by creation order.

Recording hooks return None: a returned value would replace the module's input/output.
"""

from __future__ import annotations

import operator
import sys
import threading
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.overrides import TorchFunctionMode
from torch.utils.hooks import RemovableHandle

from gradtrace.engine.graph_walk import sequence_base, walk_new
from gradtrace.engine.recorder import Recorder
from gradtrace.engine.saved_attributes import saved_tensor_hooks_active
from gradtrace.trace_schema import ModuleForwardPayload, ModuleForwardPrePayload, TensorValue

_NO_TORCH_FUNCTION = torch._C.DisableTorchFunction
# True while Dynamo traces a frame (torch.compile), a constant to it: every hook gradtrace
# installs returns at once when it is, so Dynamo compiles exactly the graph of the plain run
# (no graph break, no gradtrace code in it) and the compiled code never calls gradtrace,
# whose view of a compiled region is the autograd node it made (CompiledFunctionBackward).
# (torch._dynamo.disable instead would break the graph at each hook: more compiled regions.)
compiling = torch.compiler.is_compiling


def compiled_and_inside(modules: list[nn.Module]) -> tuple[list[nn.Module], set[int]]:
    """The torch.compile'd modules among ``modules``, and the id()s of the modules inside
    them. Dynamo compiles a compiled module's inner call, the hooks of the modules inside
    included, guarded on exactly what it saw: gradtrace neither hooks those modules nor wraps
    their hooks (a hook added or replaced is a guard that fails: a new graph at every trace,
    then, past Dynamo's recompile limit, eager code; and compiled code never calls
    gradtrace's hooks anyway)."""
    # (only torch.compile imports Dynamo, which takes seconds: no need to here)
    dynamo = sys.modules.get("torch._dynamo.eval_frame")
    if dynamo is None:
        return [], set()
    compiled = [m for m in modules if isinstance(m, dynamo.OptimizedModule)]
    return compiled, {id(inner) for m in compiled for inner in m._orig_mod.modules()}


def _pop_discovery_mode() -> Any:
    """The discovery mode taken off the top of the torch function mode stack (None, and the
    stack left as it is, when the top is another mode: one the model entered)."""
    depth = torch._C._len_torch_function_stack()
    if not depth or not isinstance(torch._C._get_function_stack_at(depth - 1), _DiscoveryMode):
        return None
    return torch._C._pop_torch_function_stack()


_left = threading.local()  # .modes: discovery modes left inside their own handler (see leave_mode)


def leave_mode(mode: TorchFunctionMode) -> None:
    """The discovery mode ``mode`` entered by a capture is off: taken off the mode stack. A
    capture that ends inside a torch call its mode intercepted (``gradtrace.watch``'s step
    capture ends as the backward it intercepted returns) cannot take it off there: PyTorch
    has popped the mode for its handler and pushes it back when the handler returns. It lets
    every call through from then on, and the next ``drop_left_modes()`` in this thread
    takes it off."""
    assert isinstance(mode, _DiscoveryMode)
    mode.capture = None
    depth = torch._C._len_torch_function_stack()
    if depth and torch._C._get_function_stack_at(depth - 1) is mode:
        torch._C._pop_torch_function_stack()
        return
    if not hasattr(_left, "modes"):
        _left.modes = []
    _left.modes.append(mode)


def drop_left_modes() -> bool:
    """Take the modes ``leave_mode`` left on this thread's stack off it (those on top: a mode
    the program entered above one stays until it leaves). True when none is left."""
    modes = getattr(_left, "modes", None)
    while modes:
        depth = torch._C._len_torch_function_stack()
        top = torch._C._get_function_stack_at(depth - 1) if depth else None
        if top is modes[-1]:
            torch._C._pop_torch_function_stack()
            modes.pop()
        elif top is not None and any(top is m for m in modes):
            modes.remove(top)
            torch._C._pop_torch_function_stack()
        else:
            return False
    return True


def _dynamo_frames() -> tuple[int, int]:
    """Dynamo's count of the frames it was asked to compile, and of those it compiled."""
    from torch._dynamo.utils import counters  # (Dynamo is loaded: a module is compiled)

    return counters["frames"]["total"], counters["frames"]["ok"]


def flat_tensors(obj: Any) -> list[torch.Tensor]:
    """Tensors inside a (nested) tuple/list/dict, in order."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    # (a tuple of types, not `tuple | list`: that builds a union object at every call)
    if isinstance(obj, (tuple, list)):
        out: list[torch.Tensor] = []
        for item in obj:
            if isinstance(item, torch.Tensor):  # (the usual: a module's args, an op's outputs)
                out.append(item)
            else:
                out += flat_tensors(item)
        return out
    if isinstance(obj, dict):
        return [t for item in obj.values() for t in flat_tensors(item)]
    return []


def _same_tensors(seen: list[torch.Tensor], now: tuple | list) -> bool:
    """Whether ``now`` holds exactly the tensor objects ``seen``, in order."""
    return len(seen) == len(now) and all(map(operator.is_, seen, now))


def _no_grad_args(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensor arguments of a torch call that need no grad: plain arguments first, then
    those in list/tuple arguments, then keyword ones. (Mostly none: one pass, no list of
    every tensor argument.)"""
    out: list[torch.Tensor] = []
    nested = False
    for a in args:
        if isinstance(a, torch.Tensor):
            if not a.requires_grad:
                out.append(a)
        elif isinstance(a, (tuple, list)):
            nested = True
    if nested:  # (loops, not generators: these are mostly sizes, e.g. layer_norm's shape)
        for a in args:
            if isinstance(a, (tuple, list)):
                for t in a:
                    if isinstance(t, torch.Tensor) and not t.requires_grad:
                        out.append(t)
    if kwargs:
        for v in kwargs.values():
            if isinstance(v, torch.Tensor) and not v.requires_grad:
                out.append(v)
    return out


class _Quiet:
    """See :meth:`ForwardCapture.quiet`: the outermost entry pauses, the last exit resumes.
    (It holds no reference to the capture: the capture and its recorder are freed by
    reference counting when the trace is done.)"""

    __slots__ = ("depth", "_disabled")

    def __init__(self) -> None:
        self.depth = 0
        self._disabled: Any = None

    def __enter__(self) -> None:
        if self.depth == 0:
            self._disabled = _NO_TORCH_FUNCTION()
            self._disabled.__enter__()
        self.depth += 1

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        if self.depth == 0:
            disabled, self._disabled = self._disabled, None
            disabled.__exit__(None, None, None)


class _DiscoveryMode(TorchFunctionMode):
    def __init__(self, capture: ForwardCapture) -> None:
        super().__init__()
        self.capture: ForwardCapture | None = capture  # (None: left, see leave_mode)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        capture = self.capture
        # (quiet() is entered and left around whole calls: still so after)
        if capture is None or capture.paused or compiling():
            return func(*args, **kwargs)
        intercept = capture.intercepts.get(func)
        if intercept is not None:
            if capture.recorder.fail_safe:
                return capture.intercepted(intercept, func, args, kwargs)
            return intercept(func, args, kwargs)
        first = sequence_base()  # (the number the nodes this call makes start from)
        out = func(*args, **kwargs)
        try:
            capture.after_op(args, kwargs, out, first)
        except Exception as exc:
            if not capture.recorder.trip(exc):
                raise
        return out


class ForwardCapture:
    """Module hooks + discovery mode for one model: :meth:`new_mode`, on for a capture's block."""

    def __init__(
        self,
        recorder: Recorder,
        modules: list[nn.Module],
        module_paths: dict[int, str],
        param_names: dict[int, str],
        kept_calls_of: tuple[type[nn.Module], ...] = (),
    ) -> None:
        """``modules``: the model's modules (``module_paths``: id(module) -> its path).
        ``kept_calls_of``: the module types whose calls are kept for the analyses (see
        :attr:`kept_calls`)."""
        self.recorder = recorder
        self.modules = modules
        self.module_paths = module_paths
        self.param_names = param_names
        self.kept_calls_of = kept_calls_of
        self._quiet = _Quiet()
        # id()s of the modules recorded by a hook pair of their own, not the process-wide one
        self._own_pair: set[int] = set()
        # id()s of the torch.compile'd modules (see hooks_installed), and the discovery modes
        # set aside while they run
        self._compiled: set[int] = set()
        self._set_aside: list[Any] = []
        # Dynamo's frames (compiled, or tried and run eagerly) during the trace: (total, ok),
        # None when no module is compiled (see hooks_installed)
        self.dynamo_frames: tuple[int, int] | None = None
        # called at every module boundary after gradtrace's own recording (model_hooks
        # follows the hooks the model registers there): one hook pair per module, not two
        self.on_module_start: Callable[[nn.Module], None] | None = None
        self.on_module_end: Callable[[nn.Module], None] | None = None
        # torch functions handled elsewhere while the mode is on (func -> handler(func, args,
        # kwargs)): hook registrations (model_hooks), engine runs (nested_runs)
        self.intercepts: dict[Any, Any] = {}
        # a program (``record()``): called with a module the hooks have no path for, returns
        # its path (the model it belongs to joins the capture) or None (not recorded); and
        # called before anything is recorded while no pass is open (it opens one)
        self.unknown_module: Callable[[nn.Module], str | None] | None = None
        self.outside_pass: Callable[[], None] | None = None
        self._inputs: list[tuple[list, list]] = []  # per running module: inputs, summaries
        self._real_calls: list[list[tuple[bool, Any]]] = []  # (see intercepted)
        # every call of a module of kept_calls_of that returned one tensor: its path, the name
        # of its `weight` parameter (None: none), its first input ``a`` (detached: the tensor
        # itself), its output's node and output_nr (where the backward's δ for it arrives)
        self.kept_calls: list[dict[str, Any]] = []

    @property
    def paused(self) -> bool:
        """Inside :meth:`quiet`, or a capture that records nothing more (``Recorder.stopped``):
        the mode lets torch calls through unrecorded."""
        return self._quiet.depth > 0 or self.recorder.stopped

    # ---- a fail-safe capture's intercepted calls -------------------------------------------
    def intercepted(self, intercept: Callable, func: Callable, args: tuple, kwargs: dict) -> Any:
        """``intercept(func, args, kwargs)`` in a fail-safe capture (see Recorder.trip): the
        call it stands for (``real``) made once, whatever gradtrace's part around it raises.
        The call's own exception is raised as it is; gradtrace's trips the capture, and the
        call is made plainly if the intercept raised before making it."""
        made: list[tuple[bool, Any]] = []
        self._real_calls.append(made)
        try:
            return intercept(func, args, kwargs)
        except Exception as exc:
            if made and not made[0][0]:  # the call itself raised: as it would without gradtrace
                if made[0][1] is exc:
                    raise
                self.recorder.trip(exc)
                raise made[0][1] from None
            self.recorder.trip(exc)
            if not made:
                return func(*args, **kwargs)
            return made[0][1]
        finally:
            self._real_calls.pop()

    def real(self, func: Callable, *args: Any, **kwargs: Any) -> Any:
        """The call an intercept stands for (the torch function the mode saw, or the one it
        makes in its place), made by the intercept: its outcome noted for ``intercepted``."""
        calls = self._real_calls
        if not calls:
            return func(*args, **kwargs)
        made = calls[-1]
        try:
            result = func(*args, **kwargs)
        except BaseException as exc:
            made.append((False, exc))
            raise
        made.append((True, result))
        return result

    def quiet(self) -> _Quiet:
        """Our own torch calls (summaries, walks) bypass the mode: paused, and torch function
        dispatch off (a paused mode is still called, in Python, for every torch call).
        Reentrant; one
        reused object, not a generator context (entered once per op and per hook)."""
        return self._quiet

    # ---- discovery ----------------------------------------------------------------------
    def after_op(self, args: tuple, kwargs: dict, out: Any, first: int) -> None:
        """A torch call returned ``out``; the nodes it made are numbered from ``first`` on."""
        # (inside the mode's own handler the mode is off already: only torch function
        # dispatch, to subclasses and modes below ours, is turned off, not the whole quiet();
        # before the first read of ``out``: a __torch_function__ subclass would see each
        # ``grad_fn`` read as a call, one a plain run does not make)
        with _NO_TORCH_FUNCTION():
            try:
                if isinstance(out, torch.Tensor):  # (most ops)
                    consumer = out.grad_fn
                    outs = [out]
                else:
                    outs = flat_tensors(out)
                    consumer = next((fn for t in outs if (fn := t.grad_fn) is not None), None)
            except RuntimeError:
                # (a view made under no_grad, changed in place under no_grad since, as
                # nn.Embedding(padding_idx=0) zeroes its padding row in __init__: PyTorch
                # refuses to read its grad_fn, and the program never reads it, as using it
                # with grad mode on raises; an op under no_grad made no graph)
                if torch.is_grad_enabled():
                    raise
                return
            if consumer is None:
                return
            if self.outside_pass is not None and not self.recorder.in_pass:
                self.outside_pass()
            self.discover_from(outs, first)
            for t in _no_grad_args(args, kwargs):
                if t.grad_fn is None:
                    self.recorder.no_grad_input(t, consumer)

    def discover_roots(self, tensors: list[torch.Tensor]) -> None:
        """Discover the nodes a backward from ``tensors`` will run, a leaf's own
        AccumulateGrad included (a backward that starts at a leaf runs only that)."""
        leaves = [
            torch.autograd.graph.get_gradient_edge(t).node
            for t in tensors
            if t.grad_fn is None and t.requires_grad
        ]
        new = walk_new(leaves, self.recorder.node_ids)
        if new:
            self.recorder.discover(new, {})
        self.discover_from(tensors)

    def discover_from(self, tensors: list[torch.Tensor], made_from: int | None = None) -> None:
        """Discover every unseen node behind ``tensors`` (used after backward passes too).

        ``made_from``: right after a torch call, the number its nodes start from (see
        Recorder.discover's ``fresh_from``); None when user code may have run since the
        nodes were made.
        """
        rec = self.recorder
        seen = rec.node_ids
        if len(tensors) == 1:  # (the usual: one tensor, made by a known node or by none)
            fn = tensors[0].grad_fn
            if fn is None or fn in seen:
                return
        # each unseen node with the (first) tensor it produced: its value
        produced: dict[Any, torch.Tensor] = {}
        for t in tensors:
            fn = t.grad_fn
            if fn is not None and fn not in seen and fn not in produced:
                produced[fn] = t
        if produced:  # (usually nothing new: a module's inputs, a name for a known tensor)
            if made_from is not None and saved_tensor_hooks_active():
                made_from = None  # (their saved tensors were packed by the hooks)
            rec.discover(walk_new(produced, seen), produced, made_from)

    # ---- module hooks -------------------------------------------------------------------
    def _global_pre_hook(self, module: nn.Module, args: tuple) -> None:
        if id(module) not in self._own_pair:
            self._pre_hook(module, args)

    def _global_post_hook(self, module: nn.Module, args: tuple, output: Any) -> None:
        if id(module) not in self._own_pair:
            self._post_hook(module, args, output)

    def _pre_hook(self, module: nn.Module, args: tuple) -> None:
        rec = self.recorder
        if rec.stopped:
            return
        try:
            self._module_began(module, args)
        except Exception as exc:
            if not rec.trip(exc):
                raise

    def _module_began(self, module: nn.Module, args: tuple) -> None:
        path = self.module_paths.get(id(module))
        if path is None and self.unknown_module is not None:
            path = self.unknown_module(module)  # (a program's: a model met now)
        if path is None or compiling():  # not this model's (the process-wide hook sees every module)
            return
        rec = self.recorder
        if not rec.in_pass and self.outside_pass is not None:
            self.outside_pass()
        # (torch function dispatch off, as in quiet(): nothing in here can reach the mode, nor
        # enter quiet(); the C context manager costs less than quiet's Python one)
        with _NO_TORCH_FUNCTION():
            # nodes behind the inputs belong to the caller: discover them before entering
            # (e.g. the BackwardHookFunctionBackward a parent's full backward hook put there)
            tensors = flat_tensors(args)
            self.discover_from(tensors)
            rec.enter_module(path)
            inputs: list[TensorValue | None] = list(map(rec.summarize, tensors))
            self._inputs.append((tensors, inputs))  # module_forward repeats them
            rec.emit(
                "module_forward_pre", target=path, module=path, payload=ModuleForwardPrePayload(inputs=inputs)
            )
        if self.on_module_start is not None:
            self.on_module_start(module)
        if id(module) in self._compiled:
            self._set_aside.append(_pop_discovery_mode())

    def call_began(self, module: nn.Module, args: tuple) -> None:
        """A capture started inside ``module``'s call (its forward-pre hooks running:
        ``gradtrace.watch``'s step capture): recorded as the module's hooks would have
        recorded its start (its forward hook records its end)."""
        self._module_began(module, args)

    def _compiled_returned(self, module: nn.Module) -> None:
        """A compiled module's call is over: the discovery mode it ran without is back."""
        if id(module) in self._compiled and self._set_aside:
            mode = self._set_aside.pop()
            if mode is not None:
                torch._C._push_on_torch_function_stack(mode)

    def _post_hook(self, module: nn.Module, args: tuple, output: Any) -> None:
        rec = self.recorder
        if rec.stopped:
            return
        try:
            self._module_ended(module, args, output)
        except Exception as exc:
            if not rec.trip(exc):
                raise

    def _module_ended(self, module: nn.Module, args: tuple, output: Any) -> None:
        path = self.module_paths.get(id(module))
        if path is None or compiling():
            return
        self._compiled_returned(module)
        try:
            with _NO_TORCH_FUNCTION():  # (see _pre_hook)
                self._record_output(path, module, args, output)
        finally:
            self.recorder.exit_module(path)
        if self.on_module_end is not None:
            self.on_module_end(module)

    def _record_output(self, path: str, module: nn.Module, args: tuple, output: Any) -> None:
        rec = self.recorder
        outputs = flat_tensors(output)
        self.discover_from(outputs)
        fn = outputs[0].grad_fn if outputs else None
        summarize = rec.summarize
        seen_tensors, seen = self._inputs.pop() if self._inputs else ([], None)
        # a forward-pre hook may have replaced the inputs: then summarize what forward got
        # (the usual: ``args`` are the very tensors the pre hook saw, none nested: compared
        # as they are, not flattened again)
        if seen is not None and (
            _same_tensors(seen_tensors, args) or _same_tensors(seen_tensors, flat_tensors(args))
        ):
            inputs = list(seen)
        else:
            inputs = list(map(summarize, flat_tensors(args)))
        rec.emit(
            "module_forward",
            target=path,
            module=path,
            node=rec.node_ids.get(fn) if fn is not None else None,
            payload=ModuleForwardPayload(inputs=inputs, outputs=list(map(summarize, outputs))),
        )
        if self.kept_calls_of and isinstance(module, self.kept_calls_of) and isinstance(output, torch.Tensor):
            self._keep_call(path, module, args, output)

    def _keep_call(self, path: str, module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        fn = output.grad_fn
        node_id = self.recorder.node_ids.get(fn) if fn is not None else None
        if node_id is None or not args or not isinstance(args[0], torch.Tensor):
            return
        self.kept_calls.append(
            {
                "module": path,
                # (from _parameters: module.weight goes through nn.Module.__getattr__'s slow
                # fallback; a parametrized weight is in neither, as it is not a parameter)
                "weight": self.param_names.get(id(module._parameters.get("weight"))),
                "a": args[0].detach(),
                "node": node_id,
                "output_nr": output.output_nr,
            }
        )

    def kept_output_nodes(self) -> set[str]:
        """The nodes whose incoming gradient is a kept call's δ (the analyses ask for it)."""
        return {c["node"] for c in self.kept_calls}

    @contextmanager
    def hooks_installed(self):
        """Recording hooks on every module of the model, removed on exit whatever happens.

        One process-wide pair (``register_module_forward_pre_hook`` / ``_forward_hook``)
        serves the model's modules and skips all others: two registrations, not two per
        module (each costs about what a module call does, and so does its removal).
        Process-wide hooks run before a module's own, so a module that already has forward
        hooks gets a pair of its own, after them, as every module had: gradtrace records
        what the model's hooks left (replaced inputs, outputs), and its events come after
        theirs.
        """
        handles: list[RemovableHandle] = []
        # a torch.compile'd submodule warns at every call while process-wide module hooks
        # exist (the plain run would not): then every module gets a pair of its own
        compiled, inside = compiled_and_inside(self.modules)
        own_pairs = bool(compiled)
        # the compiled module itself runs with the discovery mode set aside (the mode stack
        # is guarded too); the nodes it made are found from its outputs
        self._compiled = {id(m) for m in compiled}
        frames_before = _dynamo_frames() if compiled else None
        try:
            for module in self.modules:
                if id(module) in inside:
                    continue
                if own_pairs or module._forward_pre_hooks or module._forward_hooks:
                    self._own_pair.add(id(module))
                    handles.append(module.register_forward_pre_hook(self._pre_hook))
                    handles.append(module.register_forward_hook(self._post_hook, always_call=True))
            if (self.modules or self.unknown_module is not None) and not own_pairs:
                handles.append(register_module_forward_pre_hook(self._global_pre_hook))
                handles.append(register_module_forward_hook(self._global_post_hook, always_call=True))
            yield
        finally:
            for handle in handles:
                handle.remove()
            self._own_pair.clear()
            if frames_before is not None:
                total, ok = _dynamo_frames()
                self.dynamo_frames = (total - frames_before[0], ok - frames_before[1])

    def new_mode(self) -> TorchFunctionMode:
        """A discovery mode to enter (a capture's whole block; a Python Function's backward
        while it runs). Module hooks must already be on."""
        return _DiscoveryMode(self)
