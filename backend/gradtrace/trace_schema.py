"""The trace: gradtrace's public output format (schema version 3).

This module is the contract between the engine (which writes traces), the service (which
ships them), and the viewer and exporters (which draw them). It imports no torch.

Conventions
-----------
* Ids are strings from a per-trace counter: graph nodes ``n0, n1, …`` in the order the
  engine first saw them, edges ``e0, e1, …``. Never ``id()`` of a Python object.
* Edge direction is **data flow** (the forward direction): ``source`` produced the value
  that ``target`` consumed. Gradients travel the other way, from ``target`` to ``source``.
* ``seq`` numbers events 0, 1, 2, … in the order they really fired.
* ``pass_index`` numbers the passes of the timeline (forward #1, backward #1, …); see
  :class:`Pass`.
* Tensor numbers never appear as bare NaN/Infinity: see :class:`TensorValue`.

Node states at a step (the rule the viewer draws and the tests check)
--------------------------------------------------------------------
A "step" is an index ``i`` into ``events`` (the event with ``seq == i`` has just fired).
For each graph node:

* ``hidden`` — its ``node_created`` event has not fired yet (``created_seq > i``);
* ``active`` — it is the ``node`` of event ``i``, or the engine is running it: a
  ``node_pre`` for it has fired in the current pass and its ``node_post`` has not;
* ``done`` — the current pass is a backward pass and the node has finished in it: its
  ``node_post`` fired in this pass at or before ``i`` (for a leaf tensor node: a
  ``grad_write`` targeting it fired in this pass);
* ``shown`` — otherwise.

"Current pass" is ``events[i].pass_index``; ``passes[k].phase`` says whether it is a backward.
"""

from __future__ import annotations

import ctypes
import io
from typing import Any, BinaryIO, Final, Literal, NamedTuple, NoReturn

import msgspec

# 2: `data` is the tensor's own dtype (was always float32), `values` only for tiny tensors,
# final values exact and first (Limits.final_value_limit). 3: each block of numbers written
# once, in `tensor_data`; `data` is its index (gradtrace.trace reads version 2 too)
SCHEMA_VERSION: Final = 3

NonFinite = Literal["NaN", "Infinity", "-Infinity"]
# the trace's dtype names -> numpy's little-endian dtype of ``data`` (bfloat16: its bit pattern)
WIRE_DTYPES = {
    "float64": "<f8",
    "float32": "<f4",
    "float16": "<f2",
    "bfloat16": "<u2",
    "int64": "<i8",
    "int32": "<i4",
    "int16": "<i2",
    "int8": "i1",
    "uint8": "u1",
    "uint16": "<u2",
    "uint32": "<u4",
    "uint64": "<u8",
    "bool": "?",
    "complex64": "<c8",  # (real and imaginary float32 in turn)
    "complex128": "<c16",
}
Number = float | int | NonFinite
Phase = Literal["forward", "backward", "step"]
EdgeKind = Literal["data", "leaf", "no_grad"]
Severity = Literal["info", "warning", "error"]


