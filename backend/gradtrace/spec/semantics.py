"""Whole-spec checks: one shared name space, compiled programs, steps, hooks, retain_grad.

Called by ModelSpec's root validator; raises SpecError naming the field (JSON Pointer) and,
for programs, the line and column. Independent checks (each module, each program line, each
step, hook and retain_grad entry) all run: the first error is raised with every error found
attached (``SpecError.errors``). A refused line or module still counts as defining what it
names, so what comes after it is checked without blaming it for that.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .analysis import analyse, check_module_args, check_names, reserved_function_names, unused_warnings
from .errors import SpecError, SpecWarning, did_you_mean
from .gaps import Gaps
from .hooks import TensorHookSpec
from .modules import CompositeSpec, walk_modules
from .program import CalleeInfo, Program, parse_program
from .reserved import module_attribute_clash
from .steps import BackwardStep, ForwardStep, GradStep

if TYPE_CHECKING:
    from .hooks import HookSpec
    from .models import ModelSpec

HARD_MAX_MODULE_DEPTH = 16


def _callees(children: dict, owner: str, gaps: Gaps, failed: set[str]) -> dict[str, CalleeInfo]:
    """What a program may call: its children, those refused by the schema with nothing known
    (their calls are not checked) and composites whose program failed with unknown outputs."""
    out = {}
    for name, child in children.items():
        returns = None if _join(owner, name) in failed else child.returns
        out[name] = CalleeInfo(child.type, child.call_arity, returns)
    for path in gaps.modules:
        parent, _, name = path.rpartition(".")
        if parent == owner:
            out[name] = CalleeInfo("", None, None)
    return out


def _join(owner: str, name: str) -> str:
    return f"{owner}.{name}" if owner else name


def _conflict(name: str, first: str, second: str, path: str) -> SpecError:
    return SpecError("name_conflict", f"name {name!r} is used twice: {first} and {second}", path)


class _Findings:
    """Every SpecError of the independent checks, raised together at the end."""

    def __init__(self) -> None:
        self.errors: list[SpecError] = []

    @contextmanager
    def check(self) -> Iterator[None]:
        try:
            yield
        except SpecError as exc:
            self.errors.append(exc)

    def raise_all(self) -> None:
        if self.errors:
            raise self.errors[0].with_errors(self.errors)


def _check_attribute_name(
    name: str, what: str, path: str, line: int | None = None, column: int | None = None
) -> None:
    """A module or tensor named like an nn.Module attribute (`training`, `_modules`) is refused."""
    why = module_attribute_clash(name)
    if why is not None:
        raise SpecError("reserved_name", f"{what}: {why}", path, line, column)


def _check_program_names(program: Program, findings: _Findings) -> None:
    """The names a program assigns are tensors: none may shadow an nn.Module attribute."""
    for stmt in program.statements:
        for target in stmt.targets:
            with findings.check():
                _check_attribute_name(
                    target,
                    f"{program.where(stmt.index)}: tensor {target!r}",
                    f"{program.path}/{stmt.index}",
                    stmt.index + 1,
                    stmt.column,
                )


def _compile_modules(spec: ModelSpec, functions: dict[str, str], findings: _Findings, gaps: Gaps) -> set[str]:
    """Compile each composite Module's program against its own arguments and children.

    Returns the paths of the composites that failed: their callers do not know their outputs.
    """
    # Children of composites are compiled first (deepest first) so a parent knows their `returns`.
    walked = list(walk_modules(spec.modules))
    for path, ptr, _mod, depth in walked:
        if depth > HARD_MAX_MODULE_DEPTH:
            raise SpecError(
                "too_deep",
                f"module {path} is nested {depth} levels deep (at most {HARD_MAX_MODULE_DEPTH})",
                ptr,
            )
        with findings.check():
            _check_attribute_name(path.rsplit(".", 1)[-1], f"module {path}", ptr)
    failed: set[str] = set()
    for path, ptr, mod, _depth in reversed(walked):
        if isinstance(mod, CompositeSpec):
            before = len(findings.errors)
            with findings.check():
                _compile_module(path, ptr, mod, functions, findings, gaps, failed)
            if len(findings.errors) > before:
                failed.add(path)
    return failed


def _compile_module(
    path: str,
    ptr: str,
    mod: CompositeSpec,
    functions: dict[str, str],
    findings: _Findings,
    gaps: Gaps,
    failed: set[str],
) -> None:
    reserved = dict(functions)
    callees = _callees(mod.modules, path, gaps, failed)
    for child in callees:
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
        _check_attribute_name(arg, f"argument {arg!r} of module {path}", f"{ptr}/args/{i}")
        other = defined.get(arg) or reserved.get(arg)
        if other:
            raise _conflict(arg, f"argument {arg!r} of module {path}", other, f"{ptr}/args/{i}")
        defined[arg] = f"an argument of module {path}"
    program = parse_program(
        mod.forward, f"{ptr}/forward", callees, owner=path, args=tuple(mod.args), problems=findings.errors
    )
    before = len(findings.errors)
    _check_program_names(program, findings)
    check_names(program, defined, reserved, findings.errors)
    # A refused line's reads are unknown and a misspelled name may be the argument meant:
    # "argument never used" would then blame the wrong thing.
    if not program.failed_lines and len(findings.errors) == before:
        check_module_args(program, f"{ptr}/args")
    mod._program = program


def check_spec(spec: ModelSpec, gaps: Gaps | None = None) -> None:
    """Every check of a spec whose structure the schema accepted (``gaps``: the parts it
    refused, set aside by parse_spec; checks skip what depends on them)."""
    gaps = gaps or Gaps()
    findings = _Findings()
    functions = reserved_function_names()
    reserved = dict(functions)
    for name in [*spec.modules, *(m for m in gaps.modules if "." not in m)]:
        with findings.check():
            if name in functions:
                raise _conflict(
                    name, f"the module {name} (/modules/{name})", functions[name], f"/modules/{name}"
                )
        reserved[name] = f"the module {name} (/modules/{name})"
    inputs: dict[str, str] = {}
    for name, inp in spec.inputs.items():
        with findings.check():
            _check_attribute_name(name, f"input {name!r}", f"/inputs/{name}")
            if name in reserved:
                raise _conflict(name, f"the input {name} (/inputs/{name})", reserved[name], f"/inputs/{name}")
        inputs[name] = f"the input {name} (/inputs/{name})"
        if inp.dtype is None:
            inp.dtype = spec.dtype
    failed = _compile_modules(spec, functions, findings, gaps)
    with findings.check():
        _check_top_level(spec, functions, reserved, inputs, findings, gaps, failed)
    _check_number_ranges(spec, findings)
    findings.raise_all()


# The smallest magnitude a float64 rounds up to infinity from, in float32 (2**128 * (1 - 2**-25)).
_FLOAT32_OVERFLOW = 3.4028235677973366e38
_INT64 = (-(2**63), 2**63 - 1)


def _first_out_of_range(value: object, fits: object, path: str) -> tuple[str, float | int] | None:
    """The JSON Pointer and value of the first number of a literal that ``fits`` refuses."""
    stack: list[tuple[object, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, list):
            stack.extend((child, f"{where}/{i}") for i, child in reversed(list(enumerate(item))))
        elif isinstance(item, int | float) and not fits(item):  # type: ignore[operator]
            return where, item
    return None


def _check_number_ranges(spec: ModelSpec, findings: _Findings) -> None:
    """Numbers that the tensor's dtype cannot hold: a 422 naming the field, not a silent inf."""

    def fits_float32(v: float) -> bool:
        return abs(v) < _FLOAT32_OVERFLOW

    def fits_int64(v: float) -> bool:
        return _INT64[0] <= v <= _INT64[1]

    def refuse(found: tuple[str, float | int] | None, what: str) -> None:
        if found is not None:
            where, number = found
            with findings.check():
                raise SpecError("out_of_range", f"{where}: {number:.8g} is beyond {what}", where)

    float32 = "float32 (largest ±3.4028235e38): it would become inf"
    for name, inp in spec.inputs.items():
        if inp.value is None:
            continue
        if inp.dtype == "int64":
            refuse(_first_out_of_range(inp.value, fits_int64, f"/inputs/{name}/value"), "int64")
        elif inp.dtype == "float32":
            refuse(_first_out_of_range(inp.value, fits_float32, f"/inputs/{name}/value"), float32)
    if spec.dtype != "float32":
        return
    for _path, ptr, mod, _depth in walk_modules(spec.modules):
        for key, value in (getattr(mod, "init", None) or {}).items():
            refuse(_first_out_of_range(value, fits_float32, f"{ptr}/init/{key}"), float32)
    for i, hook in enumerate(spec.hooks):
        action = hook.action
        for field in ("by", "min", "max"):
            number = getattr(action, field, None) if action is not None else None
            if number is not None and not fits_float32(number):
                refuse((f"/hooks/{i}/action/{field}", number), float32)


