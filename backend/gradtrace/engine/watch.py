"""``gradtrace.watch``: gradient flow over training steps, on the autograd graph's own nodes.

A step is one backward pass through the watched model: each forward of the model with grad
enabled starts one (steps count from 0). Steps ``0, every, 2*every, …`` are logged. On a
logged step, and only then, the watch

* numbers the modules' calls: global module hooks note each module's span of autograd
  sequence numbers, so every grad_fn node gets the module that made it, and a key
  ``module/op#ordinal`` (the ordinal counts that op's nodes within the module, in creation
  order) that is the same at every step;
* hooks every node of the graph (walked from the model's outputs at the forward's end, and
  from the loss when ``backward`` is called on it: ``torch.autograd.backward`` is wrapped
  from the model's forward to that call, to see the loss); each hook computes, on the
  gradients' device, the norms flowing in and out, NaN and inf counts, and the zero
  fraction behind a ReLU-like node;
* at the backward's end (after DDP's all-reduce: a final callback queued last) takes every
  parameter's gradient and weight norm; around the optimizer's step (PyTorch's global
  optimizer step hooks) the update ratio ‖Δw‖/‖w‖;
* then reads all those 0-dim device tensors to the host at once (one stack and one
  ``tolist`` per device: no host read inside the step) and writes the step to the run.

Unlogged steps cost two Python calls (the model's forward pre-hook and hook) and the
optimizer hooks' early return. Nothing the watch does writes to a tensor of the training:
weights are bit-equal to an unwatched run.
"""

from __future__ import annotations

import copy
import functools
import warnings
from bisect import bisect_right
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from gradtrace.engine.graph_walk import op_name, raw_sequence_nr, sequence_base, walk_new
from gradtrace.runs.flags import FlagRules, FlagState
from gradtrace.runs.store import NodeInfo, RunWriter, StepRecord

# Nodes whose backward zeroes the gradient where the forward clipped: their zero fraction
# is recorded (dead units show as a fraction near 1).
RELU_LIKE = frozenset({"ReluBackward0", "ThresholdBackward0", "HardtanhBackward0"})
_ACCUMULATE = "AccumulateGrad"
MODEL = "(model)"  # the module path of the watched model's own ops
LOSS = "(loss)"  # ops after the model's forward (the loss)
BEFORE = "(input)"  # ops before it (inputs built with grad)
LEAF = "(leaf)"  # AccumulateGrad nodes of leaves that are not the model's parameters


class _Hook:
    """A hook of the watch on the model; a copy of the model (``copy.deepcopy``: the full
    trace's twin, the user's own copies) gets a hook that does nothing."""

    def __init__(self, fn: Callable[..., None]) -> None:
        self.fn = fn

    def __call__(self, *args: Any) -> None:
        self.fn(*args)

    def __deepcopy__(self, memo: dict[int, Any]) -> _Hook:
        return _Hook(_nothing)


def _nothing(*args: Any) -> None:
    return None


class _Scalars:
    """0-dim device tensors of one step, read to the host at once (one per device)."""

    def __init__(self) -> None:
        self.tensors: list[torch.Tensor] = []

    def add(self, t: torch.Tensor) -> int:
        self.tensors.append(t)
        return len(self.tensors) - 1

    def read(self) -> list[float]:
        groups: dict[tuple[Any, Any], list[int]] = {}
        for k, t in enumerate(self.tensors):
            groups.setdefault((t.device, t.dtype), []).append(k)
        per_device: dict[Any, tuple[list[int], list[torch.Tensor]]] = {}
        for (device, _dtype), ks in groups.items():
            wide = torch.float32 if device.type == "mps" else torch.float64  # (MPS: no float64)
            order, parts = per_device.setdefault(device, ([], []))
            order.extend(ks)
            parts.append(torch.stack([self.tensors[k] for k in ks]).to(wide))
        out = [0.0] * len(self.tensors)
        for order, parts in per_device.values():
            values = torch.cat(parts).tolist()  # the one transfer of this device
            for k, value in zip(order, values, strict=True):
                out[k] = value
        return out


def _norm(grads: Any) -> torch.Tensor | None:
    """The 2-norm of the defined tensors of ``grads`` as one 0-dim tensor on their device
    (a gradient's own dtype; half types in float32), None when none is defined."""
    norms = [_one_norm(g) for g in grads if g is not None]
    if not norms:
        return None
    if len(norms) == 1:
        return norms[0]
    return torch.linalg.vector_norm(torch.stack([n.to(torch.float32) for n in norms]))


