"""Recording a backward pass in the engine's real order.

A pre-hook and a post-hook on every known autograd node for the duration of one backward (or
autograd.grad) call, registered in bulk and every one removed when the call ends, however it
ends (``node_hook_sets.hooks_on``: never leave a hook behind). The gradient along each edge
is the target's ``grad_inputs[slot]`` (``grad_inputs[k]`` goes to ``next_functions[k]``): the
node's ``node_post`` event holds them, the recorder gives the edges their gradients from it
after the pass.

``.grad`` writes are recorded where they happen, inside the leaf's AccumulateGrad node (the
value "before" is read in its pre-hook). Nothing runs between the write and the node's
post-hooks but the leaf's post-accumulate-grad hooks, so a leaf without any gets its
``grad_write`` from the node's recording post-hook. A leaf that has some (the model's, a spec's)
gets a recording post-accumulate hook put first among them, in the node's pre-hook (just
before the write: whatever was registered until then is seen), kept until the trace ends.

A ``retain_grad()`` intermediate gets its ``.grad`` from the producing node's retains-grad hook,
which the engine runs after the tensor hooks and just before the node's pre-hooks: so its
``grad_write`` (targeting the op node that carries the tensor) is emitted first thing in that
node's pre-hook, when ``.grad`` really changed.

Why every node keeps its own pre-hook (a second hook per node to make, register, have the
engine call and remove, whatever its body does): between a node's pre and post hooks PyTorch
runs the node itself, and that is where a Python Function's backward (user code, nested engine
runs, a module's full backward hooks), a saved-tensor unpack hook (non-reentrant checkpoint
recomputation) and an AccumulateGrad's write with the post-accumulate hooks happen, and where
a node raises (a freed or modified saved tensor): the ``error`` event names the node whose pre
fired without its post. Emitting ``node_pre`` from the post hook would misplace or lose those.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, cast

import torch
from torch.autograd.function import BackwardCFunction
from torch.utils.hooks import RemovableHandle

from gradtrace.engine.graph_walk import walk_new
from gradtrace.engine.node_hook_sets import NodeDictSeen, hooks_on
from gradtrace.engine.recorder import Recorder
from gradtrace.trace_schema import (
    GradWritePayload,
    NodePostPayload,
    NodePrePayload,
    TensorValue,
)


def _leaf_bound(grad: torch.Tensor | None) -> torch.Tensor | None:
    """What to summarize of a gradient on its way to a leaf's AccumulateGrad: a detached
    alias (same memory, same version: the same record). The engine lets AccumulateGrad take
    the gradient itself as ``.grad`` only when nobody else holds it; the summarizer keeps what
    it is given, so given the engine's tensor it would make PyTorch copy it into a new
    ``.grad``, which then needs a snapshot of its own. (The producer's alias is handed on to
    the AccumulateGrad's hooks: see ``_AccumulateHooks.hand_over``.)"""
    return None if grad is None else grad.detach()


def _tripping(rec: Recorder, hook: Callable[..., None]) -> Callable[..., None]:
    """``hook`` in a fail-safe capture (see Recorder.trip): what it raises trips the capture,
    and the engine goes on as without it (a recording hook returns nothing: the gradients
    are unchanged)."""

    def tripping(*args: Any) -> None:
        try:
            hook(*args)
        except Exception as exc:
            if not rec.trip(exc):
                raise

    return tripping


class _NodeHooks:
    """The recording pre and post hooks of one node, registered as bound methods. They run
    once per node per pass (~1,000 calls in a 500-node backward) and are made for every node
    of every pass: what they read is bound here, in as few objects as it takes (the object
    and its two methods; closures over a dozen cells cost twice as much to make and free).
    The events both kinds of node record: ``node_pre`` with the summaries of the gradients
    arriving, ``node_post`` with those of the gradients sent on."""

    __slots__ = ("capture", "node_id", "module", "outputs")

    def __init__(self, capture: BackwardCapture, node_id: str, module: str | None) -> None:
        self.capture = capture
        self.node_id = node_id
        self.module = module
        # node_pre's summaries, shown again by node_post (one value, not a list: a node's pre
        # and post alternate, a node runs once per engine run)
        self.outputs: list[Any] | None = None

    def _summaries(self, grad_outputs: tuple) -> list[Any]:
        """The summaries of the gradients arriving at the node."""
        return list(map(self.capture.summarize, grad_outputs))

    def _emit_pre(self, grad_outputs: tuple) -> list[Any]:
        """The node starts: its ``node_pre`` event; the summaries it holds, returned."""
        rec = self.capture.recorder
        node_id = self.node_id
        rec.node_started(node_id)
        summaries = self.outputs = self._summaries(grad_outputs)
        rec.emit(
            "node_pre",
            target=node_id,
            node=node_id,
            module=self.module,
            payload=NodePrePayload(grad_outputs=summaries),
        )
        return summaries

    def _emit_post(self, inputs: list[TensorValue | None], grad_outputs: tuple) -> None:
        """Its ``node_post`` event, with the summaries of ``grad_inputs`` made by the caller."""
        # the engine hands post the same grad_outputs as pre: those summaries again
        outputs = self.outputs
        if outputs is None:
            outputs = self._summaries(grad_outputs)
        else:
            self.outputs = None
        node_id = self.node_id
        self.capture.recorder.emit(
            "node_post",
            target=node_id,
            node=node_id,
            module=self.module,
            payload=NodePostPayload(grad_inputs=inputs, grad_outputs=list(outputs)),
        )


class _OpHooks(_NodeHooks):
    """The hooks of an op node: its gradients go along data edges (to a leaf's AccumulateGrad
    too); it may be watched (an analysis wants the gradient arriving there), a retain_grad
    carrier, a Python Function."""

    __slots__ = ("watched", "make_mode", "retained", "mode", "slots", "to_leaf")

    def __init__(
        self,
        capture: BackwardCapture,
        node_id: str,
        module: str | None,
        watched: bool,
        make_mode: Callable[[], Any] | None,
        retained: Sequence,
    ) -> None:
        super().__init__(capture, node_id, module)
        self.watched = watched
        self.make_mode = make_mode
        self.retained = retained
        self.mode: Any = None  # the mode entered in pre, left in post
        # per grad_inputs slot (made by the first post, for ``slots`` of them): the hooks of
        # the leaf's AccumulateGrad it feeds (None: no slot feeds one)
        self.slots = 0
        self.to_leaf: list[_AccumulateHooks | None] | None = None

    def pre(self, grad_outputs: tuple) -> None:
        capture = self.capture
        if self.retained:
            capture._retained_writes(self.node_id, self.retained)
        summaries = self._emit_pre(grad_outputs)
        if self.watched:
            capture._keep_deltas(self.node_id, grad_outputs, summaries)
        if self.make_mode is not None:
            mode = self.mode = self.make_mode()
            mode.__enter__()

    def post(self, grad_inputs: tuple, grad_outputs: tuple) -> None:
        mode = self.mode
        if mode is not None:
            self.mode = None
            mode.__exit__(None, None, None)
        capture = self.capture
        rec = capture.recorder
        node_id = self.node_id
        rec.node_finished(node_id)
        if self.slots < len(grad_inputs):
            self.slots = len(grad_inputs)
            self.to_leaf = capture._to_leaf(node_id, len(grad_inputs))
        summarize = capture.summarize
        to_leaf = self.to_leaf
        inputs: list[TensorValue | None]
        if to_leaf is None:
            inputs = list(map(summarize, grad_inputs))
        else:
            inputs = [
                summarize(g if leaf is None or g is None else leaf.hand_over(g))
                for g, leaf in zip(grad_inputs, to_leaf, strict=False)
            ]
        self._emit_post(inputs, grad_outputs)


class _AccumulateHooks(_NodeHooks):
    """The hooks of a leaf's AccumulateGrad node: no edges out (its grad_inputs are empty),
    never watched nor a retain_grad carrier; it writes ``.grad``."""

    __slots__ = ("leaf_id", "leaf", "handed")

    def __init__(
        self, capture: BackwardCapture, node_id: str, leaf_id: str, leaf: torch.Tensor, module: str | None
    ) -> None:
        super().__init__(capture, node_id, module)
        self.leaf_id = leaf_id
        self.leaf = leaf
        # the gradient a producer's post handed on last (see hand_over): a weak reference to
        # the engine's tensor, its version and address then, and the alias it summarized
        self.handed: tuple[weakref.ref[torch.Tensor], int, int, torch.Tensor] | None = None

    def hand_over(self, grad: torch.Tensor) -> torch.Tensor:
        """What a producer's post summarizes of a gradient it sends here (see _leaf_bound),
        remembered for this node's pre: the engine usually hands it the very same tensor,
        whose summary is then that alias's (the Summarizer's by-object path) instead of one
        of yet another alias. Only a weak reference to the engine's tensor is kept, so that
        AccumulateGrad may still take it as ``.grad``."""
        alias = grad.detach()
        # (a sparse gradient has no address, nor a torch.func wrapper inside jacrev's
        # backward: never handed over)
        self.handed = None
        if grad.layout is torch.strided:
            try:
                self.handed = (weakref.ref(grad), grad._version, grad.data_ptr(), alias)
            except RuntimeError:
                pass
        return alias

    def _arrived(self, grad: torch.Tensor | None) -> torch.Tensor | None:
        """What to summarize of the gradient the engine hands this node: the alias handed
        over with it when it is that very tensor, unchanged since (not a sum of several
        producers' gradients, nor replaced or changed by a tensor hook: an in-place op bumps
        the version, one that changes the shape too; assigning ``.data`` does not, but moves
        the address)."""
        handed = self.handed
        if (
            handed is not None
            and handed[0]() is grad
            and grad is not None
            and handed[1] == grad._version
            and handed[2] == grad.data_ptr()
        ):
            return handed[3]
        return _leaf_bound(grad)

    def _summaries(self, grad_outputs: tuple) -> list[Any]:
        return list(map(self.capture.summarize, map(self._arrived, grad_outputs)))  # (see _leaf_bound)

    def pre(self, grad_outputs: tuple) -> None:
        capture = self.capture
        self._emit_pre(grad_outputs)
        leaf = self.leaf
        grad = leaf.grad
        capture._before[self.leaf_id] = None if grad is None else capture.summarize(grad)
        hooks = leaf._post_accumulate_grad_hooks
        if hooks and id(leaf) not in capture._acc_hooked:
            capture._hook_writes_first(leaf, cast("OrderedDict[int, Any]", hooks))

    def post(self, grad_inputs: tuple, grad_outputs: tuple) -> None:
        capture = self.capture
        capture.recorder.node_finished(self.node_id)
        leaf = self.leaf
        # (AccumulateGrad skips an undefined gradient and a leaf that stopped requiring grad)
        if grad_outputs[0] is not None and leaf.requires_grad and id(leaf) not in capture._acc_hooked:
            capture._record_write(leaf, self.leaf_id, self.module)  # the write just happened
        self._emit_post(list(map(capture.summarize, grad_inputs)), grad_outputs)


class BackwardCapture:
    def __init__(self, recorder: Recorder, watch: set[str]) -> None:
        self.recorder = recorder
        self.summarize = recorder.summarize
        self.watch = watch  # node ids whose incoming gradient (δ) the analyses need
        # per pass: node id -> per run of the node, its grad_outputs as (copy, summary) pairs
        # (the summary made in node_pre: the analyses show it again instead of summarizing the copy)
        self.deltas: dict[int, dict[str, list[tuple]]] = {}
        self._before: dict[str, Any] = {}  # leaf node id -> .grad summary before the write
        self._acc_hooked: set[int] = set()  # id(leaf tensor) with a recording post-acc hook
        # removes those when the trace ends (the session enters it for the trace's lifetime)
        self.grad_write_hooks = ExitStack()
        self._hooked: set[str] = set()  # node ids with recording hooks on (nested runs add)
        # the AccumulateGrad nodes hooked in this top-level run so far, with their hooks (every
        # node's sources were discovered, and so hooked, no later than the node itself)
        self._accumulate_hooks: dict[str, _AccumulateHooks] = {}
        # makes the mode to enter while a Python Function's backward runs (its torch calls
        # are seen: a reentrant checkpoint recomputes its segment and runs the engine there)
        self.python_node_mode: Callable[[], Any] | None = None
        # shown the hook dicts of nodes that have hooks of their own (see hooks_on): the
        # model's node hooks are wrapped there (ModelHooks.node_hooks_seen; the library only)
        self.node_dict_seen: NodeDictSeen | None = None

    # ---- .grad writes -------------------------------------------------------------------
    def _grad_write(self, leaf: torch.Tensor) -> None:
        """The recording post-accumulate hook (see ``_hook_writes_first``)."""
        rec = self.recorder
        leaf_id = rec.leaf_id(leaf)
        if leaf_id is not None and rec.phase == "backward":
            self._record_write(leaf, leaf_id, rec.by_id[leaf_id].module)

    def _record_write(self, leaf: torch.Tensor, leaf_id: str, module: str | None) -> None:
        before = self._before.pop(leaf_id, None)
        self.recorder.emit(
            "grad_write",
            target=leaf_id,
            node=leaf_id,
            module=module,
            payload=GradWritePayload(
                before=before,
                after=self.recorder.summarize(leaf.grad),
                accumulated=before is not None,
            ),
        )

    def _retained_by_node(self, retained: dict[str, torch.Tensor]) -> dict[str, list]:
        """node id -> [(tensor, its .grad and version now, summary)] for retain_grad tensors."""
        rec = self.recorder
        out: dict[str, list] = {}
        for tensor in retained.values():
            node_id = rec.node_ids.get(tensor.grad_fn)
            if node_id is not None:
                grad = tensor.grad
                state = (grad, None if grad is None else grad._version)
                summary = None if grad is None else rec.summarize(grad)
                out.setdefault(node_id, []).append((tensor, state, summary))
        return out

    def _retained_writes(self, node_id: str, watched: Sequence) -> None:
        rec = self.recorder
        for tensor, (old, version), before in watched:
            grad = tensor.grad
            if grad is None or (grad is old and grad._version == version):
                continue  # this run of the node wrote nothing (e.g. autograd.grad)
            rec.emit(
                "grad_write",
                target=node_id,
                node=node_id,
                module=rec.by_id[node_id].module,
                payload=GradWritePayload(
                    before=before, after=rec.summarize(grad), accumulated=before is not None
                ),
            )

    def _hook_writes_first(self, leaf: torch.Tensor, hooks: OrderedDict[int, Any]) -> None:
        """A recording hook first among the leaf's own post-accumulate hooks (they may change
        ``.grad``; the write happened before them all). Put into the leaf's hook dict as
        ``register_post_accumulate_grad_hook`` would, without calling it: inside a Python
        Function's backward that call would be seen as the model registering a hook.
        PyTorch runs the hooks in the dict's insertion order (``move_to_end`` does not change
        it): the others are inserted again after it, in the same dict (PyTorch holds it)."""
        self._acc_hooked.add(id(leaf))
        handle = RemovableHandle(hooks)
        others = list(hooks.items())
        hooks.clear()
        hooks[handle.id] = (
            _tripping(self.recorder, self._grad_write) if self.recorder.fail_safe else self._grad_write
        )
        hooks.update(others)
        self.grad_write_hooks.callback(handle.remove)

    # ---- node hooks ---------------------------------------------------------------------
    def _hooks_of(
        self, nodes: list[tuple[str, Any]], retained_at: dict[str, list]
    ) -> Iterator[tuple[Any, Callable, Callable]]:
        """Each of ``nodes`` (id, autograd node) with its recording pre and post hooks."""
        by_id = self.recorder.by_id
        watch = self.watch
        for node_id, node in nodes:
            record = by_id[node_id]
            hooks: _OpHooks | _AccumulateHooks
            if record.variable is not None:  # an AccumulateGrad node: its leaf's tensor node
                hooks = _AccumulateHooks(self, node_id, record.variable, node.variable, record.module)
                self._accumulate_hooks[node_id] = hooks
            else:
                make_mode = self.python_node_mode if isinstance(node, BackwardCFunction) else None
                retained = retained_at.get(node_id, ())
                hooks = _OpHooks(self, node_id, record.module, node_id in watch, make_mode, retained)
            if self.recorder.fail_safe:
                yield node, _tripping(self.recorder, hooks.pre), _tripping(self.recorder, hooks.post)
            else:
                yield node, hooks.pre, hooks.post

    def _to_leaf(self, node_id: str, count: int) -> list[_AccumulateHooks | None] | None:
        """Per slot of a node's grad_inputs: the hooks of the leaf's AccumulateGrad its data
        edge feeds, if it does (None: no slot does)."""
        edge_at = self.recorder.edge_at
        accumulate = self._accumulate_hooks
        edges = [edge_at.get((node_id, slot)) for slot in range(count)]
        to_leaf = [None if edge is None else accumulate.get(edge.source) for edge in edges]
        return to_leaf if any(to_leaf) else None  # (hooks objects are true)

    def _keep_deltas(self, node_id: str, grad_outputs: tuple, summaries: list) -> None:
        """A copy of the gradient arriving at a watched node (a kept module call's output):
        the analyses' δ. A nested run (checkpoint recomputation) adds to its top-level pass's .grad."""
        pass_deltas = self.deltas.setdefault(self.recorder.outermost_pass(), {})
        pass_deltas.setdefault(node_id, []).append(
            tuple(
                (None if g is None else g.detach().clone(), summary)
                for g, summary in zip(grad_outputs, summaries, strict=True)
            )
        )

    @contextmanager
    def node_hooks(self, retained: dict[str, torch.Tensor] | None = None, roots: list[Any] | None = None):
        """Pre and post hooks on every known autograd node not hooked yet, removed on exit
        (an engine run nested in another hooks the nodes found since the outer one began).
        ``roots``: the nodes a top-level run starts from, when only the known nodes reachable
        from them are to be hooked (a program's later passes: the graphs of its earlier
        iterations are known too, and the engine cannot run them)."""
        rec = self.recorder
        retained_at = self._retained_by_node(retained or {})
        depth = rec.engine_depth()
        hooked = self._hooked
        nested = bool(hooked)  # (a top-level run hooks every known node, none is hooked yet)
        if nested:
            mine = [(i, n) for i, n in rec.node_objects.items() if i not in hooked]
            hooked.update(i for i, _n in mine)
        elif roots is not None:
            ids = rec.node_ids
            reach = [(ids[n], n) for n in walk_new(roots, {}) if n in ids]
            mine = sorted(reach, key=lambda pair: int(pair[0][1:]))  # (discovery order, n0 n1 …)
            hooked.update(i for i, _n in mine)
        else:
            mine = list(rec.node_objects.items())
            hooked.update(rec.node_objects)
        try:
            with hooks_on(self._hooks_of(mine, retained_at), self.node_dict_seen):
                yield
        finally:
            if nested:
                hooked.difference_update(i for i, _n in mine)
            else:  # (the nested runs inside it have taken theirs off again)
                hooked.clear()
                # (they point back at this capture: no cycle left behind; the next pass
                # makes hooks for every node again)
                self._accumulate_hooks.clear()
            # an exception may leave this run's nodes open: the recorder notes the failed one
            rec.engine_run_ended(depth)