def _check_top_level(
    spec: ModelSpec,
    functions: dict[str, str],
    reserved: dict[str, str],
    inputs: dict[str, str],
    findings: _Findings,
    gaps: Gaps,
    failed: set[str],
) -> None:
    callees = _callees(spec.modules, "", gaps, failed)
    program = parse_program(spec.forward, "/forward", callees, problems=findings.errors)
    if not program.statements and not program.failed_lines:
        raise SpecError("empty_program", "the forward program has no statements", "/forward")
    _check_program_names(program, findings)
    defined = check_names(program, inputs, reserved, findings.errors, gaps.unknown_name)
    gaps.any_name = gaps.any_name or program.failed_targets is None
    spec._program = program

    params = spec.parameter_shapes()
    grad_leaves = {n for n, i in spec.inputs.items() if i.requires_grad} | set(params)
    # Steps define names later steps, hooks and retain_grad read: a refused step still defines
    # what it names, so what comes after it is checked without blaming names it would assign.
    defined, keep = _check_steps(spec, defined, reserved, params, callees, findings, gaps)
    keep |= _check_hooks(spec, defined, params, grad_leaves, findings, gaps)
    retain_warnings = _check_retain_grad(spec, defined, params, findings, gaps)
    keep |= set(spec.retain_grad)
    if findings.errors:
        return  # the analysis below assumes a program whose every name resolved

    stats = analyse(program, spec.inputs, keep)
    spec._analysis = stats
    spec._warnings = unused_warnings(program, stats, spec.inputs) + retain_warnings