class _Record(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A record of the trace: fields in this order on the wire, every field written
    (defaults too), unknown fields rejected when reading. Each record says ``kw_only=True``
    (msgspec does not inherit it): built by keyword, its fields keep the documented order
    whatever has a default.

    Records are not tracked by Python's cyclic GC (``gc=False``, inherited): a trace holds
    tens of thousands of them, which every collection would otherwise traverse, in the
    capture and for as long as the user keeps the trace. A trace is a tree of records
    (records may be shared, never cyclic); do not make a record refer back to itself."""


class TensorStats(_Record, kw_only=True):
    """Summary statistics over the finite elements (null when there are none).

    For a complex tensor (complex64, complex128) they are the stats of its elements'
    magnitudes ``|z|`` (so ``norm`` is the tensor's norm), and ``of`` says so: ``"magnitude"``.
    ``of`` is absent for every other dtype (the stats of the numbers themselves)."""

    numel: int
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    norm: float | None
    nan: int = 0
    inf: int = 0
    of: Literal["magnitude"] | msgspec.UnsetType = msgspec.UNSET  # (written only when set)


class TensorValue(_Record, kw_only=True):
    """One tensor's value as it crosses into JSON.

    Exactly one of three levels of detail: ``values`` (a flat, row-major JSON list, for
    scalars and tensors up to 16 elements; non-finite numbers as the strings "NaN",
    "Infinity", "-Infinity"; bools as 0/1; a complex element as two numbers, its real and
    imaginary parts, as its bytes hold them), ``data`` (the index of its numbers in the
    document's ``tensor_data``: see TraceDoc), or neither: ``truncated`` is true and only
    ``stats`` were kept (a per-event snapshot past the trace's ``value_budget``, a final value
    past ``final_value_limit``). A truncated value is never null: null means
    "no gradient".
    """

    shape: list[int]
    dtype: str
    stats: TensorStats
    values: list[Number] | None = None
    data: int | None = None  # index into TraceDoc.tensor_data
    truncated: bool = False


class SavedTensor(_Record, kw_only=True):
    """A tensor (or scalar) an autograd node saved for its backward, read before backward."""

    name: str  # the attribute, e.g. "_saved_self", "_saved_mat2"
    value: TensorValue | None = None
    # saved non-tensor values as PyTorch saved them: bools, ints, floats, strings, sizes
    scalar: bool | int | float | str | list[Any] | None = None


class GraphNode(_Record, kw_only=True):
    """A node of the autograd graph, or a leaf tensor.

    ``kind == "op"``: an autograd node. ``op`` is PyTorch's exact class name
    (``AddmmBackward0``, ``AccumulateGrad``, ``BackwardHookFunctionBackward``). When the op
    produced a non-leaf tensor the forward program named, ``tensor`` names it; ``value`` holds
    the tensor the op produced (for the op's output 0 where it is known); ``role`` is
    ``"intermediate"`` for ops that produced a tensor and null for ``AccumulateGrad``.

    ``kind == "tensor"``: a leaf. ``role`` is ``"parameter"`` when it requires grad (spec
    inputs with ``requires_grad`` included) and ``"input"`` when it does not. A parameter
    leaf's ``grad_fn`` is the id of its ``AccumulateGrad`` op node, whose ``variable`` points
    back at the leaf.
    """

    id: str
    kind: Literal["op", "tensor"]
    label: str
    op: str | None = None
    role: Literal["input", "parameter", "intermediate"] | None = None
    tensor: str | None = None
    shape: list[int] | None = None
    dtype: str | None = None
    module: str | None = None  # dotted module path ("" is the root module), null outside modules
    creation_order: int | None = None  # _sequence_nr(); null for AccumulateGrad (2**64-1) and leaves
    created_seq: int | None = None  # seq of the node_created event
    pass_index: int = 0  # the pass in which it was created
    saved: list[SavedTensor] = msgspec.field(default_factory=list)
    inserted: bool = False  # put there by instrumentation (e.g. BackwardHookFunctionBackward)
    variable: str | None = None  # AccumulateGrad -> its leaf tensor node
    grad_fn: str | None = None  # leaf tensor node -> its AccumulateGrad node
    requires_grad: bool = False
    retains_grad: bool = False
    value: TensorValue | None = None


class EdgeGrad(_Record, kw_only=True):
    """The gradient that travelled along an edge (target -> source) during one pass."""

    pass_index: int
    seq: int  # the node_post event of the target that emitted it
    value: TensorValue | None  # null: the engine passed an undefined gradient


class GraphEdge(_Record, kw_only=True):
    """A data-flow edge: ``source`` produced what ``target`` consumed.

    ``kind``: ``"data"`` between op nodes (``slot`` is the index in target's
    ``next_functions``; ``output_nr`` the output of source); ``"leaf"`` from a parameter leaf
    to its ``AccumulateGrad`` node (gradient stored in ``.grad``: drawn solid);
    ``"no_grad"`` from a leaf that does not require grad to the op that consumed it (no
    gradient flows: drawn dashed, ``grads`` stays empty).
    """

    id: str
    source: str
    target: str
    kind: EdgeKind = "data"
    slot: int | None = None
    output_nr: int = 0
    requires_grad: bool = True
    grads: list[EdgeGrad] = msgspec.field(default_factory=list)


class ModuleHook(_Record, kw_only=True):
    """A hook the spec (or the user) put on a module or tensor."""

    index: int  # position in spec.hooks
    type: str
    action: dict[str, Any] | None = None


class ModuleInfo(_Record, kw_only=True):
    path: str  # "" is the root
    type: str  # class name: "Linear", "Sequential", "Module", …
    parent: str | None
    hooks: list[ModuleHook] = msgspec.field(default_factory=list)
    parameters: list[str] = msgspec.field(default_factory=list)  # full names, e.g. "f1.f.weight"


class Graph(_Record, kw_only=True):
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    modules: list[ModuleInfo] = msgspec.field(default_factory=list)


EventKind = Literal[
    "pass_start",
    "pass_end",
    "node_created",
    "module_forward_pre",
    "module_forward",
    "node_pre",
    "node_post",
    "node_pre_hook",
    "node_post_hook",
    "module_backward_pre",
    "module_backward",
    "tensor_hook",
    "post_accumulate_grad",
    "grad_write",
    "hook_action",
    "zero_grad",
    "sgd_step",
    "optimizer_step",
    "error",
]


class _Payload(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """An event's payload as the engine builds it: one record per kind of event (see
    EVENT_PAYLOADS), its keys on the wire in field order. Unlike the other records, a field
    left UNSET is not written at all: an optional key (the hook keys, ``kwargs``, ``where``)
    is either there or absent, never null in its place. Not tracked by the cyclic GC, for the
    reason _Record gives (a payload refers to TensorValues and lists, never back to itself)."""


class HookFiring(_Payload, kw_only=True):
    """The keys a firing of a model's own hook adds to its event's payload (``hook_name``,
    ``returned``, ``changed``: see Event), after the kind's own keys (msgspec writes
    keyword-only fields last); absent from every other event's payload."""

    hook_name: str | msgspec.UnsetType = msgspec.UNSET
    returned: list[TensorValue | None] | None | msgspec.UnsetType = msgspec.UNSET
    changed: bool | msgspec.UnsetType = msgspec.UNSET


class NoPayload(_Payload):
    """node_created, pass_start, pass_end: ``{}`` (what they are about is the node, the pass)."""


class ModuleForwardPrePayload(HookFiring):
    """module_forward_pre: the tensors of the module's positional inputs, in order; ``kwargs``
    only for a model's hook registered ``with_kwargs`` (its keyword arguments)."""

    inputs: list[TensorValue | None]
    kwargs: dict[str, TensorValue | None] | msgspec.UnsetType = msgspec.UNSET


class ModuleForwardPayload(HookFiring):
    """module_forward: the inputs again (what ``forward`` got) and the tensors it returned;
    ``kwargs`` as for module_forward_pre."""

    inputs: list[TensorValue | None]
    outputs: list[TensorValue | None]
    kwargs: dict[str, TensorValue | None] | msgspec.UnsetType = msgspec.UNSET


class NodePrePayload(HookFiring):
    """node_pre: the engine is about to run the node, with these gradients: what arrived
    along its edges as the tensor hooks and the node's own pre-hooks left them (each of
    those that fired is an event just before, with what it saw and returned).
    node_pre_hook: what a hook the model put on the node (``grad_fn.register_prehook``) was
    given."""

    grad_outputs: list[TensorValue | None]


class NodePostPayload(HookFiring):
    """node_post: ``grad_inputs[k]`` went to ``next_functions[k]`` (as the node's own
    post-hooks left them: each an event just before); node_post_hook: what a hook the model
    put on the node (``grad_fn.register_hook``) was given."""

    grad_inputs: list[TensorValue | None]
    grad_outputs: list[TensorValue | None]


class ModuleBackwardPrePayload(HookFiring):
    """module_backward_pre: the gradients of the module's outputs (only where a hook of that
    kind is registered)."""

    grad_output: list[TensorValue | None]


class ModuleBackwardPayload(HookFiring):
    """module_backward: the gradients of the module's inputs and outputs (only where a hook
    of that kind is registered)."""

    grad_input: list[TensorValue | None]
    grad_output: list[TensorValue | None]


class GradPayload(HookFiring):
    """tensor_hook: the gradient the hook was given; post_accumulate_grad: the tensor's
    ``.grad`` after accumulation."""

    grad: TensorValue | None


class GradWritePayload(_Payload):
    """grad_write: ``.grad`` before and after a write, on a leaf tensor node or on the op node
    that carries a ``retain_grad`` intermediate; ``accumulated``: there was one before."""

    before: TensorValue | None
    after: TensorValue | None
    accumulated: bool


class HookActionPayload(_Payload):
    """hook_action: a spec hook's action (as the spec gives it) and the values it changed,
    before and after."""

    action: dict[str, Any]
    before: list[TensorValue | None]
    after: list[TensorValue | None]


class ZeroGradPayload(_Payload):
    """zero_grad: how, and the tensors whose ``.grad`` it cleared."""

    set_to_none: bool
    tensors: list[str]


class SgdStepPayload(_Payload):
    """sgd_step: the learning rate and every parameter it updated, after the update."""

    lr: float
    after: dict[str, TensorValue | None]


class OptimizerStepPayload(_Payload):
    """optimizer_step: a ``torch.optim`` optimizer's ``step()`` in a recorded program: its
    class, the variable holding it (None: none), its first group's learning rate (None: not a
    number) and every parameter it was given whose value changed, after the step."""

    optimizer: str
    name: str | None
    lr: float | None
    after: dict[str, TensorValue | None]


class ErrorPayload(_Payload):
    """error: the exception's class name and the spec step it broke (null: the forward);
    ``where`` is gradtrace's text naming the spec line, when it wrapped PyTorch's error (the
    error's own text is the event's ``message``)."""

    exception: str
    step: int | None
    where: str | msgspec.UnsetType = msgspec.UNSET


EventPayload = (
    NoPayload
    | ModuleForwardPrePayload
    | ModuleForwardPayload
    | NodePrePayload
    | NodePostPayload
    | ModuleBackwardPrePayload
    | ModuleBackwardPayload
    | GradPayload
    | GradWritePayload
    | HookActionPayload
    | ZeroGradPayload
    | SgdStepPayload
    | OptimizerStepPayload
    | ErrorPayload
)
# the payload record of each kind of event (a hook's kinds share their record with the
# engine's own events of that shape)
EVENT_PAYLOADS: Final[dict[EventKind, type[EventPayload]]] = {
    "pass_start": NoPayload,
    "pass_end": NoPayload,
    "node_created": NoPayload,
    "module_forward_pre": ModuleForwardPrePayload,
    "module_forward": ModuleForwardPayload,
    "node_pre": NodePrePayload,
    "node_post": NodePostPayload,
    "node_pre_hook": NodePrePayload,
    "node_post_hook": NodePostPayload,
    "module_backward_pre": ModuleBackwardPrePayload,
    "module_backward": ModuleBackwardPayload,
    "tensor_hook": GradPayload,
    "post_accumulate_grad": GradPayload,
    "grad_write": GradWritePayload,
    "hook_action": HookActionPayload,
    "zero_grad": ZeroGradPayload,
    "sgd_step": SgdStepPayload,
    "optimizer_step": OptimizerStepPayload,
    "error": ErrorPayload,
}


def payload_items(payload: Any) -> list[tuple[str, Any]]:
    """An event payload's keys and values as the wire has them, in order: of a payload record
    (the engine's; UNSET fields left out) or of plain JSON data (a loaded trace's)."""
    if isinstance(payload, _Payload):
        return [
            (name, value)
            for name in payload.__struct_fields__
            if (value := getattr(payload, name)) is not msgspec.UNSET
        ]
    return list(payload.items())


class Event(_Record, kw_only=True):
    """One thing that happened, in the order it happened.

    ``target`` names what the event is about (a node id for node events, a module path for
    module events, a tensor name for tensor events); ``node`` is the graph node to highlight
    for it, when there is one. ``payload`` is what the event saw: one record per kind (see
    EVENT_PAYLOADS and each record's docstring; the JSON Schema pins it by ``kind``).

    A hook event (``hook`` not null) is one firing of a user's hook. In a spec trace ``hook``
    indexes ``spec.hooks``; a changed value follows as a ``hook_action`` event. In a library
    trace (``gradtrace.trace(model, …)``) it is a hook the model itself carries (registered
    before the trace, or inside ``forward``; on a module, a tensor or an autograd node):
    ``hook`` is that hook's number in this trace
    (module hooks are listed with it in ``graph.modules[].hooks``), ``target`` the module path
    or the tensor's name (a parameter or input name; else the name the program gave it, else
    the id of the node that produced it; for a node hook the tensor the node made, else its
    id), and the payload adds:

    * ``hook_name``: the hook function's ``__qualname__``;
    * ``returned``: [TensorValue] — the tensors the hook returned, or null when it returned
      None (a forward-pre hook with kwargs returns (args, kwargs): all their tensors);
    * ``changed``: true when the hook replaced a value (returned tensors other than the ones
      it was given) or wrote one in place (a tensor it was given, or ``.grad`` for a
      post-accumulate hook, changed version; for tensor and post-accumulate hooks also
      changed numbers at the same version: a write through ``.data``, after which the
      gradient's later records, its final value in ``grads`` too, show the new numbers).

    Module-level ``module_forward_pre``/``module_forward`` events with ``hook`` null are
    gradtrace's own record of every module call, not a user's hook.

    In Python a payload is plain JSON data (``gradtrace.Trace.doc``, a loaded trace); only a
    TraceDoc straight from the engine holds payload records (written as the same JSON). A
    loaded trace is not decoded into them: msgspec picks the record for a JSON object by a
    tag inside that object, not by the ``kind`` beside it, so typed decoding would need a tag
    in every payload (or an Event record per kind, whose tag msgspec writes first): another
    wire. The field is declared as what is read, a dict; ``payload_items`` reads either.
    """

    seq: int
    pass_index: int
    phase: Phase
    kind: EventKind
    target: str | None = None
    node: str | None = None
    module: str | None = None
    hook: int | None = None  # the user hook that fired: its index (see above)
    message: str | None = None
    payload: dict[str, Any] = msgspec.field(default_factory=dict)


class Pass(_Record, kw_only=True):
    """A band of the timeline: one forward, one backward (or autograd.grad), or one step.

    A *nested* pass is an engine run that happened inside another pass: the backward a
    reentrant ``torch.utils.checkpoint`` runs on its recomputed segment (inside the outer
    backward, while the checkpoint's node runs), or ``torch.autograd.grad`` called inside the
    model's forward (a gradient penalty). ``parent`` is the index of the pass it interrupted;
    its band ``first_seq..last_seq`` lies inside the parent's, and the parent's events
    resume after it (events carry the pass they belong to in ``pass_index``).
    """

    index: int
    phase: Phase
    label: str  # "forward #1", "backward #1 of loss", "grad #1 of loss", "zero_grad", …
    step: int | None = None  # index into spec.steps; null for the initial forward
    parent: int | None = None  # the enclosing pass of a nested engine run; null at top level
    first_seq: int
    last_seq: int


class LinearReconstruction(_Record, kw_only=True):
    """W.grad of a Linear layer rebuilt from the captured (a, δ) factors, per backward pass."""

    module: str
    weight: str  # parameter name, e.g. "fc1.weight"
    pass_index: int
    a_shape: list[int]
    delta_shape: list[int]
    reconstructed: TensorValue
    grad: TensorValue  # what autograd accumulated into the weight in that pass
    # NaN-aware: positions where both are NaN, or both the same infinity, are equal; max_error
    # is over the positions where both are finite; ``matches`` needs the same non-finite
    # positions and max_error <= 1e-6 * max(1, |grad|max over the finite part)
    max_error: float
    matches: bool
    a: list[TensorValue] = msgspec.field(default_factory=list)  # per-call input activations
    delta: list[TensorValue] = msgspec.field(default_factory=list)  # per-call output gradients


class GradNorm(_Record, kw_only=True):
    name: str  # parameter or tensor name
    module: str | None
    pass_index: int | None  # null: the final .grad
    norm: float | NonFinite


class Diagnostic(_Record, kw_only=True):
    code: str  # e.g. "hook_on_outputs_only", "inplace_after_hook", "detached_branch", "grad_not_retained"
    severity: Severity
    message: str
    node: str | None = None
    module: str | None = None
    tensor: str | None = None


class CallContributions(_Record, kw_only=True):
    """One call of a Linear layer: how much each position (sample, token) gave to W.grad."""

    a_shape: list[int]
    delta_shape: list[int]
    sample_dims: list[int]  # the leading dims of a and δ: (B,), (B, T), …
    position_norms: TensorValue  # ‖δ_p ⊗ a_p‖ = ‖δ_p‖·‖a_p‖ per position, shape sample_dims
    sample_norms: TensorValue | None = None  # ‖Σ_t δ_bt ⊗ a_bt‖ per sample b (the first dim)


class PerSampleContributions(_Record, kw_only=True):
    """A Linear weight's gradient split by sample and token, per backward pass (seed 000's
    "full per-sample, per-token picture"), with the check that the shares add up to W.grad
    and what storing the factors costs next to the gradient."""

    module: str
    weight: str
    pass_index: int
    calls: list[CallContributions]
    sum_max_error: float | None  # max |Σ_b C_b − W.grad|: Σ_b C_b is the reconstruction (linear)
    matches: bool | None
    factor_numbers: int  # Σ over positions of (d_in + d_out): what (a, δ) hold
    gradient_numbers: int  # d_out × d_in: what W.grad holds


class NodeMemory(_Record, kw_only=True):
    """The storage one autograd node saved for its backward (seed 001's "memory")."""

    node: str
    saved_bytes: int  # bytes of the distinct storages its saved tensors keep alive
    created_seq: int  # the node_created event: from here the storage is held
    released_seq: int | None = None  # the node_post at which the engine freed it; null: still held


class MemoryPoint(_Record, kw_only=True):
    seq: int
    live_bytes: int  # saved bytes alive after event ``seq`` (until the next point)


class MemoryAnalysis(_Record, kw_only=True):
    """Saved-tensor memory of the autograd graph: per node, and live over the timeline.

    A storage shared by several saved tensors (or nodes) counts once in ``live_bytes``. The
    timeline lists only the events where the live total changed: it rises as the forward
    saves tensors, falls as a backward that does not retain the graph frees each node, and
    stays up after ``retain_graph=True``. ``final_bytes`` is what the graph still holds at the
    end of the trace.
    """

    nodes: list[NodeMemory] = msgspec.field(default_factory=list)
    timeline: list[MemoryPoint] = msgspec.field(default_factory=list)
    peak_bytes: int = 0
    final_bytes: int = 0


class Analyses(_Record, kw_only=True):
    linear: list[LinearReconstruction] = msgspec.field(default_factory=list)
    grad_norms: list[GradNorm] = msgspec.field(default_factory=list)
    diagnostics: list[Diagnostic] = msgspec.field(default_factory=list)
    memory: MemoryAnalysis = msgspec.field(default_factory=MemoryAnalysis)
    per_sample: list[PerSampleContributions] = msgspec.field(default_factory=list)


# The library's defaults for a Limits' first three fields (gradtrace.trace shows them in its
# signature, torch-free; the engine uses them):
LIBRARY_MAX_NODES = 40_000  # freeing chains of >= 50k nodes after a Python walk has crashed the process
# numbers in per-event snapshots across one trace (~5.3 MB of float32 base64). JSON `values`
# lists are charged LIST_COST per number (~20 bytes in JSON vs ~5.3 in base64); a tensor's
# numbers count once (the wire holds each block once): the budget bounds the size of the
# snapshots' numbers on the wire.
DEFAULT_VALUE_BUDGET = 1_000_000
# numbers of final values (grads + named forward values): resnet18 has 11.7 M parameters, a
# 12-layer TransformerEncoder(d_model=512) 37.8 M; past this a model is "too big" (one
# diagnostic) and the rest of its final values are stats only in the serialised trace
DEFAULT_FINAL_VALUE_LIMIT = 64_000_000


class Limits(_Record, kw_only=True):
    """What the trace left out to stay small, so a reader knows it is not the whole story."""

    max_nodes: int
    value_budget: (
        int  # numbers per-event snapshots may carry across the trace (each block once; a list number costs 4)
    )
    final_value_limit: int  # numbers the final grads and named forward values may carry (exactly)
    values_truncated: int = 0  # per-event snapshots reduced to stats only
    finals_truncated: int = 0  # final grads / named values reduced to stats only (a diagnostic says so)


class GradInTrace(NamedTuple):
    """A final gradient whose exact numbers the trace itself holds (a block of its
    ``tensor_data``, in the gradient's own dtype): what the engine hands a Trace instead of a
    numpy copy of the ``.grad``, decoded (``tensor_array``) only when ``Trace.grads`` is first
    read (most traces are only serialised: a copy per parameter would be made for nothing). Its
    fields are copied from the record, so later edits of the document change nothing."""

    dtype: str
    shape: list[int]
    data: int

    @classmethod
    def of(cls, value: TensorValue | None) -> GradInTrace | None:
        """The reference to a final value's block, when it has one that decodes (None: the
        caller copies the gradient itself)."""
        if value is None or value.data is None or value.truncated or value.dtype not in WIRE_DTYPES:
            return None
        return cls(value.dtype, value.shape, value.data)


class Base64Blocks(list[str]):
    """``tensor_data`` as the engine hands it over: base64 strings by construction (nothing in
    them needs escaping in JSON), in a list that refuses changes, so ``encode_doc`` writes them
    into the JSON as they are instead of having every byte scanned again (the blocks are most
    of a trace's bytes). Equal to the plain list a trace reads back as; any other list is
    encoded the usual way (assign one to change a trace's numbers)."""

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("the engine's tensor_data cannot be changed in place: assign a new list")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = sort = reverse = clear = _refuse


class TraceDoc(_Record, kw_only=True):
    """The whole trace document (what ``POST /api/v1/trace`` returns).

    ``tensor_data``, last: the numbers of the tensors past 16 elements, each block written
    once however many TensorValues show it (a module's output is also the next module's
    input, a node's value, a saved tensor): base64 of the tensor's own bytes in its ``dtype``,
    little-endian, row-major (float64 is 8 bytes a number, float16 2, bfloat16 its 16-bit
    pattern (the top half of the float32), bool 1 byte 0/1, ints their width, complex64 its
    real and imaginary float32s in turn, complex128 float64s). A
    TensorValue's ``data`` is an index into it. A copy made only for drawing may send it
    empty: a ``data`` index with no entry reads as a truncated value (stats only).
    """

    schema_version: Literal[3] = SCHEMA_VERSION
    torch_version: str
    source: Literal["spec", "module", "program"]
    title: str
    spec: dict[str, Any] | None  # the normalised spec; null for gradtrace.trace(model, …)
    graph: Graph
    events: list[Event]
    passes: list[Pass]
    values: dict[str, TensorValue]
    grads: dict[str, TensorValue | None]
    analyses: Analyses
    limits: Limits
    tensor_data: list[str] = msgspec.field(default_factory=list)


def _without_numbers(doc: TraceDoc) -> bytes:
    """``doc`` as JSON bytes with an empty ``tensor_data`` (its last field: they end with
    ``"tensor_data":[]}``)."""
    return msgspec.json.encode(msgspec.structs.replace(doc, tensor_data=[]))


def _engine_blocks(doc: TraceDoc) -> Base64Blocks | None:
    """``doc``'s tensor_data when it is the engine's (Base64Blocks: nothing in them needs
    escaping) and not empty: written as they are, not scanned byte by byte by msgspec for
    characters to escape (on a real model they are more than the rest of the document).
    None for any other list: msgspec writes it."""
    blocks = doc.tensor_data
    return blocks if type(blocks) is Base64Blocks and blocks else None


# glibc's malloc_trim (None elsewhere): see _hand_back_freed_memory
try:
    _MALLOC_TRIM: Any = ctypes.CDLL(None).malloc_trim
except (OSError, AttributeError, TypeError):  # (not glibc: macOS, musl, Windows)
    _MALLOC_TRIM = None
_BIG_OUTPUT = 64 << 20  # characters of blocks: an output this big first hands back freed memory


def _hand_back_freed_memory(blocks: Base64Blocks) -> None:
    """Before a big document is written into memory: the heap pages the process freed (a
    capture's transient records and copies) handed back to the system, so that the output
    does not come on top of them. glibc keeps them: after a trace of GPT-2 small, 215 MB, and
    the peak with its 332 MB of JSON was 1.06 of its bound (BENCHMARKS.md, issue 32)."""
    if _MALLOC_TRIM is not None and sum(map(len, blocks)) > _BIG_OUTPUT:
        _MALLOC_TRIM(0)


def encode_doc(doc: TraceDoc, *, numbers: bool = True) -> bytes:
    """The trace as compact JSON bytes, fields in record order (what the service sends and the
    files hold). ``numbers=False``: with an empty ``tensor_data`` (what a drawing reads: values
    past 16 elements then read as stats only)."""
    blocks = _engine_blocks(doc) if numbers else None
    if blocks is None:
        return msgspec.json.encode(doc) if numbers else _without_numbers(doc)
    # (into one growing buffer whose bytes getvalue() hands over without a copy: joined
    # first, the blocks would be held three times at once, as the trace's strings, their
    # join and its encoding, and on a big model they are hundreds of MB)
    _hand_back_freed_memory(blocks)
    out = io.BytesIO()
    _write_with_blocks(doc, blocks, out)
    return out.getvalue()


def write_doc(doc: TraceDoc, out: BinaryIO) -> None:
    """``encode_doc(doc)`` written to ``out`` (a file): the blocks one by one, never the whole
    document in memory at once (a big model's trace is hundreds of MB of them)."""
    blocks = _engine_blocks(doc)
    if blocks is None:
        out.write(msgspec.json.encode(doc))
    else:
        _write_with_blocks(doc, blocks, out)


def _write_with_blocks(doc: TraceDoc, blocks: Base64Blocks, out: BinaryIO) -> None:
    """`...,"tensor_data":[` (the document without its blocks, its end cut off), then the
    quoted blocks and the document's end."""
    out.write(memoryview(_without_numbers(doc))[:-2])
    separator = b'"'
    for block in blocks:
        out.write(separator)
        out.write(block.encode("ascii"))
        separator = b'","'
    out.write(b'"]}')


def encode_doc_text(doc: TraceDoc) -> str:
    """``encode_doc(doc)`` as text, the document's head and blocks copied into it by one join.

    msgspec writes the document with the first block as its only one: that text without its
    closing ``"]}`` ends where the first block does, so ``'","'.join`` of it and the other
    blocks is the whole document. (The head is decoded once, straight into the join: not
    copied twice more, sliced and prefixed, each copy fresh memory the size of the head.)"""
    blocks = _engine_blocks(doc)
    if blocks is None:
        return msgspec.json.encode(doc).decode("utf-8")
    head = msgspec.json.encode(msgspec.structs.replace(doc, tensor_data=[blocks[0]]))
    if len(blocks) == 1:
        return head.decode("utf-8")
    parts = [str(memoryview(head)[:-3], "utf-8"), *blocks[1:]]
    del head  # (freed before the join allocates the whole text)
    parts[-1] += '"]}'
    return '","'.join(parts)


def trace_json_schema() -> dict[str, Any]:
    """The JSON Schema of the trace, made from the records above: TraceDoc at the root, the
    other records in ``$defs``. An event's ``payload`` is one of the payload records, and
    which one is pinned by its ``kind`` (an ``if``/``then`` per record: see EVENT_PAYLOADS)."""
    payloads = list(dict.fromkeys(EVENT_PAYLOADS.values()))
    (root, *_), definitions = msgspec.json.schema_components([TraceDoc, *payloads])

    def ref(record: type) -> dict[str, str]:
        return {"$ref": f"#/$defs/{record.__name__}"}

    event = definitions["Event"]
    event["properties"]["payload"] = {"anyOf": [ref(record) for record in payloads]}
    event["allOf"] = [
        {
            "if": {"properties": {"kind": {"enum": [k for k, r in EVENT_PAYLOADS.items() if r is record]}}},
            "then": {"properties": {"payload": ref(record)}},
        }
        for record in payloads
    ]
    assert root == ref(TraceDoc)
    return {**definitions.pop("TraceDoc"), "$defs": definitions}
