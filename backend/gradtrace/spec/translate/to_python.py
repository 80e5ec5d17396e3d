"""A model spec -> the plain PyTorch program that does the same thing (runs as is, with torch).

Layout: imports; a class per composite module; the default dtype; ``torch.manual_seed(seed)``;
the inputs (drawn first, in declared order, as the spec draws them); the layers in module order
(their constructors draw the parameters in the spec's order); literal ``init`` values copied in
under ``torch.no_grad()``; the hooks; the forward, each tensor's ``retain_grad()`` and hooks right
after the line that assigns it (the spec registers them on every assignment); then the steps.
"""

from __future__ import annotations

import ast
from typing import Any

from ..models import DEFAULT_TITLE, ModelSpec
from ..modules import CompositeSpec, LeafSpec, SequentialSpec, walk_modules
from ..parse import parse_spec
from ..steps import BackwardStep, ForwardStep, GradStep, SgdStep, StepSpec, ZeroGradStep
from ..vocabulary import FUNCTIONS
from .hook_actions import action_python
from .torch_names import F_PREFERRED, HOOK_METHOD_OF, HOOK_PARAMS, LAYER_POSITIONAL

_IMPORTS = ["import torch", "from torch import nn", "import torch.nn.functional as F"]


def _path(path: str) -> str:
    """A dotted module/parameter path as Python: "seq.0.weight" -> "seq[0].weight"."""
    out = ""
    for part in path.split("."):
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out


def _value(value: Any) -> str:
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value) and len(value) <= 8:
        return repr(tuple(value))
    return repr(value)


def _layer(spec: Any) -> str:
    """`nn.Linear(2, 3, bias=False)`: required arguments positional, the rest when not default."""
    fields = type(spec).model_fields
    positional, keywords = [], []
    for name in LAYER_POSITIONAL[spec.type]:
        if fields[name].is_required():
            positional.append(_value(getattr(spec, name)))
    for name, info in fields.items():
        if name in ("type", "init") or info.is_required():
            continue
        value = getattr(spec, name)
        if value != info.default:
            keywords.append(f"{name}={_value(value)}")
    return f"nn.{spec.type}({', '.join(positional + keywords)})"


