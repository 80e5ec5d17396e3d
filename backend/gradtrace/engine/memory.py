"""The graph's memory: the bytes each autograd node saved for its backward, and how many are
alive after every event (seed 001: ``backward()`` frees the graph "to save memory";
``retain_graph=True`` keeps it "at the cost of higher memory usage").

What is counted is storage, as PyTorch holds it: every tensor a node saved (read through its
``_saved_*`` attributes when the node is created, before anything is freed) keeps its whole
storage alive, and a storage that several saved tensors share (a weight and the ``weight.t()``
another node saved, a tensor two nodes saved) is counted once — once per node in
``saved_bytes``, once for the whole graph in the timeline.

A node's saved tensors are released by the engine right after it runs, unless the backward
keeps the graph (``retain_graph``/``create_graph``). Rather than infer that from the step's
options, :meth:`SavedMemory.after_backward` asks PyTorch: a released saved tensor's raw
``SavedVariable`` (``node._raw_saved_<name>``) holds no data any more, and a node without one
raises when the saved value is read (the raw probe comes first: raising and catching an
exception per node costs more than reading an attribute). The release is placed at the node's
``node_post`` event, where the engine frees it. Graphs dropped by the program are not
followed (the trace itself holds their nodes until it is serialised), so the timeline is the
memory of the autograd graph as backward sees it.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import Any

import torch

from gradtrace.engine.analysis import Analysis, Backward, Finished
from gradtrace.engine.saved_attributes import SavedVariable, saved_plan
from gradtrace.trace_schema import Analyses, Event, MemoryAnalysis, MemoryPoint, NodeMemory

StorageKey = tuple[int, int, str]  # (data pointer, bytes, device): one block of memory

# The 0-dim tensors a wrapped number is compared with: one of a lower dtype of its kind.
_LOWER = {
    torch.float64: torch.empty((), dtype=torch.float32),
    torch.complex128: torch.empty((), dtype=torch.float32),
    torch.int64: torch.empty((), dtype=torch.int32),
}


def is_wrapped_number(t: torch.Tensor) -> bool:
    """Whether a 0-dim CPU tensor is a Python number an op wrapped (``x * 0.5`` saves 0.5
    as a float64 0-dim tensor). Such a tensor is not saved through the saved-tensor pack
    hooks ("avoid wrapped numbers from being leaked to the user"), so it is not counted.

    Python cannot read the wrapped-number flag; type promotion shows it: a wrapped number
    ranks below every tensor, so against a 0-dim tensor of a lower dtype of its kind the
    result takes that lower dtype, where a real 0-dim tensor keeps its own.
    """
    lower = _LOWER.get(t.dtype)
    return lower is not None and torch.result_type(t, lower) != t.dtype


class SavedMemory(Analysis):
    """Per-node saved storages, when they were created and when the engine freed them. It
    observes every node's saved tensors (``saved``) and each backward's end."""

    wants_saved = True

    def __init__(self) -> None:
        # node id -> its distinct storages; the autograd node, to ask whether it was freed
        self.storages: dict[str, dict[StorageKey, int]] = {}
        self.created_at: dict[str, int] = {}
        self.released_at: dict[str, int] = {}
        self._nodes: dict[str, Any] = {}
        self._probe: dict[str, str] = {}  # node id -> what to read to see one saved tensor freed

    def saved(self, node_id: str, node: Any, seq: int, tensors: list[tuple[str, torch.Tensor]]) -> None:
        """``node`` (created at event ``seq``) saved these tensors (attribute, tensor): the
        storages they keep alive, with their sizes in bytes. (Read here, in one loop: this
        runs for every saved tensor of the graph.)"""
        held: dict[StorageKey, int] = {}
        for _attr, t in tensors:
            if not t.dim() and t.is_cpu and is_wrapped_number(t):
                continue  # (a Python number an op saved: PyTorch's pack hooks never see it)
            try:
                storage = t.untyped_storage()
                address = storage.data_ptr()
            except (RuntimeError, NotImplementedError):  # sparse, nested, functional wrappers,
                continue  # a ZeroTensor (forward-mode AD's zero tangent): no storage held
            nbytes = storage.nbytes()
            # (str(t.device) costs as much as the rest: CPU tensors, nearly all, skip it)
            held[address, nbytes, "cpu" if t.is_cpu else str(t.device)] = nbytes
        if not held:
            return
        self.storages[node_id] = held
        self.created_at[node_id] = seq
        self._nodes[node_id] = node
        # (what to read: the raw SavedVariable where the node class has one, else the attribute)
        attr = tensors[0][0].split("[", 1)[0]
        self._probe[node_id] = saved_plan(node).get(attr) or attr

    def backward_ended(self, backward: Backward, ok: bool) -> None:
        self.after_backward(backward.events, backward.first_seq)

    def add(self, done: Finished, out: Analyses) -> None:
        out.memory = self.build()

    def after_backward(self, events: Sequence[Event], first_seq: int) -> None:
        """After a backward pass (its events from ``first_seq``): which nodes the engine freed."""
        holders, released = self._nodes, self.released_at
        # (at a node's first node_post: the engine frees it right after its post hooks)
        for event in islice(events, first_seq, None):
            node_id = event.node
            if (
                event.kind == "node_post"
                and node_id in holders
                and node_id not in released
                and self._freed(node_id)
            ):
                released[node_id] = event.seq

    def _freed(self, node_id: str) -> bool:
        try:
            saved = getattr(self._nodes[node_id], self._probe[node_id])
        except RuntimeError:  # "Trying to backward through the graph a second time ..."
            return True  # (a released list of saved tensors, or a saved value without a raw one)
        # (torch's stubs lack SavedTensor.data: None once the engine released it)
        return isinstance(saved, SavedVariable) and saved.data is None  # type: ignore[attr-defined]

    def build(self) -> MemoryAnalysis:
        """``analyses.memory``: per-node saved bytes and the live bytes at every change."""
        changes: dict[int, list[tuple[str, int]]] = {}  # seq -> [(node, +1 | -1)]
        for node_id, seq in self.created_at.items():
            changes.setdefault(seq, []).append((node_id, 1))
        for node_id, seq in self.released_at.items():
            changes.setdefault(seq, []).append((node_id, -1))
        holders: dict[StorageKey, int] = {}  # storage -> how many live nodes hold it
        live = peak = 0
        timeline: list[MemoryPoint] = []
        for seq in sorted(changes):
            for node_id, sign in changes[seq]:
                for key, nbytes in self.storages[node_id].items():
                    count = holders.get(key, 0) + sign
                    if sign > 0 and count == 1:
                        live += nbytes
                    elif sign < 0 and count == 0:
                        live -= nbytes
                    holders[key] = count
            peak = max(peak, live)
            if not timeline or timeline[-1].live_bytes != live:
                timeline.append(MemoryPoint(seq=seq, live_bytes=live))
        nodes = [
            NodeMemory(
                node=node_id,
                saved_bytes=sum(held.values()),
                created_seq=self.created_at[node_id],
                released_seq=self.released_at.get(node_id),
            )
            for node_id, held in self.storages.items()
        ]
        return MemoryAnalysis(nodes=nodes, timeline=timeline, peak_bytes=peak, final_bytes=live)
