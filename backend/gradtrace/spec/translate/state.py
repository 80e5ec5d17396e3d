"""What a translation has read so far: the spec being built, the names in scope, the refusals.

Every reader (classes, layers, inputs, hooks, steps) works on one ``Translation``. A refused
statement is noted (``refuse``) and reading goes on; the names it would have bound are bound
anyway (``recover``), so one mistake is reported once, not again at every later use.
"""

from __future__ import annotations

import ast
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from gradtrace.problem import Problem

from ..errors import SpecError
from ..models import DEFAULT_TITLE
from .errors import SOURCE_PATH, unsupported
from .expressions import ExprContext, check_name, convert, dotted, number
from .source import TranslateLimits, limit


@dataclass
class Composite:
    """A class's translation: its children, arguments and forward lines (with their lines)."""

    node: ast.ClassDef
    modules: dict[str, dict[str, Any]]
    args: list[str]
    forward: list[str]
    where: dict[str, ast.AST]  # pointer relative to the module -> source node
    draws: bool
    dropout: bool
    size: int  # modules in one instance's tree (its layers, nested instances' trees)


@dataclass
class Step:
    spec: dict[str, Any]
    node: ast.AST


@dataclass
class Translation:
    limits: TranslateLimits
    aliases: dict[str, str] = field(default_factory=dict)
    classes: dict[str, Composite] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    title: str | None = None
    description: str | None = None
    seed: int | None = None
    dtype: str = "float32"
    modules: dict[str, dict[str, Any]] = field(default_factory=dict)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    forward: list[str] = field(default_factory=list)
    hooks: list[dict[str, Any]] = field(default_factory=list)
    retain_grad: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    where: dict[str, ast.AST] = field(default_factory=dict)  # spec pointer -> source node
    phase: str = "setup"  # setup -> forward -> steps
    draws_since_seed: bool = False
    params_drawn: ast.AST | None = None  # the first construction that drew from the RNG
    dropout: ast.AST | None = None
    literal_count: int = 0
    statements: int = 0
    built: int = 0  # modules built so far (see TranslateLimits.max_modules)
    started: float = field(default_factory=time.monotonic)
    versions: dict[str, str] = field(default_factory=dict)  # python name -> current spec name
    taken: set[str] = field(default_factory=set)  # every spec name given out
    source_names: set[str] = field(default_factory=set)
    first_forward: list[str] = field(default_factory=list)  # ast.dump of the first forward's lines
    block: list[ast.stmt] = field(default_factory=list)  # a later forward being collected
    zero: dict[str, Any] | None = None  # a zero_grad group being collected
    optimizers: dict[str, float] = field(default_factory=dict)
    intermediate_hooks: set[str] = field(default_factory=set)
    errors: list[SpecError] = field(default_factory=list)  # every refused statement
    broken: set[str] = field(default_factory=set)  # variables whose assignment was refused
    broken_defs: set[str] = field(default_factory=set)  # classes and functions refused
    saw_backward: bool = False  # a backward/grad was written (even one refused)
    forward_refused: bool = False  # a line that would have begun the forward was refused

    # ---- refusals ------------------------------------------------------------------------
    def refuse(self, exc: SpecError, stmt: ast.stmt | None) -> None:
        """Note a refused statement and bind what it would have bound; a bound passed stops all."""
        if exc.code == "limit_exceeded":
            raise exc
        self.errors.append(exc)
        if stmt is not None:
            self.recover(stmt)

    def recover(self, stmt: ast.stmt) -> None:
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                targets.extend(target.elts if isinstance(target, ast.Tuple | ast.List) else [target])
        elif isinstance(stmt, ast.ClassDef | ast.FunctionDef):
            self.broken_defs.add(stmt.name)
        for target in targets:
            if isinstance(target, ast.Name) and target.id not in self.versions:
                self.broken.add(target.id)
                self.versions[target.id] = target.id
                self.taken.add(target.id)

    def before_forward(self, node: ast.AST) -> None:
        """Refuse a step written before any forward (unless that forward's line was refused)."""
        if self.phase == "setup" and not self.forward_refused:
            raise unsupported(node, "this runs before any forward: compute the loss first")

    def read_each(self, stmts: Iterable[ast.stmt], read: Callable[[Translation, ast.stmt], None]) -> None:
        """``read`` every statement in turn; a refused one is noted and the next is read."""
        for stmt in stmts:
            self.count(stmt)
            try:
                read(self, stmt)
            except SpecError as exc:
                self.refuse(exc, stmt)

    def count(self, node: ast.AST) -> None:
        self.statements += 1
        if self.statements > self.limits.max_statements:
            raise limit(node, f"more than {self.limits.max_statements:,} statements run (loops unrolled)")
        self.in_time(node)

    def in_time(self, node: ast.AST) -> None:
        if time.monotonic() - self.started > self.limits.max_seconds:
            raise limit(node, f"reading the source took over {self.limits.max_seconds:g} s; simplify it")

    def build(self, node: ast.AST, modules: int) -> None:
        """Count ``modules`` about to be built, refusing before building past the limit."""
        self.built += modules
        if self.built > self.limits.max_modules:
            raise limit(
                node,
                f"this builds {self.built:,} modules so far (each instance of a class counts its "
                f"whole tree); the limit is {self.limits.max_modules:,}",
            )
        self.in_time(node)

    # ---- names ---------------------------------------------------------------------------
    def fresh(self, name: str, node: ast.AST) -> str:
        """The spec name for a Python name being assigned (a reassignment gets a new one)."""
        check_name(node, name)
        if name in self.aliases or name in self.modules or name in self.classes:
            raise unsupported(node, f"{name!r} already names an import, a layer or a class")
        if name not in self.taken:
            self.taken.add(name)
            self.versions[name] = name
            return name
        k = 2
        while f"{name}_{k}" in self.taken or f"{name}_{k}" in self.source_names:
            k += 1
        new = f"{name}_{k}"
        self.taken.add(new)
        self.versions[name] = new
        return new

    def read(self, node: ast.Name) -> str:
        name = self.versions.get(node.id)
        if name is None:
            raise unsupported(node, f"{node.id[:64]!r} is not defined before this line", "undefined_name")
        return name

    def expr_context(self) -> ExprContext:
        return ExprContext(self.aliases, set(self.modules), self.read, broken=frozenset(self.broken))

    def canonical(self, node: ast.expr) -> str | None:
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head not in self.aliases:
            return None
        return self.aliases[head] + ("." + rest if rest else "")

    def assigned(self, target: ast.expr) -> ast.expr:
        """The spec's assignment target: fresh names for a name or a tuple of names."""
        if isinstance(target, ast.Name):
            return ast.Name(self.fresh(target.id, target), ast.Store())
        if isinstance(target, ast.Tuple) and all(isinstance(t, ast.Name) for t in target.elts):
            names = [t.id for t in target.elts if isinstance(t, ast.Name)]
            return ast.Tuple(
                [ast.Name(self.fresh(n, t), ast.Store()) for n, t in zip(names, target.elts, strict=True)],
                ast.Store(),
            )
        raise unsupported(target, "assign to a name or names `a, b` (no subscripts or attributes)")

    def forward_line(self, stmt: ast.Assign, pointer: str, lines: list[str]) -> None:
        value = convert(stmt.value, self.expr_context())
        new_target = self.assigned(stmt.targets[0])
        self.where[f"{pointer}/{len(lines)}"] = stmt
        lines.append(ast.unparse(ast.Assign([new_target], value, lineno=0)))

    def note_forward_extra(self, stmt: ast.stmt) -> None:
        """A registration that belongs to a forward (retain_grad, a hook on an intermediate)."""
        if self.phase == "forward":
            self.first_forward.append(ast.dump(stmt))
        elif self.phase == "steps":
            self.block.append(stmt)

    # ---- paths into the model ------------------------------------------------------------
    def path_of(self, node: ast.expr) -> str:
        """`model.fc1.weight` / `seq[0].bias` -> "model.fc1.weight" / "seq.0.bias"."""
        parts: list[str] = []
        while True:
            if isinstance(node, ast.Attribute):
                check_name(node, node.attr)
                parts.append(node.attr)
                node = node.value
            elif isinstance(node, ast.Subscript) and isinstance(number(node.slice), int):
                parts.append(str(number(node.slice)))
                node = node.value
            elif isinstance(node, ast.Name):
                check_name(node, node.id)
                parts.append(node.id)
                return ".".join(reversed(parts))
            else:
                raise unsupported(node, "name a layer or parameter as model.layer.weight or seq[0]")

    def module_at(self, path: str, node: ast.AST) -> dict[str, Any]:
        parts = path.split(".")
        spec = self.modules.get(parts[0])
        for part in parts[1:]:
            if spec is None:
                break
            if spec["type"] == "Sequential" and part.isdigit() and int(part) < len(spec["layers"]):
                spec = spec["layers"][int(part)]
            else:
                spec = spec.get("modules", {}).get(part)
        if spec is None:
            raise unsupported(node, f"{path[:100]!r} is not a layer of this model")
        return spec

    # ---- the result ----------------------------------------------------------------------
    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"spec_version": 1, "title": self.title or DEFAULT_TITLE}
        if self.description:
            doc["description"] = self.description
        doc.update(seed=self.seed or 0, dtype=self.dtype, modules=self.modules, inputs=self.inputs)
        doc["forward"] = self.forward
        if self.hooks:
            doc["hooks"] = self.hooks
        if self.retain_grad:
            doc["retain_grad"] = self.retain_grad
        doc["steps"] = [s.spec for s in self.steps]
        return doc

    def remap(self, exc: Problem) -> SpecError:
        """An error of the spec validator, at the Python line its spec pointer came from."""
        path = exc.path or ""
        best = None
        for pointer in self.where:
            if (path == pointer or path.startswith(pointer + "/")) and (
                best is None or len(pointer) > len(best)
            ):
                best = pointer
        node = self.where.get(best) if best else None
        if node is None:
            return SpecError(exc.code, exc.message, SOURCE_PATH, None, None)
        err = unsupported(node, exc.message, exc.code)
        err.status = exc.status
        return err
