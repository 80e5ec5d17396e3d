"""The model's own hooks, recorded where they fire (``gradtrace.trace`` on a user's model).

For the duration of a trace every hook already registered on the model is *wrapped*, not
replaced: on its modules (forward-pre and forward, with kwargs or ``always_call``, full
backward-pre, full backward, the deprecated non-full backward hook) and on its parameters and
inputs (``Tensor.register_hook``, ``register_post_accumulate_grad_hook``). Wrapping writes a
new value under the hook's existing key of PyTorch's own hook dict, so the dict keeps its keys
in their order (``prepend`` included) and every flag keyed by the hook id (``with_kwargs``,
``always_call``) still applies. Torch's own hook objects there (``torch.nn.utils.prune``'s
methods, which ``prune.remove`` and a second pruning look up in that dict by their class) are
not the model's hooks: left as they are, unrecorded. :meth:`ModelHooks.wrapped` writes each original hook object
back under its key: the model leaves the trace with exactly the hook objects, dicts and order
it came with.

Hooks registered while the trace runs are wrapped as well:

* on tensors (the usual ``h.register_hook(...)`` inside ``forward``): both registration
  methods are torch functions, so the forward's discovery mode hands each call to
  :meth:`ModelHooks.register_tensor_hook`, which registers the wrapper in the hook's place;
* on autograd nodes (``grad_fn.register_prehook``/``register_hook``, in ``forward`` or before
  the trace): PyTorch keeps a node's hooks in a dict only its C++ node holds; when the backward
  capture puts its own hooks into those dicts (``node_hook_sets.hooks_on``) it shows them to
  :meth:`ModelHooks.node_hooks_seen`, which wraps the model's there (torch's own, which carry
  module backward hooks, are left alone: the module's hook is recorded as such);
* on modules: at every module boundary gradtrace looks at that module and the modules
  running around it, and at every module before a backward. PyTorch collects a module's
  forward-pre and backward hooks when its call begins (its forward hooks when its forward
  returns), so a hook registered on a module just before that moment fires unrecorded in
  that one call (recorded from then on): a ``hook_unrecorded`` diagnostic names it.

Each firing is one event of the hook's kind (``module_forward_pre``, ``module_forward``,
``module_backward_pre``, ``module_backward``, ``tensor_hook``, ``post_accumulate_grad``,
``node_pre_hook``, ``node_post_hook``), with
the payload of a spec hook's event plus ``hook_name``, ``returned`` and ``changed`` (see
``trace_schema.Event``); ``hook`` is the hook's index in the trace's ``graph.modules[].hooks``
listing (module hooks) or in order of first sight (tensor hooks).
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any, NamedTuple

import torch
from msgspec import UNSET, UnsetType
from torch import nn
from torch.utils.hooks import RemovableHandle

from gradtrace.engine.caller_warnings import GLOBAL_HOOK_DICTS
from gradtrace.engine.forward_capture import ForwardCapture, compiling, flat_tensors
from gradtrace.engine.node_hook_sets import is_set_key
from gradtrace.engine.own_hooks import is_own
from gradtrace.engine.recorder import Recorder
from gradtrace.engine.summarize import version_of
from gradtrace.trace_schema import (
    Diagnostic,
    EventKind,
    GradPayload,
    ModuleBackwardPayload,
    ModuleBackwardPrePayload,
    ModuleForwardPayload,
    ModuleForwardPrePayload,
    ModuleHook,
    NodePostPayload,
    NodePrePayload,
    TensorValue,
)

# module hook dict -> the hook kind of its entries (the backward dict: see _module_kind)
_MODULE_DICTS = {
    "_forward_pre_hooks": "forward_pre",
    "_forward_hooks": "forward",
    "_backward_pre_hooks": "full_backward_pre",
    "_backward_hooks": "full_backward",
}
# the payload records of the events a model's hook fires as (each with HookFiring's keys)
_HookPayload = (
    ModuleForwardPrePayload
    | ModuleForwardPayload
    | ModuleBackwardPrePayload
    | ModuleBackwardPayload
    | NodePrePayload
    | NodePostPayload
    | GradPayload
)
_TENSOR_DICTS = {"tensor": "_backward_hooks", "post_accumulate_grad": "_post_accumulate_grad_hooks"}
# the hooks PyTorch collects as a module's call begins (its forward hooks: as forward returns)
_COLLECTED_AT_START = ("forward_pre", "full_backward_pre", "full_backward", "backward")
_EVENT_KIND: dict[str, EventKind] = {
    "node_pre": "node_pre_hook",
    "node_post": "node_post_hook",
    "forward_pre": "module_forward_pre",
    "forward": "module_forward",
    "full_backward_pre": "module_backward_pre",
    "full_backward": "module_backward",
    "backward": "module_backward",
    "tensor": "tensor_hook",
    "post_accumulate_grad": "post_accumulate_grad",
}


class _Slot(NamedTuple):
    """One wrapped hook: where it lives and what to write back there."""

    hooks: dict[int, Callable]
    key: int
    original: Callable
    wrapper: Callable


def _module_kind(module: nn.Module, dict_name: str) -> str:
    kind = _MODULE_DICTS[dict_name]
    if kind == "full_backward" and module._is_full_backward_hook is False:
        return "backward"  # the deprecated register_backward_hook
    return kind


def _is_gradtraces(hook: Callable) -> bool:
    """A process-wide hook of a trace running now (ForwardCapture records every module
    through one pair of them; another thread may be tracing), or of ``gradtrace.watch``."""
    return isinstance(getattr(hook, "__self__", None), ForwardCapture) or is_own(hook)


def _aliases(tensors: Any) -> list[Any]:
    """What to summarize of gradients a hook was given or returned: detached aliases (same
    memory and version: the same record), so that the summarizer holds none of the engine's
    tensors (an AccumulateGrad takes a gradient nobody else holds as ``.grad`` itself, and
    copies one that is held; see backward_capture._leaf_bound)."""
    return [t.detach() if isinstance(t, torch.Tensor) else t for t in tensors]


def _is_torchs(hook: Callable) -> bool:
    """A node hook PyTorch itself put there: a module's full backward hooks work through hooks
    on their BackwardHookFunctionBackward nodes, a non-full backward hook through one on the
    output's node (``torch.utils.hooks``, ``torch.nn.modules.module``: a function of
    torch's, or an object of a class of torch's, such as the ``_WrappedHook`` that takes its
    ``__module__`` from the hook it wraps). Those module hooks are recorded as the module's;
    the node hooks that carry them are not the model's."""
    return type(hook).__module__.startswith("torch.") or (getattr(hook, "__module__", None) or "").startswith(
        "torch."
    )


