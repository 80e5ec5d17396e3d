"""The hooks a spec declares, registered for real, recording each firing in place.

A spec hook is a real PyTorch hook (``register_full_backward_hook``, ``register_hook``, …);
its declarative action (scale / add / zero / clamp) is applied the way PyTorch hooks change
values: by returning a replacement (for post-accumulate-grad hooks, which return nothing, by
writing ``.grad`` in place). Each firing is an event; an action that changed something adds a
``hook_action`` event with the values before and after.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import torch
from torch import nn

from gradtrace.engine.recorder import Recorder
from gradtrace.trace_schema import (
    GradPayload,
    HookActionPayload,
    ModuleBackwardPayload,
    ModuleBackwardPrePayload,
    ModuleForwardPayload,
    ModuleForwardPrePayload,
)


def apply_action(action: dict[str, Any], t: Any) -> Any:
    """The action's result for one tensor (None and non-tensors pass through unchanged)."""
    if not isinstance(t, torch.Tensor):
        return t
    op = action["op"]
    if op == "scale":
        return t * action["by"]
    if op == "add":
        return t + action["by"]
    if op == "zero":
        return torch.zeros_like(t)
    return t.clamp(min=action.get("min"), max=action.get("max"))


class UserHooks:
    """Registers the spec's hooks on modules and tensors; ``stack`` removes them all."""

    def __init__(self, recorder: Recorder, hooks: list[dict[str, Any]], stack: ExitStack) -> None:
        self.recorder = recorder
        self.hooks = hooks  # spec.hooks as dicts (type, module | tensor, action)
        self.stack = stack
        self.outputs_only: dict[str, None] = {}  # module paths (ordered set), see _watch_inputs

    # ---- events ---------------------------------------------------------------------------
    def _act(self, index: int, target: str | None, module: str | None, values: tuple) -> tuple | None:
        """Apply hook ``index``'s action to ``values``; record it; None if there is none."""
        action = self.hooks[index].get("action")
        if not action:
            return None
        after = tuple(apply_action(action, v) for v in values)
        self.recorder.emit(
            "hook_action",
            target=target,
            node=self.recorder.running_node(),
            module=module,
            hook=index,
            payload=HookActionPayload(
                action=action,
                before=self.recorder.summaries(values),
                after=self.recorder.summaries(after),
            ),
        )
        return after

    # ---- module hooks ---------------------------------------------------------------------
    def register_module_hook(self, index: int, module: nn.Module, path: str) -> None:
        kind = self.hooks[index]["type"]
        rec = self.recorder
        if kind == "forward_pre":

            def forward_pre(_m: nn.Module, args: tuple) -> tuple | None:
                rec.emit(
                    "module_forward_pre",
                    target=path,
                    module=path,
                    hook=index,
                    payload=ModuleForwardPrePayload(inputs=self.recorder.summaries(args)),
                )
                return self._act(index, path, path, args)

            handle = module.register_forward_pre_hook(forward_pre)
        elif kind == "forward":

            def forward(_m: nn.Module, args: tuple, output: Any) -> Any:
                rec.emit(
                    "module_forward",
                    target=path,
                    module=path,
                    hook=index,
                    payload=ModuleForwardPayload(
                        inputs=self.recorder.summaries(args),
                        outputs=self.recorder.summaries(output),
                    ),
                )
                single = isinstance(output, torch.Tensor)
                after = self._act(index, path, path, (output,) if single else tuple(output))
                if after is None:
                    return None
                return after[0] if single else type(output)(after)

            handle = module.register_forward_hook(forward)
        elif kind == "full_backward_pre":

            def backward_pre(_m: nn.Module, grad_output: tuple) -> tuple | None:
                rec.emit(
                    "module_backward_pre",
                    target=path,
                    node=self.recorder.running_node(),
                    module=path,
                    hook=index,
                    payload=ModuleBackwardPrePayload(grad_output=self.recorder.summaries(grad_output)),
                )
                return self._act(index, path, path, grad_output)

            handle = module.register_full_backward_pre_hook(backward_pre)
        else:  # full_backward, or the deprecated non-full "backward"

            def backward(_m: nn.Module, grad_input: tuple, grad_output: tuple) -> tuple | None:
                rec.emit(
                    "module_backward",
                    target=path,
                    node=self.recorder.running_node(),
                    module=path,
                    hook=index,
                    payload=ModuleBackwardPayload(
                        grad_input=self.recorder.summaries(grad_input),
                        grad_output=self.recorder.summaries(grad_output),
                    ),
                )
                return self._act(index, path, path, grad_input)

            register: Callable = (
                module.register_full_backward_hook
                if kind == "full_backward"
                else module.register_backward_hook
            )
            handle = register(backward)
        self.stack.callback(handle.remove)
        if kind in ("full_backward", "full_backward_pre"):
            self._watch_inputs(module, path)

    def _watch_inputs(self, module: nn.Module, path: str) -> None:
        """A full backward hook whose module gets no input requiring grad fires on the
        outputs' gradients only (grad_input is all None): note it, naming the module."""

        def check(_m: nn.Module, args: tuple) -> None:
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            if torch.is_grad_enabled() and not any(t.requires_grad for t in tensors):
                self.outputs_only.setdefault(path, None)

        self.stack.callback(module.register_forward_pre_hook(check).remove)

    # ---- tensor hooks ---------------------------------------------------------------------
    def register_tensor_hook(self, index: int, tensor: torch.Tensor, name: str) -> None:
        kind = self.hooks[index]["type"]
        rec = self.recorder
        if kind == "tensor":

            def grad_hook(grad: torch.Tensor) -> torch.Tensor | None:
                rec.emit(
                    "tensor_hook",
                    target=name,
                    node=self.recorder.tensor_node(tensor),
                    hook=index,
                    payload=GradPayload(grad=rec.summarize(grad)),
                )
                after = self._act(index, name, None, (grad,))
                return None if after is None else after[0]

            handle = tensor.register_hook(grad_hook)
        else:  # post_accumulate_grad: returns nothing; an action writes .grad in place

            def after_accumulate(param: torch.Tensor) -> None:
                rec.emit(
                    "post_accumulate_grad",
                    target=name,
                    node=self.recorder.tensor_node(param),
                    hook=index,
                    payload=GradPayload(grad=rec.summarize(param.grad)),
                )
                if param.grad is not None:
                    after = self._act(index, name, None, (param.grad,))
                    if after is not None:
                        with torch.no_grad():
                            param.grad.copy_(after[0])

            handle = tensor.register_post_accumulate_grad_hook(after_accumulate)
        self.stack.callback(handle.remove)
