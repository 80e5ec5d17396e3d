"""The capture of a spec's model: its program run as the forward, its steps, its hooks,
inside the one capture entry (capture.Capture, as ``record()``'s block and ``trace()``'s
forward and backward are), by the session they use (session.TraceSession, given the
spec's model and inputs, as ``trace()``'s is given its own): the forward is declared, as
``trace()``'s; the steps run as a program whose passes the session finds (see steps.py).

Errors running the first forward are errors of the spec (SpecError, a 422 in the service);
errors in later steps are events of the trace (see steps.py).
"""

from __future__ import annotations

import functools
from contextlib import ExitStack
from typing import Any

import torch

from gradtrace.engine.build import BuiltModel, resolve_tensor, seeded_global_rng
from gradtrace.engine.capture import Capture
from gradtrace.engine.diagnostics import reduced_to_sum
from gradtrace.engine.interpreter import ProgramModule, run_program
from gradtrace.engine.session import TraceSession
from gradtrace.engine.steps import StepRunner, default_sum, limit_hit
from gradtrace.engine.user_hooks import UserHooks
from gradtrace.problem import public_text
from gradtrace.spec import SpecError
from gradtrace.trace_schema import Diagnostic, ModuleHook, TraceDoc

SPEC_RUN = "a spec run"  # (the capture, as an error naming it says)


def _forward_error(exc: Exception) -> Exception:
    limit = limit_hit(exc)
    if limit is not None:
        return limit
    if isinstance(exc, SpecError):
        return exc
    return SpecError(
        "forward_error",
        f"the forward program failed: {public_text(str(exc), type(exc).__name__)}",
        "/forward",
        exception=type(exc).__name__,
    )


def _refused_by_hooks(exc: Exception) -> bool:
    """An in-place op on the output of a module with a full backward hook (a view made by
    BackwardHookFunction): PyTorch's refusal is the lesson, so it becomes an error event."""
    cause = exc.__cause__ if isinstance(exc, SpecError) and exc.__cause__ is not None else exc
    return isinstance(cause, RuntimeError) and "BackwardHookFunction" in str(cause)