def _hook_name(hook: Callable) -> str:
    return getattr(hook, "__qualname__", None) or type(hook).__name__


def _versions(tensors: list[torch.Tensor]) -> list[int]:
    return list(map(version_of, tensors))


# the hooks where a write through ``.data`` (no version bump) is looked for too: those given
# a gradient to write in place, the grad itself (``.grad`` for a post-accumulate hook), and
# a module's forward hooks (its inputs and outputs, its parameters and buffers: weight
# clipping in a forward pre-hook is written so)
_BITS_CHECKED = ("tensor", "post_accumulate_grad", "forward_pre", "forward")


def _bits(t: torch.Tensor) -> torch.Tensor:
    """A tensor's numbers as one row of bytes (a view where it can be): two such rows are
    equal exactly when the numbers are the same bits (NaN included, -0.0 apart from 0.0)."""
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    return t.resolve_conj().resolve_neg().contiguous().view(-1).view(torch.uint8)


def _differs(given: list[torch.Tensor], copies: list[torch.Tensor]) -> list[torch.Tensor | bool]:
    """Whether each of ``given`` no longer holds its copy's bits (made before the hook, its
    version unmoved since: written through ``.data``): a 0-dim bool tensor on its device, not
    read (see _read), or True at once when the sizes differ (``.data`` given another size)."""
    out: list[torch.Tensor | bool] = []
    for t, copy in zip(given, copies, strict=True):
        now = _bits(t)
        out.append(True if now.numel() != copy.numel() else torch.ne(now, copy).any())
    return out


def _read(differs: list[torch.Tensor | bool]) -> list[bool]:
    """The answers of _differs, on the host (on a device, a sync: read after the pass)."""
    return [bool(d) for d in differs]


