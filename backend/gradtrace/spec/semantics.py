"""Whole-spec checks: one shared name space, compiled programs, steps, hooks, retain_grad.

Called by ModelSpec's root validator; raises SpecError naming the field (JSON Pointer) and,
for programs, the line and column.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .analysis import analyse, check_module_args, check_names, reserved_function_names, unused_warnings
from .errors import SpecError, SpecWarning
from .hooks import TensorHookSpec
from .modules import CompositeSpec, walk_modules
from .program import CalleeInfo, parse_program

if TYPE_CHECKING:
    from .models import ModelSpec

HARD_MAX_MODULE_DEPTH = 16


def _callees(children: dict) -> dict[str, CalleeInfo]:
    out = {}
    for name, child in children.items():
        out[name] = CalleeInfo(child.type, child.call_arity, child.returns)
    return out


def _conflict(name: str, first: str, second: str, path: str) -> SpecError:
    return SpecError("name_conflict", f"name {name!r} is used twice: {first} and {second}", path)


def _compile_modules(spec: ModelSpec, functions: dict[str, str]) -> None:
    """Compile each composite Module's program against its own arguments and children."""
    # Children of composites are compiled first (deepest first) so a parent knows their `returns`.
    walked = list(walk_modules(spec.modules))
    for path, ptr, _mod, depth in walked:
        if depth > HARD_MAX_MODULE_DEPTH:
            raise SpecError(
                "too_deep",
                f"module {path} is nested {depth} levels deep (at most {HARD_MAX_MODULE_DEPTH})",
                ptr,
            )
    for path, ptr, mod, _depth in reversed(walked):
        if not isinstance(mod, CompositeSpec):
            continue
        reserved = dict(functions)
        for child in mod.modules:
            if child in functions:
                raise _conflict(
                    child,
                    f"the module {path}.{child} ({ptr}/modules/{child})",
                    functions[child],
                    f"{ptr}/modules/{child}",
                )
            reserved[child] = f"the module {path}.{child}"
        defined: dict[str, str] = {}
        for i, arg in enumerate(mod.args):
            other = defined.get(arg) or reserved.get(arg)
            if other:
                raise _conflict(arg, f"argument {arg!r} of module {path}", other, f"{ptr}/args/{i}")
            defined[arg] = f"an argument of module {path}"
        program = parse_program(
            mod.forward, f"{ptr}/forward", _callees(mod.modules), owner=path, args=tuple(mod.args)
        )
        check_names(program, defined, reserved)
        check_module_args(program, f"{ptr}/args")
        mod._program = program


def check_spec(spec: ModelSpec) -> None:
    functions = reserved_function_names()
    reserved = dict(functions)
    for name in spec.modules:
        if name in functions:
            raise _conflict(name, f"the module {name} (/modules/{name})", functions[name], f"/modules/{name}")
        reserved[name] = f"the module {name} (/modules/{name})"
    inputs: dict[str, str] = {}
    for name, inp in spec.inputs.items():
        if name in reserved:
            raise _conflict(name, f"the input {name} (/inputs/{name})", reserved[name], f"/inputs/{name}")
        inputs[name] = f"the input {name} (/inputs/{name})"
        if inp.dtype is None:
            inp.dtype = spec.dtype
    _compile_modules(spec, functions)

    program = parse_program(spec.forward, "/forward", _callees(spec.modules))
    if not program.statements:
        raise SpecError("empty_program", "the forward program has no statements", "/forward")
    defined = check_names(program, inputs, reserved)
    spec._program = program

    params = spec.parameter_shapes()
    grad_leaves = {n for n, i in spec.inputs.items() if i.requires_grad} | set(params)
    defined, keep = _check_steps(spec, defined, reserved, params)
    keep |= _check_hooks(spec, defined, params, grad_leaves)
    retain_warnings = _check_retain_grad(spec, defined, params)
    keep |= set(spec.retain_grad)

    stats = analyse(program, spec.inputs, keep)
    spec._analysis = stats
    spec._warnings = unused_warnings(program, stats, spec.inputs) + retain_warnings