class _Writer:
    def __init__(self, spec: ModelSpec) -> None:
        self.spec = spec
        self.lines: list[str] = []
        self.class_names: dict[int, str] = {}
        self.used = set(spec.inputs) | set(spec.modules) | {"torch", "nn", "F"}
        for step in spec.effective_steps():
            self.used |= set(getattr(step, "as_", []) or [])
        self.used |= {t for s in spec.program.statements for t in s.targets}
        self.optimizers: dict[float, str] = {}

    def name(self, base: str) -> str:
        name, k = base, 2
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

    # ---- program lines --------------------------------------------------------------------
    def line(self, source: str, modules: set[str], in_class: bool) -> str:
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                fn = node.func.id
                if fn in modules:
                    if in_class:
                        node.func = ast.Attribute(ast.Name("self", ast.Load()), fn, ast.Load())
                elif fn in FUNCTIONS:
                    home = "F" if fn in F_PREFERRED else "torch"
                    node.func = ast.Attribute(ast.Name(home, ast.Load()), fn, ast.Load())
        return ast.unparse(tree)

    def classes(self) -> None:
        for path, _ptr, mod, _depth in reversed(list(walk_modules(self.spec.modules))):
            if isinstance(mod, CompositeSpec) and id(mod) not in self.class_names:
                base = "".join(p[:1].upper() + p[1:] for p in path.replace(".", "_").split("_") if p)
                self.class_names[id(mod)] = cls = self.name(base or "Block")
                out = [f"class {cls}(nn.Module):", "    def __init__(self):", "        super().__init__()"]
                for child, spec in mod.modules.items():
                    out.append(f"        self.{child} = {self.construct(spec)}")
                out += ["", f"    def forward(self, {', '.join(mod.args)}):"]
                out += [f"        {self.line(s, set(mod.modules), True)}" for s in mod.forward]
                self.lines += [*out, "", ""]

    def construct(self, spec: Any) -> str:
        if isinstance(spec, LeafSpec):
            return _layer(spec)
        if isinstance(spec, SequentialSpec):
            return f"nn.Sequential({', '.join(self.construct(layer) for layer in spec.layers)})"
        return f"{self.class_names[id(spec)]}()"

    # ---- setup ----------------------------------------------------------------------------
    def inputs(self) -> None:
        for name, inp in self.spec.inputs.items():
            dtype = inp.dtype or self.spec.dtype
            extra = (
                f", dtype=torch.{inp.dtype}"
                if inp.dtype and inp.dtype != self.spec.dtype and inp.value is None
                else ""
            )
            grad = ", requires_grad=True" if inp.requires_grad else ""
            if inp.value is not None:
                if inp.dtype and inp.dtype != self.spec.dtype and dtype != "int64":
                    extra = f", dtype=torch.{dtype}"
                text = f"torch.tensor({inp.value!r}{extra}{grad})"
            elif inp.init == "arange":
                shape = inp.declared_shape()
                count = 1
                for d in shape:
                    count *= d
                text = f"torch.arange({count}, dtype=torch.{dtype}).reshape({_value(list(shape))})"
                text += ".requires_grad_()" if inp.requires_grad else ""
            elif inp.init == "randint":
                text = f"torch.randint(0, {inp.high}, {_value(list(inp.shape or []))})"
            else:
                text = f"torch.{inp.init}({_value(list(inp.shape or []))}{extra}{grad})"
            self.lines.append(f"{name} = {text}")

    def init_values(self) -> None:
        copies = []
        for path, _ptr, mod, _depth in walk_modules(self.spec.modules):
            if isinstance(mod, LeafSpec):
                for param, value in (mod.init or {}).items():
                    copies.append(f"    {_path(path)}.{param}.copy_(torch.tensor({value!r}))")
        if copies:
            self.lines += ["with torch.no_grad():", *copies]

    def uses_dropout(self) -> bool:
        for _where, _ptr, mod, _depth in walk_modules(self.spec.modules):
            if getattr(mod, "type", None) == "Dropout" and mod.p != 0:
                return True
        programs = [self.spec.forward] + [
            m.forward for _p, _q, m, _d in walk_modules(self.spec.modules) if isinstance(m, CompositeSpec)
        ]
        return any("dropout(" in line for program in programs for line in program)

    # ---- hooks ----------------------------------------------------------------------------
    def hook(self, index: int, hook: Any) -> list[str]:
        kind = hook.type
        params, which = HOOK_PARAMS[kind]
        var = params[which]
        action = hook.action.model_dump(exclude_none=True) if hook.action else None
        target = _path(hook.module if hasattr(hook, "module") else hook.tensor)
        register = f"{target}.{HOOK_METHOD_OF[kind]}"
        if kind == "post_accumulate_grad" and action is not None:
            fn = self.name(f"hook_{index}")
            return [
                f"def {fn}({var}):",
                f"    {action_python(action, var, in_place=True)}",
                "",
                f"{register}({fn})",
            ]
        if action is None:
            body = "None"
        elif kind == "tensor" or (kind == "forward" and self.returns(hook.module) == 1):
            body = action_python(action, var)
        else:
            item = var[0]
            body = f"tuple(None if {item} is None else {action_python(action, item)} for {item} in {var})"
        return [f"{register}(lambda {', '.join(params)}: {body})"]

    def returns(self, path: str) -> int:
        return getattr(self.spec.module_paths()[path], "returns", 1)

    def after_assign(self, names: tuple[str, ...]) -> list[str]:
        out = []
        for name in names:
            if name in self.spec.retain_grad and name not in self.spec.inputs:
                out.append(f"{name}.retain_grad()")
            for index, hook in enumerate(self.spec.hooks):
                if getattr(hook, "tensor", None) == name and name not in self.spec.inputs:
                    out += self.hook(index, hook)
        return out

    def program(self, lines: list[str]) -> None:
        modules = set(self.spec.modules)
        for source in lines:
            self.lines.append(self.line(source, modules, False))
            stmt = ast.parse(source).body[0]
            assert isinstance(stmt, ast.Assign)  # a validated top-level line
            names = tuple(n.id for n in ast.walk(stmt.targets[0]) if isinstance(n, ast.Name))
            self.lines += self.after_assign(names)

    # ---- steps ----------------------------------------------------------------------------
    def parameters(self) -> str:
        owners = [n for n, m in self.spec.modules.items() if any(True for _ in _params(m))]
        if len(owners) == 1:
            return f"{owners[0]}.parameters()"
        return "[" + ", ".join(f"*{n}.parameters()" for n in owners) + "]"

    def step(self, step: StepSpec) -> None:
        match step:
            case BackwardStep():
                kwargs = [f"{k}=True" for k in ("retain_graph", "create_graph") if getattr(step, k)]
                if step.inputs:
                    kwargs.append(f"inputs=[{', '.join(_path(r) for r in step.inputs)}]")
                self.lines.append(f"{step.of}.backward({', '.join(kwargs)})")
            case GradStep():
                of = step.of if isinstance(step.of, str) else f"[{', '.join(step.of)}]"
                kwargs = [f"retain_graph={step.retain_graph}"] if step.retain_graph is not None else []
                kwargs += [f"{k}=True" for k in ("create_graph", "allow_unused") if getattr(step, k)]
                targets = f"({step.as_[0]},)" if len(step.as_) == 1 else ", ".join(step.as_)
                args = [of, f"[{', '.join(_path(r) for r in step.inputs)}]", *kwargs]
                self.lines.append(f"{targets} = torch.autograd.grad({', '.join(args)})")
            case ForwardStep():
                self.program(step.program if step.program is not None else self.spec.forward)
            case ZeroGradStep():
                arg = "" if step.set_to_none else "set_to_none=False"
                self.lines += [f"{n}.zero_grad({arg})" for n in self.spec.modules]
                for name, inp in self.spec.inputs.items():
                    if inp.requires_grad:
                        self.lines.append(
                            f"{name}.grad = None"
                            if step.set_to_none
                            else f"if {name}.grad is not None:\n    {name}.grad.zero_()"
                        )
            case SgdStep(lr=lr) if lr in self.optimizers:
                self.lines.append(f"{self.optimizers[lr]}.step()")

    def write(self) -> str:
        spec = self.spec
        doc = spec.title if spec.title != DEFAULT_TITLE or spec.description else None
        if doc is not None:
            text = doc + (f"\n\n{spec.description}" if spec.description else "")
            self.lines.append(_docstring(text))
        self.lines += [*_IMPORTS, "", ""]
        self.classes()
        if spec.dtype != "float32":
            self.lines.append(f"torch.set_default_dtype(torch.{spec.dtype})")
        self.lines.append(f"torch.manual_seed({spec.seed})")
        self.inputs()
        for name, mod in spec.modules.items():
            self.lines.append(f"{name} = {self.construct(mod)}")
        if self.uses_dropout():
            self.lines.append(
                f"torch.manual_seed({spec.seed})  # the forward's dropout draws from a fresh seed"
            )
        self.init_values()
        for index, hook in enumerate(spec.hooks):
            if (
                hasattr(hook, "module")
                or hook.tensor in spec.inputs
                or hook.tensor in spec.parameter_shapes()
            ):
                self.lines += self.hook(index, hook)
        steps = spec.effective_steps()
        if any(True for m in spec.modules.values() for _ in _params(m)):
            for lr in dict.fromkeys(s.lr for s in steps if isinstance(s, SgdStep)):  # in order, once each
                self.optimizers[lr] = name = self.name("optimizer")
                self.lines.append(f"{name} = torch.optim.SGD({self.parameters()}, lr={lr!r})")
        self.lines.append("")
        self.program(spec.forward)
        for step in steps:
            self.step(step)
        return "\n".join(self.lines).rstrip() + "\n"


def _params(module: Any):  # noqa: ANN202
    for _where, _ptr, mod, _depth in walk_modules({"m": module}):
        if isinstance(mod, LeafSpec):
            yield from mod.parameter_shapes()


def _docstring(text: str) -> str:
    # repr escapes what a triple-quoted string cannot hold as written (a NUL makes the source
    # unrunnable; other control characters would be invisible or move the cursor)
    if '"""' in text or "\\" in text or any(not c.isprintable() and c != "\n" for c in text):
        return repr(text)
    return f'"""{text}\n"""'


def spec_to_python(spec: ModelSpec | dict[str, Any]) -> str:
    """The PyTorch program of a spec (a dict is validated first; SpecError if it is not valid)."""
    model = spec if isinstance(spec, ModelSpec) else parse_spec(spec)
    return _Writer(model).write()
