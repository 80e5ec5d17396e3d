"""Name resolution and dependency analysis of programs (networkx), before anything is built.

Programs are single-assignment: every name is defined once (an input, an argument, or one
assignment), so a program's dependency graph is a DAG by construction; we still check it and
report its longest path and fan-in/fan-out, and flag unused names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import networkx as nx

from .errors import SpecError, SpecWarning, did_you_mean
from .program import Program
from .vocabulary import FUNCTIONS


@dataclass(frozen=True)
class ProgramAnalysis:
    longest_path: int  # statements on the longest dependency chain
    max_fan_in: int  # most tensors feeding one statement
    max_fan_out: int  # most statements reading one tensor (gradient accumulation points)
    unused: tuple[str, ...]  # names defined but never read


def check_names(
    program: Program,
    defined: dict[str, str],
    reserved: Mapping[str, str],
    problems: list[SpecError],
    unknown: Callable[[str], bool] = lambda name: False,
) -> dict[str, str]:
    """Resolve every name a program reads and writes; return `defined` extended by its assignments.

    `defined` maps tensor names in scope to a description of where they come from ("input x");
    `reserved` maps module and function names to theirs. Errors name both uses of a name; each
    is appended to `problems` and the check goes on. A name `unknown` says an earlier error
    may define, or one a refused line of this program seems to assign, is not called undefined.
    """
    defined = dict(defined)
    for target in program.failed_targets or ():
        defined.setdefault(target, f"assigned on a line of {program.label()} that has an error")
    later = {t: s.index for s in program.statements for t in s.targets}
    for stmt in program.statements:
        where = program.where(stmt.index)
        ptr = f"{program.path}/{stmt.index}"
        for name in stmt.uses:
            if name in defined or unknown(name) or program.failed_targets is None:
                continue
            col = stmt.column_of(name)
            at = f"{where}, column {col}"
            if name in later and later[name] >= stmt.index:
                message = f"{at}: {name!r} is used before it is assigned (on line {later[name] + 1})"
                problems.append(SpecError("use_before_assignment", message, ptr, stmt.index + 1, col))
            elif name in reserved:
                message = f"{at}: {name!r} is {reserved[name]}, not a tensor; call it, e.g. {name}(x)"
                problems.append(SpecError("not_a_tensor", message, ptr, stmt.index + 1, col))
            else:
                hint = did_you_mean(name, [*defined, *later])
                message = f"{at}: name {name!r} is not defined{hint}"
                problems.append(SpecError("undefined_name", message, ptr, stmt.index + 1, col))
        for target in stmt.targets:
            other = defined.get(target) or reserved.get(target)
            if other is not None:
                message = f"{where}: {target!r} is already {other}; pick another name"
                problems.append(SpecError("name_conflict", message, ptr, stmt.index + 1, stmt.column))
            defined[target] = f"assigned on {where}"
    return defined


def dependency_graph(program: Program, sources: Iterable[str]) -> nx.DiGraph:
    """Nodes are tensor names; an edge u -> v means v's statement reads u."""
    graph = nx.DiGraph()
    graph.add_nodes_from(sources)
    for stmt in program.statements:
        outputs = stmt.targets or (f"<return {stmt.index}>",)
        for target in outputs:
            graph.add_node(target, line=stmt.index)
            for used in stmt.uses:
                graph.add_edge(used, target)
    return graph


def analyse(program: Program, sources: Iterable[str], keep: Iterable[str] = ()) -> ProgramAnalysis:
    """Statistics and unused names; `keep` lists names read elsewhere (steps, hooks, retain_grad)."""
    sources = list(sources)
    graph = dependency_graph(program, sources)
    if not nx.is_directed_acyclic_graph(graph):  # impossible with single assignment; guard anyway
        raise SpecError("cycle", f"{program.label()}: the program's dependencies form a cycle", program.path)
    keep = set(keep)
    last = set(program.statements[-1].targets) if program.statements else set()
    unused = tuple(
        n
        for n in graph.nodes
        if graph.out_degree(n) == 0 and n not in keep and n not in last and not n.startswith("<return")
    )
    return ProgramAnalysis(
        longest_path=nx.dag_longest_path_length(graph),
        max_fan_in=max((d for _, d in graph.in_degree()), default=0),
        max_fan_out=max((d for _, d in graph.out_degree()), default=0),
        unused=unused,
    )


def check_module_args(program: Program, ptr: str) -> ProgramAnalysis:
    """A Module program: every argument must be read (an unused argument is a bug)."""
    stats = analyse(program, program.args)
    unused_args = [a for a in program.args if a in stats.unused]
    if unused_args:
        names = ", ".join(repr(a) for a in unused_args)
        raise SpecError(
            "unused_argument", f"module {program.owner}: argument {names} is never used by its forward", ptr
        )
    return stats


def unused_warnings(program: Program, stats: ProgramAnalysis, inputs: Iterable[str]) -> list[SpecWarning]:
    inputs = set(inputs)
    out = []
    for name in stats.unused:
        kind = "input" if name in inputs else "tensor"
        path = f"/inputs/{name}" if name in inputs else program.path
        out.append(SpecWarning("unused", f"{kind} {name!r} is never used", path))
    return out


def reserved_function_names() -> dict[str, str]:
    return {name: f"the function {name}()" for name in FUNCTIONS}