def _tensor_ref(ref: str, defined: dict[str, str], params: dict, path: str, what: str, gaps: Gaps) -> None:
    if ref in defined or ref in params or gaps.unknown_name(ref):
        return
    hint = did_you_mean(ref, [*defined, *params])
    if "." in ref:
        hint += f" (parameters: {', '.join(list(params)[:12]) or 'none'})"
    raise SpecError("undefined_name", f"{what}: {ref!r} is not a tensor of this spec{hint}", path)


def _check_steps(
    spec: ModelSpec,
    defined: dict[str, str],
    reserved: dict[str, str],
    params: dict,
    callees: dict[str, CalleeInfo],
    findings: _Findings,
    gaps: Gaps,
) -> tuple[dict[str, str], set[str]]:
    """Names each step reads must exist by then; `grad` results and step programs add names."""
    keep: set[str] = set()
    for i, step in enumerate(spec.steps or []):
        ptr = f"/steps/{i}"
        if ptr in gaps.skip:
            continue
        match step:
            case BackwardStep():
                with findings.check():
                    _tensor_ref(step.of, defined, {}, f"{ptr}/of", f"step {i} (backward)", gaps)
                keep.add(step.of)
                for j, ref in enumerate(step.inputs or []):
                    with findings.check():
                        _tensor_ref(
                            ref, defined, params, f"{ptr}/inputs/{j}", f"step {i} (backward) inputs", gaps
                        )
                    keep.add(ref)
            case GradStep():
                for j, name in enumerate(step.outputs()):
                    sub = f"{ptr}/of" if isinstance(step.of, str) else f"{ptr}/of/{j}"
                    with findings.check():
                        _tensor_ref(name, defined, {}, sub, f"step {i} (grad)", gaps)
                    keep.add(name)
                for j, ref in enumerate(step.inputs):
                    with findings.check():
                        _tensor_ref(
                            ref, defined, params, f"{ptr}/inputs/{j}", f"step {i} (grad) inputs", gaps
                        )
                    keep.add(ref)
                for j, name in enumerate(step.as_):
                    other = defined.get(name) or reserved.get(name)
                    if other:
                        findings.errors.append(
                            _conflict(name, f"step {i} (grad) `as` ({ptr}/as/{j})", other, f"{ptr}/as/{j}")
                        )
                    defined[name] = f"a result of step {i} (grad)"
            case ForwardStep(program=list(lines)):
                program = parse_program(
                    lines,
                    f"{ptr}/program",
                    callees,
                    label=f"step {i} (forward)",
                    problems=findings.errors,
                )
                defined = check_names(program, defined, reserved, findings.errors, gaps.unknown_name)
                gaps.any_name = gaps.any_name or program.failed_targets is None
                keep |= {u for s in program.statements for u in s.uses}
                spec._step_programs[i] = program
    return defined, keep