def _tensor_ref(ref: str, defined: dict[str, str], params: dict, path: str, what: str) -> None:
    if ref in defined or ref in params:
        return
    hint = ""
    if "." in ref:
        hint = f" (parameters: {', '.join(list(params)[:12]) or 'none'})"
    raise SpecError("undefined_name", f"{what}: {ref!r} is not a tensor of this spec{hint}", path)


def _check_steps(spec: ModelSpec, defined: dict[str, str], reserved: dict[str, str], params: dict):
    """Names each step reads must exist by then; `grad` results and step programs add names."""
    keep: set[str] = set()
    callees = _callees(spec.modules)
    for i, step in enumerate(spec.steps or []):
        ptr = f"/steps/{i}"
        if step.do == "backward":
            _tensor_ref(step.of, defined, {}, f"{ptr}/of", f"step {i} (backward)")
            keep.add(step.of)
            for j, ref in enumerate(step.inputs or []):
                _tensor_ref(ref, defined, params, f"{ptr}/inputs/{j}", f"step {i} (backward) inputs")
                keep.add(ref)
        elif step.do == "grad":
            for j, name in enumerate(step.outputs()):
                sub = f"{ptr}/of" if isinstance(step.of, str) else f"{ptr}/of/{j}"
                _tensor_ref(name, defined, {}, sub, f"step {i} (grad)")
                keep.add(name)
            for j, ref in enumerate(step.inputs):
                _tensor_ref(ref, defined, params, f"{ptr}/inputs/{j}", f"step {i} (grad) inputs")
                keep.add(ref)
            for j, name in enumerate(step.as_):
                other = defined.get(name) or reserved.get(name)
                if other:
                    raise _conflict(name, f"step {i} (grad) `as` ({ptr}/as/{j})", other, f"{ptr}/as/{j}")
                defined[name] = f"a result of step {i} (grad)"
        elif step.do == "forward" and step.program is not None:
            program = parse_program(step.program, f"{ptr}/program", callees, label=f"step {i} (forward)")
            defined = check_names(program, defined, reserved)
            keep |= {u for s in program.statements for u in s.uses}
            spec._step_programs[i] = program
    return defined, keep


def _check_hooks(spec: ModelSpec, defined: dict[str, str], params: dict, grad_leaves: set[str]) -> set[str]:
    paths = spec.module_paths()
    keep = set()
    for i, hook in enumerate(spec.hooks):
        ptr = f"/hooks/{i}"
        if isinstance(hook, TensorHookSpec):  # "tensor" and "post_accumulate_grad"
            _tensor_ref(hook.tensor, defined, params, f"{ptr}/tensor", f"hook {i} ({hook.type})")
            keep.add(hook.tensor)
            if hook.tensor in spec.inputs and hook.tensor not in grad_leaves:
                raise SpecError(
                    "hook_on_no_grad",
                    f"hook {i} ({hook.type}): input {hook.tensor!r} does not require grad, so no gradient reaches it; set requires_grad",
                    f"{ptr}/tensor",
                )
            if hook.type == "post_accumulate_grad" and hook.tensor not in grad_leaves:
                raise SpecError(
                    "hook_not_on_leaf",
                    f"hook {i} (post_accumulate_grad): {hook.tensor!r} is not a leaf that requires grad (an input with requires_grad or a parameter)",
                    f"{ptr}/tensor",
                )
        elif hook.module not in paths:
            known = ", ".join(list(paths)[:12]) or "none"
            raise SpecError(
                "undefined_module",
                f"hook {i} ({hook.type}): no module {hook.module!r} (modules: {known})",
                f"{ptr}/module",
            )
    return keep


def _check_retain_grad(spec: ModelSpec, defined: dict[str, str], params: dict) -> list[SpecWarning]:
    warnings = []
    for i, name in enumerate(spec.retain_grad):
        if name in spec.inputs:
            warnings.append(
                SpecWarning(
                    "retain_grad_on_leaf",
                    f"retain_grad: {name!r} is a leaf input; its .grad is kept anyway",
                    f"/retain_grad/{i}",
                )
            )
            continue
        _tensor_ref(name, defined, {}, f"/retain_grad/{i}", "retain_grad")
    return warnings