def _compared_now(given: list[torch.Tensor]) -> bool:
    """Whether the answers for ``given`` are read while the pass runs: in host memory that is
    no transfer and no sync. A device's are read after the pass (see ModelHooks.settle)."""
    return all(t.is_cpu for t in given)


def _replaceable(kind: str, args: tuple) -> Any:
    """What a value returned by a hook of this kind stands in for."""
    if kind == "forward_pre":
        return args[1:]  # args, or (args, kwargs) with_kwargs
    if kind == "forward":
        return args[-1]
    if kind in ("tensor", "post_accumulate_grad", "node_pre", "node_post"):
        return args[0]  # the gradient, or grad_outputs (node pre-hook), grad_inputs (node hook)
    return args[1]  # grad_output (backward-pre) or grad_input (backward)


def _replaces(result: Any, given: Any) -> bool:
    """Whether a hook's return value really replaces something (not the same tensors)."""
    if result is None:
        return False
    new, old = flat_tensors(result), flat_tensors(given)
    return len(new) != len(old) or any(a is not b for a, b in zip(new, old, strict=True))


class ModelHooks:
    """Wraps the hooks of one model for one trace; :meth:`wrapped` undoes it exactly on exit."""

    def __init__(
        self,
        recorder: Recorder,
        capture: ForwardCapture,
        modules: list[nn.Module],
        module_paths: dict[int, str],
        tensors: dict[str, torch.Tensor],
        listing: dict[str, list[ModuleHook]],
        diagnostics: list[Diagnostic],
    ) -> None:
        self.recorder = recorder
        self.capture = capture
        self.module_paths = module_paths
        self.tensors = tensors  # parameters and inputs, by name
        self.listing = listing  # module path -> hooks shown in graph.modules[].hooks
        self.diagnostics = diagnostics  # the trace's: a hook that may have fired unrecorded
        self._slots: list[_Slot] = []
        # id(hook dict) -> the keys already handled there (a dict whose keys are all in it
        # has nothing new: one C-level set comparison per dict at each module boundary)
        self._seen: dict[int, set[int]] = {}
        self._running: list[nn.Module] = []  # modules whose forward is running, innermost last
        # the model's modules (those in module_paths: the only ones _scan looks at)
        self._modules = modules
        # Every hook PyTorch registers takes a new RemovableHandle id: while next_id has not
        # moved, a module looked at since its last move has nothing new. _epoch counts the
        # moves seen; _looked: id(module) -> the epoch it was last looked at in
        self._next_handle = -1
        self._epoch = 0
        self._looked: dict[int, int] = {}
        self._count = 0
        # False once restored: a wrapper PyTorch copied into a graph that outlives the trace
        # (a non-full backward hook on an output's grad_fn) then just calls the user's hook
        self._active = True
        # hooks given a device's tensors: their payload, and whether each tensor's bits moved
        # (device bools, read by settle() after the pass)
        self._compared_later: list[tuple[_HookPayload, list[torch.Tensor | bool]]] = []

    # ---- installing and restoring ---------------------------------------------------------
    @contextmanager
    def wrapped(self):
        """The model's hooks wrapped inside this block, restored on exit whatever happens.
        Enter it before gradtrace registers its own hooks (those are not the model's)."""
        try:
            self._install()
            yield
        finally:
            self._restore()

    @contextmanager
    def following(self):
        """Hooks the model registers inside this block are wrapped as they come (enter it
        once gradtrace's own hooks are in place: every hook there now is accounted for).
        Module boundaries come from the forward capture's own module hooks (called after its
        recording, as a second hook pair registered after them would be)."""
        capture = self.capture
        capture.on_module_start, capture.on_module_end = self._module_starting, self._module_ending
        tensor_registrations = (torch.Tensor.register_hook, torch.Tensor.register_post_accumulate_grad_hook)
        try:
            self._ignore_current()
            # every module is up to date now: gradtrace's own registrations (which moved
            # RemovableHandle.next_id) do not make each module's first call look again
            self._stale(self._modules)
            for func in tensor_registrations:
                capture.intercepts[func] = self.register_tensor_hook
            yield
        finally:
            capture.on_module_start = capture.on_module_end = None
            for func in tensor_registrations:
                capture.intercepts.pop(func, None)

    def _install(self) -> None:
        """Wrap every hook the model has now (call before gradtrace registers its own)."""
        self._note_global_hooks()
        for name, tensor in self.tensors.items():
            for kind, dict_name in _TENSOR_DICTS.items():
                hooks = getattr(tensor, dict_name, None)
                if not hooks:
                    continue
                for key, hook in list(hooks.items()):
                    self._wrap(hooks, key, self._tensor_wrapper(kind, hook, tensor, name))
        self.catch_up()

    def _ignore_current(self) -> None:
        """Every module hook registered so far is accounted for (gradtrace's own among them)."""
        for module in self._modules:
            for dict_name in _MODULE_DICTS:
                hooks = getattr(module, dict_name)
                if hooks:  # (an empty dict has nothing to account for: all it gets is new)
                    self._seen.setdefault(id(hooks), set()).update(hooks)

    def _restore(self) -> None:
        """Each original hook object back under its key (a hook removed meanwhile stays out)."""
        for slot in reversed(self._slots):
            if slot.hooks.get(slot.key) is slot.wrapper:
                slot.hooks[slot.key] = slot.original  # same key: same position in the dict
        self._slots.clear()
        self._active = False

    # ---- module hooks registered while the trace runs -------------------------------------
    # A module's hooks matter when it is called: forward-pre and backward hooks are collected
    # as its call begins, forward hooks as its forward returns. So each module boundary looks
    # at that module and the modules still running around it (whose forward hooks are still
    # to come): a few dicts, not the whole model, however often the boundary is crossed.
    def settle(self) -> None:
        """After a pass: whether the hooks given a device's tensors wrote them behind their
        versions (their events' ``changed``), read now."""
        compared, self._compared_later = self._compared_later, []
        for payload, differs in compared:
            if any(_read(differs)):
                payload.changed = True

    def catch_up(self) -> None:
        """Wrap the hooks registered on any module since the last look (e.g. before a
        backward: hooks the forward registered on modules it had already left)."""
        self._running.clear()
        self._scan(self._stale(self._modules))

    def adopt(self, modules: list[nn.Module], starting: nn.Module | None = None) -> None:
        """Modules that joined the capture while it runs (a program's model met now): their
        hooks wrapped. ``starting``: the module whose call is beginning (PyTorch has
        collected its forward-pre and backward hooks already: they fire unrecorded in that
        call, and a ``hook_unrecorded`` diagnostic says so)."""
        self._scan(
            self._stale(modules), missed_if=None if starting is None else (starting, _COLLECTED_AT_START)
        )

    def _module_starting(self, module: nn.Module) -> None:
        if not self._up_to_date(module):
            self._scan(self._stale([module, *self._running]), missed_if=(module, _COLLECTED_AT_START))
        self._running.append(module)

    def _module_ending(self, module: nn.Module) -> None:
        if self._running and self._running[-1] is module:
            self._running.pop()
        if not self._up_to_date(module):
            self._scan(self._stale([module, *self._running]), missed_if=(module, ("forward",)))

    def _up_to_date(self, module: nn.Module) -> bool:
        """Whether ``_stale([module, *running])`` would find nothing (the usual case, checked
        without building that list): no hook registered anywhere since the last look, and
        ``module`` looked at since. The running modules always are: each boundary looks at
        them all when anything was registered, and each was looked at as it started."""
        return RemovableHandle.next_id == self._next_handle and self._looked.get(id(module)) == self._epoch

    def _stale(self, modules: list[nn.Module]) -> list[nn.Module]:
        """Those of ``modules`` not looked at since a hook was last registered anywhere
        (marked as looked at now): the others have nothing new to wrap."""
        if RemovableHandle.next_id != self._next_handle:
            self._next_handle = RemovableHandle.next_id
            self._epoch += 1
        epoch, looked = self._epoch, self._looked
        stale = []
        for module in modules:
            if looked.get(id(module)) != epoch:
                looked[id(module)] = epoch
                stale.append(module)
        return stale

    def _scan(
        self, modules: list[nn.Module], missed_if: tuple[nn.Module, tuple[str, ...]] | None = None
    ) -> None:
        """Wrap the hooks of ``modules`` not seen yet. ``missed_if``: (module, kinds) that
        PyTorch has already collected for the call now starting or ending."""
        seen = self._seen
        for module in modules:
            path = self.module_paths.get(id(module))
            if path is None:
                continue
            for dict_name in _MODULE_DICTS:
                hooks = getattr(module, dict_name)
                if not hooks:
                    continue
                known = seen.get(id(hooks))
                if known is not None and hooks.keys() <= known:
                    continue
                for key, hook in list(hooks.items()):
                    if known is not None and key in known:
                        continue
                    # (gradtrace.watch's: not the model's; torch's own hook objects, such as
                    # torch.nn.utils.prune's methods, which prune.remove and a second pruning
                    # find by their class in this very dict: left as they are)
                    if is_own(hook) or _is_torchs(hook):
                        known = seen.setdefault(id(hooks), set())
                        known.add(key)
                        continue
                    kind = _module_kind(module, dict_name)
                    self._wrap(hooks, key, self._module_wrapper(kind, hook, module, path, key))
                    if missed_if is not None and module is missed_if[0] and kind in missed_if[1]:
                        self._missed(kind, hook, path)
                    known = seen[id(hooks)]

    def _note_global_hooks(self) -> None:
        """Process-wide module hooks (``nn.modules.module.register_module_*_hook``) are not
        the model's and are not wrapped: say that they fire unrecorded."""
        found = [
            name
            for name in GLOBAL_HOOK_DICTS
            if any(not _is_gradtraces(hook) for hook in getattr(torch.nn.modules.module, name, {}).values())
        ]
        if found:
            self.diagnostics.append(
                Diagnostic(
                    code="global_hooks_unrecorded",
                    severity="info",
                    message=f"process-wide module hooks are registered ({', '.join(found)}): they fire on "
                    "every module of this model but are not the model's own hooks, and the trace has no "
                    "events for them",
                )
            )

    def _missed(self, kind: str, hook: Callable, path: str) -> None:
        """PyTorch collected this hook for the call of ``path`` before it could be wrapped."""
        self.diagnostics.append(
            Diagnostic(
                code="hook_unrecorded",
                severity="warning",
                message=f"the {kind} hook {_hook_name(hook)} was registered on module '{path}' during the trace, "
                "just before or during a call of that module: PyTorch had already collected it for that "
                "call, where it fires without an event (it is recorded from then on)",
                module=path,
            )
        )

    def _wrap(self, hooks: dict[int, Callable], key: int, wrapper: Callable) -> None:
        self._seen.setdefault(id(hooks), set()).add(key)
        self._slots.append(_Slot(hooks, key, hooks[key], wrapper))
        hooks[key] = wrapper

    def _new_index(self) -> int:
        self._count += 1
        return self._count - 1

    # ---- tensor hooks registered while the trace runs -------------------------------------
    def register_tensor_hook(self, func: Callable, args: tuple, kwargs: dict) -> RemovableHandle:
        """``Tensor.register_hook`` / ``register_post_accumulate_grad_hook`` as the discovery
        mode saw it: register the recording wrapper in the hook's place."""
        tensor = args[0]
        hook = args[1] if len(args) > 1 else kwargs["hook"]
        kind = "tensor" if func is torch.Tensor.register_hook else "post_accumulate_grad"
        # (gradtrace's reads of the tensor, grad_fn and its hook dict, are no calls a
        # __torch_function__ subclass sees: only the registration itself is, as in a plain run)
        with torch._C.DisableTorchFunction():
            wrapper = self._tensor_wrapper(kind, hook, tensor, None)
        handle = self.capture.real(func, tensor, wrapper)
        with torch._C.DisableTorchFunction():
            hooks = getattr(tensor, _TENSOR_DICTS[kind])
        self._seen.setdefault(id(hooks), set()).add(handle.id)
        self._slots.append(_Slot(hooks, handle.id, hook, wrapper))
        return handle

    # ---- the model's own autograd-node hooks -----------------------------------------------
    def node_hooks_seen(self, node: Any, pre: bool, hooks: dict[int, Callable]) -> None:
        """A node's pre-hook (``pre``) or post-hook dict, as the backward capture's hooks go in
        (``node_hook_sets.hooks_on``): wrap the hooks the model put there
        (``grad_fn.register_prehook``/``register_hook``, in forward or before the trace) not
        wrapped yet, in place, under their keys; restored with all the others."""
        node_id = self.recorder.node_ids.get(node)
        if node_id is None:
            return
        known = self._seen.setdefault(id(hooks), set())
        kind = "node_pre" if pre else "node_post"
        for key, hook in list(hooks.items()):
            if key in known or is_set_key(key):
                continue
            if _is_torchs(hook) or is_own(hook):
                known.add(key)
                continue
            self._wrap(hooks, key, self._node_wrapper(kind, hook, node_id))

    def _node_wrapper(self, kind: str, hook: Callable, node_id: str) -> Callable:
        # (the node's id, not the node: the wrapper lives in the node's own hook dict)
        index = self._new_index()

        def seen(args: tuple) -> tuple[_HookPayload, list[torch.Tensor]]:
            summaries = self.recorder.summaries
            if kind == "node_pre":
                return NodePrePayload(grad_outputs=summaries(_aliases(args[0]))), flat_tensors(args[0])
            payload = NodePostPayload(
                grad_inputs=summaries(_aliases(args[0])),
                grad_outputs=summaries(_aliases(args[1])),
            )
            return payload, flat_tensors(args[0]) + flat_tensors(args[1])

        label = self.recorder.by_id[node_id].tensor or node_id
        fire = self._firing(kind, hook, index, seen, lambda: (label, None, node_id))
        return functools.wraps(hook)(self._plain(fire))

    # ---- the wrappers ---------------------------------------------------------------------
    def _module_wrapper(self, kind: str, hook: Callable, module: nn.Module, path: str, key: int) -> Callable:
        index = self._new_index()
        self.listing.setdefault(path, []).append(ModuleHook(index=index, type=kind))
        with_kwargs = (kind == "forward_pre" and key in module._forward_pre_hooks_with_kwargs) or (
            kind == "forward" and key in module._forward_hooks_with_kwargs
        )

        def kwargs_of(args: tuple) -> dict[str, TensorValue | None] | UnsetType:
            """A forward hook registered with kwargs is given them (the last argument)."""
            return {k: self.recorder.summarize(v) for k, v in args[2].items()} if with_kwargs else UNSET

        def seen(args: tuple) -> tuple[_HookPayload, list[torch.Tensor]]:
            summaries = self.recorder.summaries
            payload: _HookPayload
            if kind == "forward_pre":
                inputs = args[1]
                payload = ModuleForwardPrePayload(inputs=summaries(inputs), kwargs=kwargs_of(args))
                given = flat_tensors(inputs)
            elif kind == "forward":
                inputs, output = args[1], args[-1]
                payload = ModuleForwardPayload(
                    inputs=summaries(inputs), outputs=summaries(output), kwargs=kwargs_of(args)
                )
                given = flat_tensors(output) + flat_tensors(inputs)
            elif kind == "full_backward_pre":
                payload = ModuleBackwardPrePayload(grad_output=summaries(args[1]))
                given = flat_tensors(args[1])
            else:
                payload = ModuleBackwardPayload(grad_input=summaries(args[1]), grad_output=summaries(args[2]))
                given = flat_tensors(args[1]) + flat_tensors(args[2])
            if with_kwargs:
                given += flat_tensors(args[2])
            if kind in ("forward_pre", "forward"):  # (read through _parameters, _buffers)
                given += [*module.parameters(), *module.buffers()]
            return payload, given

        fire = self._firing(kind, hook, index, seen, lambda: (path, path, None))
        return functools.wraps(hook)(self._plain(fire))

    def _tensor_wrapper(self, kind: str, hook: Callable, tensor: torch.Tensor, name: str | None) -> Callable:
        index = self._new_index()
        ref = weakref.ref(tensor)  # a strong one would make tensor -> hook dict -> it a cycle
        grad_fn = tensor.grad_fn

        def where() -> tuple[str | None, str | None, str | None]:
            rec = self.recorder
            alive = ref()
            node = rec.node_ids.get(grad_fn) if grad_fn is not None else None
            if node is None and alive is not None:
                node = rec.tensor_node(alive)
            label = name or (rec.by_id[node].tensor if node is not None else None)
            return label or node, None, node

        def seen(args: tuple) -> tuple[_HookPayload, list[torch.Tensor]]:
            if kind == "tensor":
                # (summarized through a detached alias, the same record: the summarizer keeps
                # what it is given, and while it holds the engine's gradient, AccumulateGrad
                # cannot take that gradient as the leaf's .grad and copies it instead)
                grad = args[0]
                return GradPayload(grad=self.recorder.summarize(grad.detach())), [grad]
            grad = args[0].grad
            return GradPayload(grad=self.recorder.summarize(grad)), [] if grad is None else [grad]

        fire = self._firing(kind, hook, index, seen, where)
        watched = self._grad_watcher(fire) if kind == "post_accumulate_grad" else self._plain(fire)
        return functools.wraps(hook)(watched)

    @staticmethod
    def _grad_watcher(fire: Callable) -> Callable:
        """A post-accumulate hook changes things by writing ``.grad``: compare it around."""

        def watched(param: torch.Tensor) -> Any:
            before = param.grad
            version = None if before is None else before._version
            result, payload = fire(param)
            after = param.grad
            changed = after is not before or (after is not None and after._version != version)
            if changed and payload is not None:
                payload.changed = True
            return result

        return watched

    @staticmethod
    def _plain(fire: Callable) -> Callable:
        def call(*args: Any, **kwargs: Any) -> Any:
            return fire(*args, **kwargs)[0]

        return call

    def _firing(
        self,
        kind: str,
        hook: Callable,
        index: int,
        seen: Callable[[tuple], tuple[_HookPayload, list[torch.Tensor]]],
        where: Callable[[], tuple[str | None, str | None, str | None]],
    ) -> Callable:
        """The wrapper's body: the event (at the moment the hook fires), the user's hook,
        then what it returned and whether it changed anything (a replacement returned, or a
        tensor it was given written in place)."""
        rec = self.recorder
        capture = self.capture
        backward = kind in (
            "full_backward_pre",
            "full_backward",
            "backward",
            "tensor",
            "post_accumulate_grad",
            "node_pre",
            "node_post",
        )
        bits_checked = kind in _BITS_CHECKED

        def fire(*args: Any, **kwargs: Any) -> tuple[Any, _HookPayload | None]:
            """(what the hook returned, its event's payload)."""
            # kept by a graph that outlived the trace, traced by Dynamo, or a capture that
            # records nothing more (a failure, see Recorder.trip): just the hook
            if not self._active or compiling() or rec.stopped:
                return hook(*args, **kwargs), None
            try:
                with capture.quiet():
                    if not rec.in_pass and capture.outside_pass is not None:
                        capture.outside_pass()  # (a program's hook, first thing in a forward)
                    payload, given = seen(args)
                    target, module, node = where()
                    if backward and node is None:
                        node = rec.running_node()
                    payload.hook_name, payload.returned, payload.changed = _hook_name(hook), None, False
                    rec.emit(
                        _EVENT_KIND[kind],
                        target=target,
                        node=node,
                        module=module,
                        hook=index,
                        payload=payload,
                    )
                    versions = _versions(given)
                    copies = [_bits(t).clone() for t in given] if bits_checked else None
            except Exception as exc:
                if not rec.trip(exc):
                    raise
                return hook(*args, **kwargs), None
            result = hook(*args, **kwargs)
            try:
                return result, self._after_hook(kind, args, result, given, versions, copies, payload)
            except Exception as exc:
                if not rec.trip(exc):
                    raise
                return result, None

        return fire

    def _after_hook(
        self,
        kind: str,
        args: tuple,
        result: Any,
        given: list[torch.Tensor],
        versions: list[int],
        copies: list[torch.Tensor] | None,
        payload: _HookPayload,
    ) -> _HookPayload:
        """A wrapped hook returned ``result``: what it returned, and whether it changed
        anything, in its event's ``payload``."""
        rec = self.recorder
        with self.capture.quiet():
            changed = _replaces(result, _replaceable(kind, args)) or _versions(given) != versions
            if not changed and copies:
                differs = _differs(given, copies)
                if _compared_now(given):
                    written = _read(differs)
                    changed = any(written)
                else:  # (known after the pass: until then any of them may have been written)
                    written = [True] * len(given)
                    self._compared_later.append((payload, differs))
                for t, was in zip(given, written, strict=True):
                    if was:  # (later summaries, the final .grad's too, read it again)
                        rec.forget(t)
            payload.returned = (
                None if result is None else [rec.summarize(t) for t in _aliases(flat_tensors(result))]
            )
            payload.changed = changed
        return payload