class SpecCapture:
    """One spec's model being captured: its names, its hooks, its session."""

    def __init__(self, spec: Any, built: BuiltModel) -> None:
        self.spec = spec
        self.built = built
        self.session: TraceSession  # (the capture's, given to run)
        self.hooks = [h.model_dump(mode="json", by_alias=True, exclude_none=True) for h in spec.hooks]
        self.tensor_hooks: dict[str, list[int]] = {}  # intermediate name -> hook indexes
        self.retain = set(spec.retain_grad)
        self.env: dict[str, Any] = dict(self.built.inputs)

    # ---- names --------------------------------------------------------------------------
    def resolve(self, ref: str) -> torch.Tensor:
        """A spec tensor reference: a program/input name or a parameter path ("f0.weight")."""
        return resolve_tensor(ref, self.env, self.built.root)

    def on_assign(self, name: str, value: Any) -> None:
        self.env[name] = value
        self.session.name(name, value)
        if not isinstance(value, torch.Tensor):
            return
        if name in self.retain and value.grad_fn is not None:
            value.retain_grad()
            self.session.retained[name] = value
        for index in self.tensor_hooks.get(name, []):
            self.user_hooks.register_tensor_hook(index, value, name)

    def name_locals(self, stack: ExitStack) -> None:
        """Names assigned inside a composite Module's program label its nodes as "f1.s"."""
        for path, module in self.built.root.named_modules():
            if isinstance(module, ProgramModule) and path:
                module.on_assign = self._local_namer(path)
                stack.callback(setattr, module, "on_assign", None)

    def _local_namer(self, path: str):  # noqa: ANN202
        def on_assign(name: str, value: Any) -> None:
            self.session.name_node(f"{path}.{name}", value)

        return on_assign

    # ---- hooks --------------------------------------------------------------------------
    def register_hooks(self, stack: ExitStack) -> None:
        self.user_hooks = UserHooks(self.session.recorder, self.hooks, stack)
        root = self.built.root
        for index, hook in enumerate(self.hooks):
            where = f"/hooks/{index}"
            try:
                if "module" in hook:
                    path = hook["module"]
                    self.user_hooks.register_module_hook(index, root.get_submodule(path), path)
                    self.session.module_hooks.setdefault(path, []).append(
                        ModuleHook(index=index, type=hook["type"], action=hook.get("action"))
                    )
                elif hook["tensor"] in self.built.inputs or hook["tensor"] in self.session.params:
                    name = hook["tensor"]
                    self.user_hooks.register_tensor_hook(index, self.resolve(name), name)
                else:
                    self.tensor_hooks.setdefault(hook["tensor"], []).append(index)
            except SpecError:
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. a hook on a tensor without grad
                raise SpecError(
                    "hook_error",
                    f"hooks[{index}] cannot be registered: {public_text(str(exc), type(exc).__name__)}",
                    where,
                    exception=type(exc).__name__,
                ) from exc

    # ---- the run ------------------------------------------------------------------------
    def run_program(self, program: Any) -> None:
        run_program(
            program,
            self.env,
            self.built.modules,
            on_assign=self.on_assign,
            on_constant=self.session.label_constant,
        )

    def run(self, session: TraceSession) -> None:
        """The forward program and the steps, captured by ``session``, its passes over."""
        self.session = session
        with ExitStack() as stack:
            stack.callback(session.close)
            stack.enter_context(torch.enable_grad())  # (the spec's program: not the caller's mode)
            # dropout draws from the global RNG (not a Generator): seed it, restore it after
            stack.enter_context(seeded_global_rng(self.spec.seed))
            self.register_hooks(stack)
            self.name_locals(stack)
            # retain_grad on spec inputs is a no-op (leaves keep .grad anyway)
            steps = self.spec.effective_steps()
            try:
                session.forward(lambda: self._first_forward(steps), error_is_event=_refused_by_hooks)
            except Exception as exc:  # noqa: BLE001
                if not _refused_by_hooks(exc):
                    error = _forward_error(exc)
                    if error is exc:
                        raise
                    raise error from exc
                # the spec is fine; PyTorch refuses what the hooks imply: show it in the trace
                session.step_error(exc, None, skipped=len(steps))
            else:
                StepRunner(session, self.resolve, self._rerun, self.on_assign).run_all(steps)
            for path in self.user_hooks.outputs_only:
                session.diagnostics.append(
                    Diagnostic(
                        code="hook_on_outputs_only",
                        severity="warning",
                        message=f"module '{path}' has a full backward hook but none of its inputs requires "
                        "grad: the hook fires with the gradients of its outputs only (grad_input is "
                        "None)",
                        module=path,
                    )
                )

    def _first_forward(self, steps: list[Any]) -> None:
        """The forward program; then, when the spec left its steps to the default (one
        backward of the last tensor) and that tensor is not a scalar, its sum, named
        ``"<name>.sum()"``, becomes what backward runs on — as the library does."""
        self.run_program(self.built.program)
        summed = default_sum(self.spec, steps, self.env)
        if summed is None:
            return
        of, total = summed
        self.on_assign(total, self.env[total])
        self.session.diagnostics.append(
            reduced_to_sum(of, tuple(self.env[of].shape), "the spec has no steps")
        )

    def _rerun(self, index: int) -> None:
        program = self.spec.step_program(index)
        self.run_program(program if program is not None else self.built.program)


def capture_spec(
    spec: Any,
    built: BuiltModel,
    limits: Any,
    value_budget: int,
    final_value_limit: int,
    normalized: dict[str, Any],
    want_grads: bool,
) -> tuple[TraceDoc, dict[str, Any] | None]:
    """``built`` (the spec's model) running the spec's program and steps within ``limits``,
    inside the one capture entry (capture.Capture): the trace (carrying ``normalized``, the
    spec as the trace shows it) and, with ``want_grads``, its final gradients."""
    capture = Capture(
        SPEC_RUN, "spec", spec.title, spec=normalized, want_grads=want_grads, callers_code=False
    )
    make_session = functools.partial(
        TraceSession,
        None,
        built.root,
        dict(built.inputs),
        model_hooks=False,
        max_nodes=limits.max_nodes,
        value_budget=value_budget,
        final_value_limit=final_value_limit,
    )
    return capture.run(make_session, SpecCapture(spec, built).run)