def _one_norm(g: torch.Tensor) -> torch.Tensor:
    g = _dense(g)
    if g.dtype in (torch.float16, torch.bfloat16):
        return torch.linalg.vector_norm(g, dtype=torch.float32)
    return torch.linalg.vector_norm(g)


def _dense(g: torch.Tensor) -> torch.Tensor:
    return g.coalesce().values() if g.layout == torch.sparse_coo else g


def _counts(grads: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
    """NaN and inf counts over the defined tensors of ``grads`` (0-dim int64)."""
    defined = [_dense(g) for g in grads if g is not None]
    if not defined:
        return None
    nan = torch.isnan(defined[0]).sum()
    inf = torch.isinf(defined[0]).sum()
    for g in defined[1:]:
        nan = nan + torch.isnan(g).sum()
        inf = inf + torch.isinf(g).sum()
    return nan, inf


class _NodeSlots:
    """Where one executed node's numbers are in the step's scalars (None: no gradient)."""

    __slots__ = ("grad_in", "grad_out", "inf", "info", "nan", "zero", "zero_of")

    def __init__(self, info: NodeInfo) -> None:
        self.info = info
        self.grad_in: int | None = None
        self.grad_out: int | None = None
        self.zero: int | None = None
        self.zero_of = 0
        self.nan: int | None = None
        self.inf: int | None = None


class _Step:
    """What one logged step has gathered so far."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.scalars = _Scalars()
        self.stack: list[tuple[int, str, int]] = []  # (id(module), path, start)
        self.spans: list[tuple[int, int, str]] = []  # (start, end, path)
        self.model_span: tuple[int, int] | None = None
        self.hooked: dict[Any, NodeInfo] = {}
        self.ordinals: dict[tuple[str, str], int] = {}
        self.leaves = 0
        self.executed: list[_NodeSlots] = []
        self.loss: int | None = None
        self.loss_seen = False
        self.started = False
        self.backward_done = False
        self.params: dict[int, tuple[str, int, int, int, int]] = {}  # id(p) -> name, slots
        self.olds: dict[int, torch.Tensor] = {}
        self.ratios: dict[int, int] = {}
        self.stepped = False
        self.handles: list[Any] = []


class Watch:
    """The context manager ``gradtrace.watch`` returns (see ``gradtrace.watch``)."""

    def __init__(
        self,
        model: nn.Module,
        path: Any,
        every: int = 1,
        *,
        rules: FlagRules | None = None,
        rank: int | None = None,
        full_trace: Callable[[nn.Module, Any], bytes | None] | None = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be a whole number of steps >= 1, got {every!r}")
        self.model = model
        self.path = path
        self.every = every
        self.rank = rank
        self.step = -1  # the current step (-1: none yet)
        self.flags = FlagState(rules or FlagRules())
        self._full_trace = full_trace
        self._params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self._names = {id(p): n for n, p in self._params}
        self._paths = {id(m): (name or MODEL) for name, m in model.named_modules()}
        self._pending: _Step | None = None
        self._handles: list[Any] = []
        self._writer: RunWriter | None = None
        self._backward: Any = None  # torch.autograd.backward while it is wrapped
        self._trace_next: str | None = "first logged step" if full_trace is not None else None
        self.last_nodes: int | None = None

    # ---- the context -----------------------------------------------------------------------
    def __enter__(self) -> Watch:
        rank = self.rank
        if rank is None:
            dist = torch.distributed
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        meta = {
            "every": self.every, "model": type(self.model).__name__, "torch": torch.__version__,
            "rank": rank,
        }  # fmt: skip
        params = [(n, str(list(p.shape)), p.numel()) for n, p in self._params]
        self._writer = RunWriter(self.path, meta, params, rank)
        self._handles = [
            self.model.register_forward_pre_hook(_Hook(self._on_forward_pre), with_kwargs=True),
            self.model.register_forward_hook(_Hook(self._on_forward)),
            register_optimizer_step_pre_hook(self._on_optimizer_pre),
            register_optimizer_step_post_hook(self._on_optimizer_post),
        ]
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._finish_pending()
        finally:
            self._unwrap_backward()
            for h in self._handles:
                h.remove()
            self._handles = []
            if self._pending is not None:
                self._drop(self._pending)
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    # ---- steps -------------------------------------------------------------------------------
    def _on_forward_pre(self, module: nn.Module, args: Any, kwargs: Any) -> None:
        if not torch.is_grad_enabled():
            return
        self._finish_pending()
        self.step += 1
        if self.step % self.every and self._trace_next is None:
            return
        if self._trace_next is not None and self._full_trace is not None:
            reason, self._trace_next = self._trace_next, None
            doc = self._full_trace(module, (args, kwargs))
            if doc is not None and self._writer is not None:
                self._writer.write_trace(self.step, reason, doc)
        step = self._pending = _Step(self.step)
        step.model_span = (sequence_base(), -1)
        step.handles = [
            nn.modules.module.register_module_forward_pre_hook(functools.partial(self._on_module_pre, step)),
            nn.modules.module.register_module_forward_hook(functools.partial(self._on_module, step)),
        ]

    def _on_module_pre(self, step: _Step, module: nn.Module, args: Any) -> None:
        path = self._paths.get(id(module))
        if path is not None:
            step.stack.append((id(module), path, sequence_base()))

    def _on_module(self, step: _Step, module: nn.Module, args: Any, output: Any) -> None:
        if step.stack and step.stack[-1][0] == id(module):
            _key, path, start = step.stack.pop()
            step.spans.append((start, sequence_base(), path))

    def _on_forward(self, module: nn.Module, args: Any, output: Any) -> None:
        step = self._pending
        if step is None or step.started or step.model_span is None or step.model_span[1] != -1:
            return
        for h in step.handles:
            h.remove()
        step.handles = []
        step.model_span = (step.model_span[0], sequence_base())
        roots = [t.grad_fn for t in _tensors(output) if t.grad_fn is not None]
        self._hook_new(step, roots)
        self._wrap_backward()

    def _wrap_backward(self) -> None:
        if self._backward is None:
            self._backward = original = torch.autograd.backward

            @functools.wraps(original)
            def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
                self._unwrap_backward()
                self._on_backward(tensors)
                return original(tensors, *args, **kwargs)

            torch.autograd.backward = backward

    def _unwrap_backward(self) -> None:
        if self._backward is not None:
            torch.autograd.backward = self._backward
            self._backward = None

    def _on_backward(self, tensors: Any) -> None:
        step = self._pending
        if step is None or step.started:
            return
        roots = list(_tensors(tensors))
        if len(roots) == 1 and roots[0].numel() == 1:
            loss = roots[0].detach().reshape(())
            step.loss = step.scalars.add(loss if loss.is_floating_point() else loss.double())
        self._hook_new(step, [t.grad_fn for t in roots if t.grad_fn is not None])

    # ---- the graph ---------------------------------------------------------------------------
    def _hook_new(self, step: _Step, roots: list[Any]) -> None:
        """Name and hook the nodes reachable from ``roots`` not hooked yet."""
        found = walk_new(roots, step.hooked)
        ops = []
        for node in found:
            nr = raw_sequence_nr(node)
            if nr is None:  # AccumulateGrad
                var = getattr(node, "variable", None)
                name = self._names.get(id(var)) if var is not None else None
                if name is None:
                    step.leaves += 1
                    info = NodeInfo(
                        f"{LEAF}/{_ACCUMULATE}#{step.leaves - 1}", LEAF, _ACCUMULATE, str(step.leaves - 1)
                    )
                else:
                    module, _, attr = name.rpartition(".")
                    info = NodeInfo(
                        f"{module or MODEL}/{_ACCUMULATE}#{attr}", module or MODEL, _ACCUMULATE, attr, name
                    )
                self._hook(step, node, info)
            else:
                ops.append((nr, node))
        ops.sort(key=lambda x: x[0])
        owner = _owners(step)
        for nr, node in ops:
            module, op = owner(nr), op_name(node)
            k = step.ordinals.get((module, op), 0)
            step.ordinals[(module, op)] = k + 1
            self._hook(step, node, NodeInfo(f"{module}/{op}#{k}", module, op, str(k)))

    def _hook(self, step: _Step, node: Any, info: NodeInfo) -> None:
        step.hooked[node] = info
        node.register_hook(functools.partial(self._on_node, step, info))

    def _on_node(self, step: _Step, info: NodeInfo, grad_inputs: Any, grad_outputs: Any) -> None:
        if step is not self._pending:
            return
        if not step.started:
            step.started = True
            self._unwrap_backward()
            torch.autograd.Variable._execution_engine.queue_callback(
                functools.partial(self._queue_last, step)
            )
        slots = _NodeSlots(info)
        add = step.scalars.add
        grad_in = _norm(grad_outputs)
        passed = grad_outputs if info.op == _ACCUMULATE else grad_inputs
        grad_out = grad_in if info.op == _ACCUMULATE else _norm(grad_inputs)
        slots.grad_in = None if grad_in is None else add(grad_in)
        slots.grad_out = None if grad_out is None else add(grad_out)
        counts = _counts(passed)
        if counts is not None:
            slots.nan, slots.inf = add(counts[0]), add(counts[1])
        if info.op in RELU_LIKE and grad_inputs and grad_inputs[0] is not None:
            g = grad_inputs[0]
            slots.zero, slots.zero_of = add((g == 0).sum()), g.numel()
        step.executed.append(slots)

    def _queue_last(self, step: _Step) -> None:
        # (queued from the first callback: it runs after every callback queued during the
        # backward, DDP's reduction among them)
        torch.autograd.Variable._execution_engine.queue_callback(
            functools.partial(self._after_backward, step)
        )

    def _after_backward(self, step: _Step) -> None:
        if step is not self._pending:
            return
        add = step.scalars.add
        for name, p in self._params:
            g = p.grad
            if g is None:
                continue
            counts = _counts((g,))
            assert counts is not None
            w = p.detach()
            step.params[id(p)] = (name, add(_one_norm(g)), add(_one_norm(w)), add(counts[0]), add(counts[1]))
        step.backward_done = True

    # ---- the optimizer -----------------------------------------------------------------------
    def _on_optimizer_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        step = self._pending
        if step is None or not step.backward_done:
            return
        for p in _optimizer_params(optimizer):
            if id(p) in step.params and id(p) not in step.ratios:
                step.olds[id(p)] = p.detach().clone()

    def _on_optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        step = self._pending
        if step is None or not step.backward_done:
            return
        for p in _optimizer_params(optimizer):
            old = step.olds.pop(id(p), None)
            if old is not None:
                delta = torch.linalg.vector_norm((p.detach() - old).to(torch.float32))
                step.ratios[id(p)] = step.scalars.add(delta / torch.linalg.vector_norm(old.to(torch.float32)))
        step.stepped = True
        if len(step.ratios) == len(step.params):
            self._finish_pending()

    # ---- writing -----------------------------------------------------------------------------
    def _finish_pending(self) -> None:
        step = self._pending
        if step is None:
            return
        self._pending = None
        if not step.backward_done:
            self._drop(step)  # a forward without its backward: nothing to log
            return
        self._write(step)

    def _drop(self, step: _Step) -> None:
        for h in step.handles:
            h.remove()
        step.handles = []
        if self._pending is step:
            self._pending = None

    def _write(self, step: _Step) -> None:
        v = step.scalars.read()

        def at(slot: int | None, default: float = 0.0) -> float:
            return default if slot is None else v[slot]

        nodes = step.executed
        zero = [None if s.zero is None else (v[s.zero] / s.zero_of if s.zero_of else 0.0) for s in nodes]
        params = list(step.params.items())
        ratios = [None if pid not in step.ratios else v[step.ratios[pid]] for pid, _ in params]
        record = StepRecord(
            step=step.index,
            loss=None if step.loss is None else v[step.loss],
            stepped=step.stepped,
            nodes=[s.info for s in nodes],
            grad_in=[at(s.grad_in) for s in nodes],
            grad_out=[at(s.grad_out) for s in nodes],
            zero_frac=zero,
            nan=[int(at(s.nan)) for s in nodes],
            inf=[int(at(s.inf)) for s in nodes],
            params=[name for _pid, (name, *_rest) in params],
            param_grad=[v[g] for _pid, (_n, g, _w, _a, _b) in params],
            param_norm=[v[w] for _pid, (_n, _g, w, _a, _b) in params],
            update_ratio=ratios,
            param_nan=[int(v[a]) for _pid, (_n, _g, _w, a, _b) in params],
            param_inf=[int(v[b]) for _pid, (_n, _g, _w, _a, b) in params],
        )
        self.last_nodes = len(nodes)
        weights = self._weights(record)
        flags = self.flags.check(
            record.step,
            record.loss,
            list(
                zip(
                    [n.key for n in record.nodes],
                    record.grad_in,
                    record.grad_out,
                    zero,
                    record.nan,
                    record.inf,
                    strict=True,
                )
            ),
            weights,
            list(
                zip(record.params, record.param_grad, ratios, record.param_nan, record.param_inf, strict=True)
            ),
        )
        if flags and self._trace_next is None and self._full_trace is not None:
            self._trace_next = f"flag: {flags[0].kind}"
        assert self._writer is not None
        self._writer.write_step(record, flags)

    def _weights(self, record: StepRecord) -> list[tuple[str, float]]:
        ndim = {n: p.dim() for n, p in self._params}
        return [
            (info.key, norm)
            for info, norm in zip(record.nodes, record.grad_in, strict=True)
            if info.param is not None and ndim.get(info.param, 0) >= 2
        ]


def _owners(step: _Step) -> Callable[[int], str]:
    """The module that made the node numbered ``nr``: the innermost module span around it."""
    starts: list[int] = []
    paths: list[str] = []
    stack: list[tuple[int, int, str]] = []
    model_start, model_end = step.model_span or (0, 0)

    def close_until(limit: int) -> None:
        while stack and stack[-1][1] <= limit:
            _s, end, _p = stack.pop()
            starts.append(end)
            paths.append(stack[-1][2] if stack else MODEL)

    for start, end, path in sorted(step.spans, key=lambda s: (s[0], -s[1])):
        close_until(start)
        starts.append(start)
        paths.append(path)
        stack.append((start, end, path))
    close_until(1 << 62)

    def owner(nr: int) -> str:
        if nr < model_start:
            return BEFORE
        if model_end != -1 and nr >= model_end:
            return LOSS
        k = bisect_right(starts, nr) - 1
        return paths[k] if k >= 0 else MODEL

    return owner


def _tensors(value: Any) -> Any:
    """The tensors in a forward's output (tensors, sequences, mappings, HF ModelOutput)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


def _optimizer_params(optimizer: Any) -> Any:
    for group in optimizer.param_groups:
        yield from group["params"]


class _Bound(nn.Module):
    """A model called with fixed keyword arguments (a full trace takes positional inputs)."""

    def __init__(self, inner: nn.Module, kwargs: dict[str, Any]) -> None:
        super().__init__()
        self.inner = inner
        self.kwargs = kwargs

    def forward(self, *args: Any) -> Any:
        return self.inner(*args, **self.kwargs)


def _loss_of(output: Any) -> Any:
    """The scalar a full trace backwards: a scalar output, an output's ``loss`` (Hugging
    Face), else the sum of the first tensor."""
    loss = getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor):
        return loss
    first = next(iter(_tensors(output)))
    return first if first.numel() == 1 else first.sum()


