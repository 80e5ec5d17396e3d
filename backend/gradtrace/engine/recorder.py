"""The event log and the graph under construction: ids, nodes, edges, events, passes.

One Recorder per trace. Ids come from per-trace counters (``n0…`` in discovery order,
``e0…``), never from ``id()``; the Recorder holds a reference to every autograd node and leaf
it named until the trace is serialised, so Python cannot reuse an address meanwhile.
The records are trace_schema's own (GraphNode, GraphEdge, Event, Pass): what the trace holds.

When they are built: an event is logged in the pass as one plain entry (``emit``); its Event
record, and the gradients each ``node_post`` sent along its data edges (the edges' ``grads``),
are built after the pass (at the end of each top-level pass, or when ``events`` or ``edges`` is
read: a reader inside a pass). The nodes and edges themselves are made as the pass finds them:
the pass reads and completes them itself (a node's module, name, ``grad_fn``; the edge at a
slot), so a plain entry would have to be a mutable object with the record's fields, and a
msgspec record is the cheapest such object (a GraphNode ~0.2 us to make, a slotted Python class
~2 us, a tuple of the same fields ~0.15 us and immutable): a second object per node, for no
saving.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gradtrace.engine.errors import TraceError
from gradtrace.engine.graph_walk import (
    creation_sorted,
    is_accumulate_grad,
    is_one_op_class,
    next_nodes,
    op_name,
    raw_sequence_nr,
)
from gradtrace.engine.saved_attributes import FUNCTION_SAVED, SavedVariable, saved_plan
from gradtrace.engine.summarize import Summarizer, dtype_name
from gradtrace.trace_schema import (
    EdgeGrad,
    EdgeKind,
    Event,
    EventKind,
    EventPayload,
    GraphEdge,
    GraphNode,
    NoPayload,
    Pass,
    Phase,
    SavedTensor,
)


def _plain(value: Any) -> Any:
    """A saved non-tensor value as JSON: ints (SymInts too), floats, lists, else its str."""
    if type(value) is int or type(value) is bool or value is None:  # (most: sizes, flags)
        return value
    # (a tuple of types, not `tuple | list`: that builds a union object at every call)
    if isinstance(value, (tuple, list)):
        return _plain_list(value)
    if isinstance(value, (int, float)):
        return value if not isinstance(value, float) or value == value else "NaN"
    if isinstance(value, torch.SymInt):
        return int(value)
    return str(value)


def _plain_list(value: tuple | list) -> list[Any]:
    """A saved tuple or list as JSON (see _plain)."""
    plain = list(value)  # (sizes and strides: ints, as they are)
    for item in plain:  # (a loop: no generator made for the usual two or three items)
        if type(item) is not int:
            return [_plain(v) for v in plain]
    return plain


def owning_module(name: str | None) -> str | None:
    """The module path a parameter's name belongs to ("layers.0.weight" -> "layers.0",
    "models[0].fc.weight" -> "models[0].fc"); None for a name with no module (a model input,
    a top-level parameter, a container's member: ``params["fc1.weight"]``, ``hidden[0]``)."""
    head, _, tail = (name or "").rpartition(".")
    return head if head and "]" not in tail else None


_TENSOR = torch.Tensor  # (read once: a module attribute lookup less per saved value)
_HOOK_NODE = "BackwardHookFunctionBackward"  # what a module's full backward hook inserts
_HOOK_PACKED = "packed by a saved_tensors_hooks pack hook: not read (unpacking runs the hook)"
_NO_PAYLOAD = NoPayload()  # (no fields: one record shared by every event with nothing to say)


def _unpacking_runs_a_hook(raw: Any) -> bool:
    """Whether reading a saved value whose raw SavedVariable(s) are ``raw`` would run a
    saved-tensor unpack hook: user code, e.g. a non-reentrant checkpoint recomputing its
    segment (its module hooks firing once more)."""
    if type(raw) is SavedVariable:  # (the usual: one saved tensor)
        return raw.unpack_hook is not None  # type: ignore[attr-defined]
    if isinstance(raw, (tuple, list)):
        return any(getattr(item, "unpack_hook", None) is not None for item in raw)
    return getattr(raw, "unpack_hook", None) is not None


class _OpClass:
    """What every autograd node of one class has in common, decided on first sight: a C++
    node class is one op (a custom Function's backward class is generated per Function)."""

    __slots__ = ("name", "accumulate", "inserted", "saved")

    def __init__(self, node: Any) -> None:
        self.name = op_name(node)
        self.accumulate = is_accumulate_grad(node)  # (a leaf's node)
        self.inserted = self.name == _HOOK_NODE
        # its saved attributes, each with its raw SavedVariable's attribute (or None)
        self.saved = tuple(saved_plan(node).items())


_OP_CLASSES: dict[type, _OpClass] = {}


def _op_class(node: Any) -> _OpClass:
    """The facts of a node class seen for the first time (the hot path reads _OP_CLASSES),
    or of a node of PyTorch's catch-all class (its facts are its own: never kept)."""
    facts = _OpClass(node)
    if is_one_op_class(type(node)):
        _OP_CLASSES[type(node)] = facts
    return facts


class Recorder:
    def __init__(
        self,
        summarize: Summarizer,
        sequence_base: int,
        max_nodes: int,
        on_saved: Callable[[str, Any, int, list[tuple[str, torch.Tensor]]], None] | None = None,
    ) -> None:
        """``on_saved``: called with (node id, node, its creation event's seq, [(attribute,
        tensor)]) for every node that saved tensors (what an analysis of saved memory reads)."""
        # the Summarizer's bound __call__, not the Summarizer: calling an instance looks up
        # type(obj).__call__ at every call (a trace makes thousands, here and in the
        # captures that take it from the recorder)
        self.summarize = summarize.__call__
        self.forget = summarize.forget  # (a tensor written behind its version: see Summarizer)
        self.sequence_base = sequence_base
        self.max_nodes = max_nodes
        self.nodes: list[GraphNode] = []
        self._edges: list[GraphEdge] = []  # (their grads built with the events: see edges)
        # the passes' events, one plain entry each (see emit): their records are built after
        # the passes (see events)
        self._log: list[tuple] = []
        self._events: list[Event] = []  # the records of the log's first entries
        self.passes: list[Pass] = []
        self.node_ids: dict[Any, str] = {}  # autograd node -> id (holds the node alive)
        self.node_objects: dict[str, Any] = {}  # id -> autograd node
        self.by_id: dict[str, GraphNode] = {}
        self._leaf_ids: dict[int, tuple[torch.Tensor, str]] = {}  # id(tensor) -> (tensor, node id)
        self.leaf_names: dict[int, tuple[torch.Tensor, str]] = {}  # id(tensor) -> (tensor, name)
        # a program (``record()``): the name of a leaf leaf_names does not know, or None
        self.name_of: Callable[[torch.Tensor], str | None] | None = None
        # unnamed leaves the program computed without autograd: id(tensor) -> (tensor, its source text)
        self.leaf_labels: dict[int, tuple[torch.Tensor, str]] = {}
        self.edge_at: dict[tuple[str, int], GraphEdge] = {}  # (target, slot) -> data edge
        self.no_grad_edges: set[tuple[str, str]] = set()
        # the transitions below are the only writers of these three
        self._module_stack: list[str] = []  # forward: the modules running, innermost last
        self._active_nodes: list[str] = []  # backward: the nodes whose pre fired, post not yet
        self._failed_node: str | None = None  # the node running when a backward raised
        self.pass_index = -1
        self.phase: Phase = "forward"
        self.in_pass = False
        self.on_saved = on_saved
        self._open: list[tuple[int, Phase, bool]] = []  # the passes a nested pass interrupted
        # A fail-safe capture (``gradtrace.watch``'s step: the training must run as without
        # it) keeps what its own recording raised as ``failure`` instead of raising it into
        # the program; from then on it records nothing (see ``trip``)
        self.fail_safe = False
        self.failure: Exception | None = None
        # nothing more is recorded (a failure, or the step capture past its backward): the
        # discovery mode lets every call through, the hooks return at once
        self.stopped = False

    def trip(self, exc: Exception) -> bool:
        """gradtrace's own recording raised ``exc``: in a fail-safe capture it is kept (the
        first one), the capture stops recording (the discovery mode lets every call through,
        the hooks return at once) and this returns True; elsewhere False, for the caller to
        raise it as it is. Called from an ``except`` block, the one way every recording hook
        handles what it raised: ``except Exception as exc: if not rec.trip(exc): raise``."""
        if not self.fail_safe:
            return False
        if self.failure is None:
            self.failure = exc
        self.stopped = True
        return True

    # ---- passes and events -------------------------------------------------------------
    def begin_pass(self, phase: Phase, label: str, step: int | None) -> None:
        """Open a pass; a pass opened while another is open is nested in it (an engine run
        inside a forward or inside a backward: ``parent`` names the enclosing pass)."""
        parent = self.pass_index if self.in_pass else None
        if parent is None:
            self._failed_node = None  # a failure not reported by now belongs to nothing here
        self._open.append((self.pass_index, self.phase, self.in_pass))
        self.pass_index = len(self.passes)
        self.phase = phase
        self.in_pass = True
        self.passes.append(
            Pass(
                index=self.pass_index,
                phase=phase,
                label=label,
                step=step,
                parent=parent,
                first_seq=len(self._log),
                last_seq=-1,
            )
        )
        self.emit("pass_start", message=label)

    def outermost_pass(self) -> int:
        """The top-level pass a nested pass runs in (itself when not nested)."""
        return self._open[1][0] if len(self._open) > 1 else self.pass_index

    def end_pass(self) -> None:
        """Close the innermost open pass; the enclosing one (if any) is current again."""
        current = self.passes[self.pass_index]
        self.emit("pass_end", message=current.label)
        current.last_seq = len(self._log) - 1
        enclosing = self._open.pop()
        if enclosing[2]:
            self.pass_index, self.phase, self.in_pass = enclosing
        else:  # a top-level pass: its index and phase stay current until the next one
            self.in_pass = False
            self._build_events()

    def emit(
        self,
        kind: EventKind,
        *,
        target: str | None = None,
        node: str | None = None,
        module: str | None = None,
        hook: int | None = None,
        message: str | None = None,
        payload: EventPayload = _NO_PAYLOAD,
    ) -> int:
        """Log an event (a plain entry: its record is built after the pass, see ``events``);
        its seq."""
        log = self._log
        seq = len(log)
        log.append((self.pass_index, self.phase, kind, target, node, module, hook, message, payload))
        return seq

    def next_seq(self) -> int:
        """The seq the next event will get (how many were emitted)."""
        return len(self._log)

    @property
    def events(self) -> list[Event]:
        """The events emitted so far, as records: built at the end of every top-level pass,
        and here for any logged since (a reader inside a pass, an event outside any)."""
        if len(self._events) < len(self._log):
            self._build_events()
        return self._events

    @property
    def edges(self) -> list[GraphEdge]:
        """The graph's edges, with the gradients sent along them so far (see events)."""
        if len(self._events) < len(self._log):
            self._build_events()
        return self._edges

    def _build_events(self) -> None:
        """The records of the log's entries that have none yet (the same list grows: a
        reader holding it sees every event built since), and the gradients their
        ``node_post`` entries sent: ``grad_inputs[slot]`` went along the data edge at that
        slot (an EdgeGrad of the edge, in the order the engine sent them)."""
        events = self._events
        done = len(events)
        entries = self._log[done:]
        events.extend(
            Event(
                seq=seq,
                pass_index=pass_index,
                phase=phase,
                kind=kind,
                target=target,
                node=node,
                module=module,
                hook=hook,
                message=message,
                # the payload record where a loaded trace has its plain data (see Event)
                payload=payload,
            )
            for seq, (pass_index, phase, kind, target, node, module, hook, message, payload) in enumerate(
                entries, done
            )
        )
        edge_at = self.edge_at
        for seq, entry in enumerate(entries, done):
            if entry[2] == "node_post":
                node = entry[4]
                for slot, value in enumerate(entry[8].grad_inputs):
                    edge = edge_at.get((node, slot))
                    if edge is not None:
                        edge.grads.append(EdgeGrad(pass_index=entry[0], seq=seq, value=value))

    def summaries(self, values: Any) -> list[Any]:
        """A hook's arguments or result as a list of TensorValue|None (one per item)."""
        if isinstance(values, torch.Tensor) or values is None:
            values = (values,)
        return [self.summarize(v) for v in values]

    def running_node(self) -> str | None:
        """The autograd node the engine is running now (backward hooks fire inside one)."""
        return self._active_nodes[-1] if self._active_nodes and self.phase == "backward" else None

    def tensor_node(self, tensor: torch.Tensor) -> str | None:
        """The graph node of a tensor: its leaf node, or the op that produced it."""
        if tensor.grad_fn is not None:
            return self.node_ids.get(tensor.grad_fn)
        return self.leaf_id(tensor)

    def known_leaves(self) -> list[tuple[torch.Tensor, str]]:
        """Every leaf tensor that has a node, with its node id, in discovery order."""
        return list(self._leaf_ids.values())

    def leaf_id(self, tensor: torch.Tensor) -> str | None:
        """The tensor node of this very leaf, if it has one (``id()`` checked by identity)."""
        known = self._leaf_ids.get(id(tensor))
        return known[1] if known is not None and known[0] is tensor else None

    # ---- state transitions: modules running (forward), nodes running (backward) ----------
    def enter_module(self, path: str) -> None:
        self._module_stack.append(path)

    def exit_module(self, path: str) -> None:
        if self._module_stack and self._module_stack[-1] == path:
            self._module_stack.pop()

    def module_running(self) -> bool:
        """Whether a module's forward is running now."""
        return bool(self._module_stack)

    def forward_ended(self) -> None:
        """A forward is over (an exception may have left modules open)."""
        self._module_stack.clear()

    def node_started(self, node_id: str) -> None:
        self._active_nodes.append(node_id)

    def node_finished(self, node_id: str) -> None:
        if self._active_nodes and self._active_nodes[-1] == node_id:
            self._active_nodes.pop()

    def engine_depth(self) -> int:
        """How many nodes are running (a nested engine run starts inside one)."""
        return len(self._active_nodes)

    def engine_run_ended(self, depth: int) -> None:
        """An engine run started at ``depth`` is over; nodes still open there failed."""
        if len(self._active_nodes) > depth:
            self._failed_node = self._active_nodes[-1]
            del self._active_nodes[depth:]

    def take_failed_node(self) -> str | None:
        """The node that was running when a backward raised (once), for its error event."""
        node = self._failed_node if self.phase == "backward" else None
        self._failed_node = None
        return node

    # ---- nodes --------------------------------------------------------------------------
    def autograd_nodes(self) -> list[Any]:
        """Every autograd node named so far, in discovery order (each after the nodes it
        takes inputs from): what graph_walk.release_newest_first frees."""
        return list(self.node_objects.values())

    def _new_id(self) -> str:
        return f"n{len(self.nodes)}"

    def _add_node(self, obj: Any, record: GraphNode) -> None:
        """Register a new node's record (made with the id ``_new_id()`` gave and
        ``created_seq`` the seq of the next event) and emit its node_created event.
        ``obj``: the autograd node (None for a leaf tensor)."""
        node_id = record.id
        self.nodes.append(record)
        self.by_id[node_id] = record
        if obj is not None:
            self.node_ids[obj] = node_id
            self.node_objects[node_id] = obj
        self.emit("node_created", target=node_id, node=node_id, module=record.module)

    def leaf(self, tensor: torch.Tensor) -> str:
        """The tensor node of a leaf (created on first use), named after its spec/param name."""
        key = id(tensor)
        known = self._leaf_ids.get(key)
        if known is not None and known[0] is tensor:
            return known[1]
        named = self.leaf_names.get(key)
        name = named[1] if named is not None and named[0] is tensor else None
        if name is None and self.name_of is not None:
            name = self.name_of(tensor)
        module = owning_module(name)
        if name:
            label = name
        else:
            labelled = self.leaf_labels.get(key)
            label = labelled[1] if labelled is not None and labelled[0] is tensor else "tensor"
        requires_grad = tensor.requires_grad
        node_id = self._new_id()
        value = self.summarize(tensor)
        record = GraphNode(
            id=node_id,
            pass_index=self.pass_index,
            kind="tensor",
            label=label,
            tensor=name,
            role="parameter" if requires_grad else "input",
            shape=value.shape,  # (the summary's: the same list, read-only, shared)
            dtype=value.dtype,
            module=module,
            requires_grad=requires_grad,
            value=value,
            created_seq=len(self._log),
        )
        self._add_node(None, record)
        self._leaf_ids[key] = (tensor, node_id)
        return node_id

    def discover(
        self, new_nodes: dict[Any, tuple], produced: dict[Any, torch.Tensor], fresh_from: int | None = None
    ) -> None:
        """Give ids to autograd nodes not seen before, emit their node_created events.

        ``new_nodes``: each with its ``next_functions``, as graph_walk.walk_new found them.
        ``produced`` maps a node to the tensor it produced (its value), where known.
        ``fresh_from``: the nodes numbered from it on (raw ``_sequence_nr``) were made by the
        torch call that just returned, with no saved-tensor hooks on: no unpack hook can be
        on their saved tensors (none was on when they were made, and no user code ran since
        that could register one), so their saved values are read without probing for one.
        """
        if not new_nodes:
            return
        if len(self.nodes) + 2 * len(new_nodes) > self.max_nodes:
            raise TraceError(
                "too_many_nodes", f"the autograd graph has more than max_nodes={self.max_nodes} nodes"
            )
        classes = _OP_CLASSES
        for obj in creation_sorted(new_nodes):
            facts = classes.get(type(obj)) or _op_class(obj)
            if facts.accumulate:
                self._add_accumulate(obj)
            else:
                self._add_op(obj, facts, new_nodes[obj], produced.get(obj), fresh_from)

    def _add_accumulate(self, obj: Any) -> None:
        leaf_id = self.leaf(obj.variable)
        leaf = self.by_id[leaf_id]
        node_id = self._new_id()
        record = GraphNode(
            id=node_id,
            pass_index=self.pass_index,
            kind="op",
            requires_grad=True,
            label="AccumulateGrad",
            op="AccumulateGrad",
            module=leaf.module,
            variable=leaf_id,
            tensor=leaf.tensor,
            created_seq=len(self._log),
        )
        self._add_node(obj, record)
        leaf.grad_fn = node_id
        self._add_edge(leaf_id, node_id, "leaf", None, 0)

    def _add_op(
        self,
        obj: Any,
        facts: _OpClass,
        inputs: tuple,
        tensor: torch.Tensor | None,
        fresh_from: int | None,
    ) -> None:
        """An op node (``inputs``: its next_functions), its data edges from known nodes."""
        raw = raw_sequence_nr(obj)
        stack = self._module_stack
        module = stack[-1] if stack else None
        if facts.inserted:
            module = self._module_of_hook_node(obj, module)
        saved_tensors: list[tuple[str, torch.Tensor]] = []
        if facts.saved:  # (summarized before the value, as always)
            hooks_possible = fresh_from is None or raw is None or raw < fresh_from
            saved = self._saved(obj, facts.saved, saved_tensors, hooks_possible)
        else:
            saved = []
        if tensor is None:
            shape = dtype = value = None
        else:  # (its summary knows its shape and dtype: the same list, read-only, shared)
            value = self.summarize(tensor)
            shape = value.shape
            dtype = value.dtype
        node_id = self._new_id()
        seq = len(self._log)
        name = facts.name
        record = GraphNode(
            id=node_id,
            pass_index=self.pass_index,
            kind="op",
            requires_grad=True,
            label=name,
            op=name,
            role="intermediate",
            module=module,
            creation_order=None if raw is None else raw - self.sequence_base,
            inserted=facts.inserted,
            saved=saved,
            shape=shape,
            dtype=dtype,
            value=value,
            created_seq=seq,
        )
        self._add_node(obj, record)
        if saved_tensors and self.on_saved is not None:
            self.on_saved(node_id, obj, seq, saved_tensors)
        node_ids = self.node_ids
        for slot, (source, output_nr) in enumerate(inputs):
            # (None: no grad needed there; not found: never for real graphs, not walked)
            source_id = node_ids.get(source)
            if source_id is not None:
                self._add_edge(source_id, node_id, "data", slot, output_nr)

    def _module_of_hook_node(self, obj: Any, current: str | None) -> str | None:
        """The module of a BackwardHookFunctionBackward node (other ops belong to the module
        running when they were created, ``current``).

        A module's full backward hook wraps its outputs in a BackwardHookFunctionBackward
        after the module returned; that node is first seen by the caller's next op, so it
        takes the module of the output it wraps.
        """
        for _slot, source, _nr in next_nodes(obj):
            source_id = self.node_ids.get(source)
            inner = self.by_id[source_id].module if source_id else None
            if (
                inner is not None
                and inner != current
                and (current is None or current == "" or inner.startswith(current + "."))
            ):
                return inner
        return current

    def _saved(
        self,
        obj: Any,
        plan: tuple[tuple[str, str | None], ...],
        tensors: list[tuple[str, torch.Tensor]],
        hooks_possible: bool,
    ) -> list[SavedTensor]:
        """Saved tensors/values (``plan``: the node class's saved attributes, see saved_plan),
        read now: backward frees them. The tensors are also appended to ``tensors``
        as (name, tensor), for the memory they hold. ``hooks_possible``: a saved tensor may
        have an unpack hook (then it is not read: see _HOOK_PACKED)."""
        out: list[SavedTensor] = []
        summarize = self.summarize
        for attr, raw_attr in plan:
            if (
                hooks_possible
                and raw_attr is not None
                and _unpacking_runs_a_hook(getattr(obj, raw_attr, None))
            ):
                out.append(SavedTensor(name=attr, scalar=_HOOK_PACKED))
                continue
            try:
                value = getattr(obj, attr)
            except RuntimeError:  # already freed or modified in place: nothing to show
                continue
            if isinstance(value, _TENSOR):
                out.append(SavedTensor(name=attr, value=summarize(value)))
                tensors.append((attr, value))
            elif type(value) is int or type(value) is bool or value is None:  # (flags, dims)
                out.append(SavedTensor(name=attr, scalar=value))
            elif isinstance(value, (tuple, list)):  # (sizes, strides; lists of tensors)
                if value and any(isinstance(t, _TENSOR) for t in value):
                    for k, t in enumerate(value):  # (a custom Function may save None among them)
                        item = f"{attr}[{k}]"
                        if isinstance(t, _TENSOR):
                            out.append(SavedTensor(name=item, value=summarize(t)))
                            tensors.append((item, t))
                        else:
                            out.append(SavedTensor(name=item, scalar=_plain(t)))
                elif value or attr != FUNCTION_SAVED:  # (a Function that saved nothing: nothing)
                    out.append(SavedTensor(name=attr, scalar=_plain_list(value)))
            else:
                out.append(SavedTensor(name=attr, scalar=_plain(value)))
        return out

    def _add_edge(
        self, source: str, target: str, kind: EdgeKind, slot: int | None, output_nr: int
    ) -> GraphEdge:
        edge = GraphEdge(
            id=f"e{len(self._edges)}",
            source=source,
            target=target,
            kind=kind,
            slot=slot,
            output_nr=output_nr,
            requires_grad=kind != "no_grad",
        )
        self._edges.append(edge)
        if kind == "data" and slot is not None:
            self.edge_at[(target, slot)] = edge
        return edge

    def no_grad_input(self, tensor: torch.Tensor, consumer: Any) -> None:
        """A leaf that does not require grad, consumed by ``consumer``: a dashed edge."""
        target = self.node_ids.get(consumer)
        if target is None:
            return
        source = self.leaf(tensor)
        if (source, target) not in self.no_grad_edges:
            self.no_grad_edges.add((source, target))
            self._add_edge(source, target, "no_grad", None, 0)

    def mark_retains_grad(self, tensor: torch.Tensor) -> None:
        """``tensor.retain_grad()`` was called: its producing node says so."""
        node_id = self.node_ids.get(tensor.grad_fn) if tensor.grad_fn is not None else None
        if node_id is not None:
            self.by_id[node_id].retains_grad = True

    def label_leaf(self, tensor: torch.Tensor, label: str) -> None:
        """Label the leaf node ``tensor`` will get when an op consumes it (not a name)."""
        self.leaf_labels[id(tensor)] = (tensor, label)

    def name_tensor(self, name: str, tensor: torch.Tensor) -> None:
        """The program assigned ``name``: label the node that produced the tensor."""
        node_id = self.tensor_node(tensor)
        if node_id is None and tensor.grad_fn is None and not tensor.requires_grad:
            # a tensor outside autograd (a detached one): its leaf node, made when an op
            # consumes it, takes the program's name
            self.leaf_names[id(tensor)] = (tensor, name)
        if node_id is None:
            return
        record = self.by_id[node_id]
        if record.tensor is None:
            record.tensor = name
            if record.kind == "tensor":
                record.label = name
        if record.value is None and record.kind == "op":
            record.shape = list(tensor.shape)
            record.value = self.summarize(tensor)
            record.dtype = dtype_name(tensor)