def _check_hooks(
    spec: ModelSpec,
    defined: dict[str, str],
    params: dict,
    grad_leaves: set[str],
    findings: _Findings,
    gaps: Gaps,
) -> set[str]:
    paths = spec.module_paths()
    keep = set()
    for i, hook in enumerate(spec.hooks):
        if f"/hooks/{i}" in gaps.skip:
            continue
        with findings.check():
            keep |= _check_hook(i, hook, spec, defined, params, grad_leaves, paths, gaps)
    return keep


def _check_hook(
    i: int,
    hook: HookSpec,
    spec: ModelSpec,
    defined: dict[str, str],
    params: dict,
    grad_leaves: set[str],
    paths: dict,
    gaps: Gaps,
) -> set[str]:
    keep = set()
    ptr = f"/hooks/{i}"
    if isinstance(hook, TensorHookSpec):  # "tensor" and "post_accumulate_grad"
        _tensor_ref(hook.tensor, defined, params, f"{ptr}/tensor", f"hook {i} ({hook.type})", gaps)
        keep.add(hook.tensor)
        if gaps.unknown_name(hook.tensor):
            return keep  # whether it requires grad is not known
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
    elif hook.module not in paths and not gaps.unknown_module(hook.module):
        known = ", ".join(list(paths)[:12]) or "none"
        raise SpecError(
            "undefined_module",
            f"hook {i} ({hook.type}): no module {hook.module!r}{did_you_mean(hook.module, paths)} (modules: {known})",
            f"{ptr}/module",
        )
    return keep


def _check_retain_grad(
    spec: ModelSpec, defined: dict[str, str], params: dict, findings: _Findings, gaps: Gaps
) -> list[SpecWarning]:
    warnings = []
    for i, name in enumerate(spec.retain_grad):
        if f"/retain_grad/{i}" in gaps.skip:
            continue
        if name in spec.inputs:
            warnings.append(
                SpecWarning(
                    "retain_grad_on_leaf",
                    f"retain_grad: {name!r} is a leaf input; its .grad is kept anyway",
                    f"/retain_grad/{i}",
                )
            )
            continue
        with findings.check():
            _tensor_ref(name, defined, {}, f"/retain_grad/{i}", "retain_grad", gaps)
    return warnings