def full_trace(model: nn.Module, inputs: tuple[tuple[Any, ...], dict[str, Any]]) -> bytes | None:
    """A full gradtrace trace of one forward and backward of a copy of ``model`` on this
    step's inputs (TraceDoc JSON), the random state restored after it: the training's own
    step, weights and random numbers are untouched. Its loss is the output's own (a scalar
    output, a Hugging Face ``loss``), else the output's sum: the training loop's loss function
    is not known to the watch. None (with a warning) when the model cannot be traced."""
    from gradtrace.engine.run import trace_module
    from gradtrace.trace_schema import encode_doc

    args, kwargs = inputs
    devices = sorted({t.device.index or 0 for t in _tensors(list(args)) if t.device.type == "cuda"})
    try:
        with torch.random.fork_rng(devices=devices):
            twin = copy.deepcopy(model)
            for p in twin.parameters():
                p.grad = None
            traced = _Bound(twin, dict(kwargs)) if kwargs else twin
            doc = trace_module(traced, tuple(args), _loss_of, title=f"{type(model).__name__}: a watched step")
        return encode_doc(doc)
    except Exception as exc:  # (a model the tracer refuses: the run goes on without its trace)
        warnings.warn(
            f"gradtrace.watch: no full trace of this step ({type(exc).__name__}: {exc})",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
