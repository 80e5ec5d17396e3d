"""The diagnostics analysis: what a person should know about a trace (a detached branch, an
intermediate whose .grad is not kept, a reduced output, PyTorch's own warnings, values read
through torch.func wrappers), from the finished graph, events and values. (The capture's own
notes, a hook that fired unrecorded or a double backward, are the same record, made there.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gradtrace.engine.analysis import Analysis, Finished
from gradtrace.trace_schema import Analyses, Diagnostic, GraphEdge, TensorValue, payload_items


def reduced_to_sum(name: str, shape: tuple[int, ...], why: str) -> Diagnostic:
    """A non-scalar tensor was to be backpropagated: backward ran on its sum (the library
    without loss_fn, a spec's default backward)."""
    return Diagnostic(
        code="output_reduced",
        severity="info",
        message=f"'{name}' has shape {shape}, not a scalar, and {why}: backward ran on {name}.sum()",
        tensor=name,
    )


def reachable_from(roots: Sequence[str], edges: Sequence[GraphEdge], downstream: bool = False) -> set[str]:
    """Node ids upstream of ``roots`` (following edges against data flow); ``downstream``:
    those made from them (following edges with it)."""
    sources: dict[str, list[str]] = {}
    for e in edges:
        if downstream:
            sources.setdefault(e.source, []).append(e.target)
        else:
            sources.setdefault(e.target, []).append(e.source)
    seen = set(roots)
    stack = list(roots)
    while stack:
        for s in sources.get(stack.pop(), []):
            if s not in seen:
                seen.add(s)
                stack.append(s)
    return seen


def connected_to(roots: Sequence[str], edges: Sequence[GraphEdge], wanted: set[str]) -> set[str]:
    """The nodes of ``wanted`` upstream of ``roots``, most often without a walk of the whole
    graph: the program's named tensors (the loss, the output) sit next to the backward's
    roots, at the end of the edges.

    One sweep of the edges from the last reaches a node's sources once the node is reached
    (an edge is recorded when its target is created, after the edges into its source) and
    stops when every wanted node is; anything still missing then (a detached tensor, edges
    recorded out of that order) is settled by :func:`reachable_from`."""
    reached = set(roots)
    missing = wanted - reached
    for e in reversed(edges):
        if not missing:
            return wanted
        if e.target in reached and e.source not in reached:
            reached.add(e.source)
            missing.discard(e.source)
    if not missing:
        return wanted
    return wanted & reachable_from(roots, edges)


def diagnose(done: Finished, already_found: bool = False) -> list[Diagnostic]:
    """Diagnostics from the finished trace: detached branches, intermediates whose .grad is
    not kept, and PyTorch's own warnings (e.g. a full backward hook firing on outputs only)."""
    out: list[Diagnostic] = []
    env, retained, backward_roots, node_ids = done.env, done.retained, done.backward_roots, done.node_ids
    if backward_roots:
        nodes = {name: node_ids.get(fn) for name, t in env.items() if (fn := t.grad_fn) is not None}
        connected = connected_to(backward_roots, done.edges, {node for node in nodes.values() if node})
        roots = set(backward_roots)
        detached = {name: node for name, node in nodes.items() if node is not None and node not in connected}
        if detached:
            # none: a tensor made from a backward's root (a loss summed to be logged), or made
            # after the last backward began (a program's forward to evaluate: no backward since)
            made_from_roots = reachable_from(backward_roots, done.edges, downstream=True)
            last = max((e.seq for e in done.events if e.kind == "node_pre"), default=-1)
            ids = set(detached.values())
            late = {
                n.id for n in done.nodes if n.id in ids and n.created_seq is not None and n.created_seq > last
            }
            detached = {name: node for name, node in detached.items() if node not in made_from_roots | late}
        for name, node in detached.items():
            out.append(
                Diagnostic(
                    code="detached_branch",
                    severity="info",
                    message=f"'{name}' is not connected to what backward was called on: no gradient reaches it",
                    node=node,
                    tensor=name,
                )
            )
        for name, t in env.items():
            fn = t.grad_fn
            if fn is not None and name not in retained and node_ids.get(fn) not in roots:
                out.append(
                    Diagnostic(
                        code="grad_not_retained",
                        severity="info",
                        message=f"'{name}' is an intermediate tensor: its .grad is None unless "
                        "retain_grad is asked for it",
                        tensor=name,
                    )
                )
    for text in dict.fromkeys(done.warnings):  # each distinct warning once, in order
        code = "hook_on_outputs_only" if "no inputs require gradients" in text else "torch_warning"
        if code == "hook_on_outputs_only" and already_found:
            continue  # already reported, naming the module
        out.append(Diagnostic(code=code, severity="warning", message=text))
    return out


def cleared_grads(events: Sequence[Any], cleared: Mapping[str, str | None]) -> list[Diagnostic]:
    """Leaves that were written a gradient, yet whose ``.grad`` is None when the trace ends:
    a hook (or the model) set it back to None, as an optimizer stepped and zeroed in a
    post-accumulate-grad hook does. ``cleared``: the leaves whose final ``.grad`` is None,
    by name, with their tensor node. Their None in ``grads`` is PyTorch's final ``.grad``, not
    "no gradient": this diagnostic says so, and their ``grad_write`` events hold what was
    written. Leaves a ``zero_grad`` event names are left out: that event says it."""
    written = {e.target for e in events if e.kind == "grad_write" and e.payload.after is not None}
    # (a zero_grad event already says who cleared them: a program's optimizer.zero_grad())
    told = {name for e in events if e.kind == "zero_grad" for name in e.payload.tensors}
    names = [
        name for name, node in cleared.items() if node is not None and node in written and name not in told
    ]
    if not names:
        return []
    return [
        Diagnostic(
            code="grad_cleared",
            severity="info",
            message=f"{', '.join(names)}: got a gradient (see the grad_write events), then .grad was set back "
            "to None before the trace ended (a hook or the model cleared it, as an optimizer stepped and "
            "zeroed in a post-accumulate-grad hook does): their None in grads is that final .grad, "
            "not 'no gradient'",
        )
    ]


def wrapped_values(
    nodes: Sequence[Any], events: Sequence[Any], wrapped: Mapping[int, tuple[TensorValue, str]]
) -> list[Diagnostic]:
    """One diagnostic per node or module whose values in the trace are torch.func wrapper
    tensors read from what they wrap (``Summarizer.wrapped``), naming it and how it was
    wrapped: inside ``vmap`` a value is the whole batch its lane belongs to."""
    if not wrapped:
        return []
    places: dict[tuple[str | None, str | None], str] = {}  # (node, module) -> how

    def note(value: Any, node: str | None, module: str | None) -> None:
        if isinstance(value, list | tuple):
            for item in value:
                note(item, node, module)
        elif isinstance(value, TensorValue) and id(value) in wrapped:
            places.setdefault((node, module), wrapped[id(value)][1])

    for record in nodes:
        note([record.value, *(s.value for s in record.saved)], record.id, None)
    for event in events:
        for _key, item in payload_items(event.payload):
            note(item, event.node, None if event.node is not None else event.module)
    out = []
    for (node, module), how in places.items():
        where = f"node {node}" if node is not None else (f"module '{module}'" if module else "the model")
        out.append(
            Diagnostic(
                code="functorch_value",
                severity="info",
                message=f"{where} ran inside torch.func ({how}): its tensors there are wrappers without "
                "storage of their own, read from the tensors they wrap"
                + (" (a vmap lane's value is shown as its whole batch)" if "vmap" in how else ""),
                node=node,
                module=module,
            )
        )
    return out


def compiled_modules(
    module_types: Mapping[str, tuple[str, str | None, list[str]]],
    dynamo_frames: tuple[int, int] | None = None,
) -> list[Diagnostic]:
    """An info diagnostic for each module compiled by torch.compile (its insides are unseen),
    and one that says so when Dynamo compiled anew during the trace, or could not compile and
    ran eager code instead (``dynamo_frames``: the frames Dynamo was asked to compile during
    the trace, and those it compiled; see ForwardCapture.hooks_installed)."""
    out = [
        Diagnostic(
            code="compiled_module",
            severity="info",
            message=f"module '{path}' is compiled by torch.compile: what runs inside it runs as compiled "
            "code, which gradtrace does not see (no events of its submodules; its nodes are the "
            "ones the compiled code made, e.g. one CompiledFunctionBackward)",
            module=path,
        )
        for path, (kind, _parent, _params) in module_types.items()
        if kind == "OptimizedModule"
    ]
    total, compiled = dynamo_frames or (0, 0)
    if compiled:
        out.append(
            Diagnostic(
                code="compiled_during_trace",
                severity="info",
                message=f"torch.compile compiled {compiled} new graph(s) during the trace (a module compiled "
                "for the first time, or a guard of its compiled code failed, e.g. a new input shape), as "
                "the same call would without gradtrace",
            )
        )
    if total > compiled:
        out.append(
            Diagnostic(
                code="compiled_fell_back",
                severity="warning",
                message=f"torch.compile could not compile {total - compiled} call(s) during the trace (e.g. "
                "past Dynamo's recompile limit): they ran as eager code, not as the compiled module, and "
                "the trace shows the nodes that eager code made",
            )
        )
    return out


class Diagnostics(Analysis):
    """The analysis: it observes nothing while the passes run (the capture's own notes are in
    ``out.diagnostics`` already) and adds, after them, what the finished graph, events and
    values show, after those notes."""

    def add(self, done: Finished, out: Analyses) -> None:
        diagnostics = out.diagnostics
        found = any(d.code == "hook_on_outputs_only" for d in diagnostics)
        diagnostics += diagnose(done, found)
        diagnostics += wrapped_values(done.nodes, done.events, done.wrapped)
        diagnostics += compiled_modules(done.module_types, done.dynamo_frames)
        diagnostics += cleared_grads(done.events, done.cleared)
