"""``gradtrace.watch``: gradient flow over training steps, on the autograd graph's own nodes.

A step is one backward pass through the watched model: each forward of the model with grad
enabled starts one (steps count from 0). Steps ``0, every, 2*every, …`` are logged. On a
logged step, and only then, the watch

* numbers the modules' calls: global module hooks note each module's span of autograd
  sequence numbers, so every grad_fn node gets the module that made it, and a key
  ``module/op#ordinal`` (the ordinal counts that op's nodes within the module, in creation
  order) that is the same at every step. The spans, relative to the forward's start, are
  kept: a later logged forward that makes as many nodes reuses them without module hooks;
  one that makes another number is not logged, and the next step is, numbered again;
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
import math
import warnings
from bisect import bisect_right
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from gradtrace.engine.graph_walk import op_name, raw_sequence_nr, sequence_base, walk_new
from gradtrace.engine.watch_values import StepValues, exact_norms
from gradtrace.runs.flags import FlagRules, FlagState
from gradtrace.runs.store import NodeInfo, RunWriter, StepRecord

# Nodes whose backward zeroes the gradient where the forward clipped: their zero fraction
# is recorded (dead units show as a fraction near 1).
RELU_LIKE = frozenset({"ReluBackward0", "ThresholdBackward0", "HardtanhBackward0"})
_ACCUMULATE = "AccumulateGrad"
HOOK_SECONDS = 30e-6  # Python per hooked node on a logged step (tests/perf/bench.py, "watch")
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


class _Executed:
    """One node that ran in the step's backward: the slots (see ``watch_values``) of the
    gradients it received (``ins``) and passed on (``outs``)."""

    __slots__ = ("info", "ins", "outs", "zero", "zero_of")

    def __init__(
        self, info: NodeInfo, ins: list[int], outs: list[int], zero: int | None, zero_of: int
    ) -> None:
        self.info = info
        self.ins = ins
        self.outs = outs
        self.zero = zero
        self.zero_of = zero_of


class _Step:
    """What one logged step has gathered so far."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.values = StepValues()
        self.stack: list[tuple[int, str, int]] = []  # (id(module), path, start)
        self.spans: list[tuple[int, int, str]] = []  # (start, end, path)
        self.model_span: tuple[int, int] | None = None
        self.hooked: dict[Any, NodeInfo] = {}
        self.ordinals: dict[tuple[str, str], int] = {}
        self.leaves = 0
        self.executed: list[_Executed] = []
        self.edges: list[tuple[str, str]] = []  # (node, a node it passes a gradient to)
        self.loss: int | None = None
        self.loss_seen = False
        self.started = False
        self.backward_done = False
        self.params: dict[int, tuple[str, int, int]] = {}  # id(p) -> name, grad and weight norm slots
        self.olds_flat: list[tuple[list[Any], torch.Tensor]] = []  # (parameters, their flat copy)
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
        self._infos: dict[tuple[str, str, str], NodeInfo] = {}
        # The module spans of the last forward numbered with module hooks, relative to its
        # start, and how many nodes it made: a logged forward that makes as many reuses them
        # (no module hooks: they cost most of a logged step on small models)
        self._spans: tuple[list[tuple[int, int, str]], int] | None = None
        self._log_next = False

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

    # ---- the plan ----------------------------------------------------------------------------
    def plan(self, *args: Any, **kwargs: Any) -> str:
        """Print (and return) what a logged step will record and what it costs: the numbers
        and bytes written, the device work, the memory held. With example inputs
        (``w.plan(x)``, as the model is called) the graph is counted from one forward of a
        copy of the model (the random state restored: training is untouched); without, from
        the last logged step once there is one."""
        graph = _graph_size(self.model, args, kwargs) if args or kwargs else None
        if graph is None and self.last_nodes is not None:
            graph = {
                "nodes": self.last_nodes,
                "relu": 0,
                "grad_in": 0,
                "grad_out": 0,
                "from": "the last logged step",
            }
        n_params = len(self._params)
        p_elems = sum(p.numel() for _n, p in self._params)
        p_bytes = sum(p.numel() * p.element_size() for _n, p in self._params)
        lines = [
            f"gradtrace.watch plan: one step in {self.every} logged (steps 0, {self.every}, {2 * self.every}, ...)"
        ]
        if graph is None:
            lines.append(
                "  graph: not known yet (pass example inputs, w.plan(x), or ask after the first logged step)"
            )
            nodes = 0
        else:
            nodes = int(graph["nodes"])
            lines.append(f"  graph (from {graph['from']}): {nodes} grad_fn nodes, {graph['relu']} ReLU-like")
        numbers = 6 * nodes + 6 * n_params + 1
        lines.append(
            f"  recorded per logged step: 6 numbers per node, 6 per parameter ({n_params}), the loss: "
            f"{numbers:,} numbers, {4 * numbers + 24:,} bytes on disk (4 bytes each, one row)"
        )
        device = 4 * p_elems  # the gradients' and weights' norms, Δw and its norm
        if graph is not None and graph.get("grad_out"):
            device += int(graph["grad_out"])  # (an outgoing gradient is the next node's incoming one)
            lines.append(
                f"  device work per logged step: norms over {device:,} elements "
                f"({device / max(1, p_elems):.1f}x the parameters; small gradients normed together, "
                f"stacked by shape), and the zero counts of {graph['relu']} ReLU-like nodes"
            )
        else:
            lines.append(f"  device work per logged step: norms over at least {device:,} elements")
        lines.append(
            f"  memory: a copy of the {p_elems:,} parameters ({p_bytes / 1e6:.1f} MB) across the optimizer's "
            f"step (the update ratio); nothing kept between steps"
        )
        lines.append(
            f"  host reads: one transfer per logged step; Python: about {HOOK_SECONDS * 1e6:.0f} us per node "
            f"(~{HOOK_SECONDS * nodes * 1e3:.1f} ms per logged step, {HOOK_SECONDS * nodes * 1e3 / self.every:.2f} ms "
            "per step on average, measured on a CPU)"
        )
        text = "\n".join(lines)
        print(text)  # noqa: T201 (plan() is for reading)
        return text

    # ---- steps -------------------------------------------------------------------------------
    def _on_forward_pre(self, module: nn.Module, args: Any, kwargs: Any) -> None:
        if not torch.is_grad_enabled():
            return
        self._finish_pending()
        self.step += 1
        if self.step % self.every and self._trace_next is None and not self._log_next:
            return
        self._log_next = False
        if self._trace_next is not None and self._full_trace is not None:
            reason, self._trace_next = self._trace_next, None
            doc = self._full_trace(module, (args, kwargs))
            if doc is not None and self._writer is not None:
                self._writer.write_trace(self.step, reason, doc)
        step = self._pending = _Step(self.step)
        step.model_span = (sequence_base(), -1)
        if self._spans is not None:  # the last numbered forward's module spans, checked at its end
            return
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
        numbered = bool(step.handles)
        for h in step.handles:
            h.remove()
        step.handles = []
        start, end = step.model_span[0], sequence_base()
        step.model_span = (start, end)
        if numbered:
            self._spans = ([(a - start, b - start, path) for a, b, path in step.spans], end - start)
        elif self._spans is not None and self._spans[1] == end - start:
            step.spans = [(a + start, b + start, path) for a, b, path in self._spans[0]]
        else:  # this forward made another number of nodes: number the modules again, next step
            self._spans = None
            self._log_next = True
            self._drop(step)
            return
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
            step.loss = step.values.scalar(loss if loss.is_floating_point() else loss.double())
        self._hook_new(step, [t.grad_fn for t in roots if t.grad_fn is not None])

    # ---- the graph ---------------------------------------------------------------------------
    def _hook_new(self, step: _Step, roots: list[Any]) -> None:
        """Name and hook the nodes reachable from ``roots`` not hooked yet."""
        found = walk_new(roots, step.hooked)
        known = len(self._infos)
        ops = []
        for node in found:
            nr = raw_sequence_nr(node)
            if nr is None:  # AccumulateGrad
                var = getattr(node, "variable", None)
                name = self._names.get(id(var)) if var is not None else None
                if name is None:
                    step.leaves += 1
                    info = self._info(LEAF, _ACCUMULATE, str(step.leaves - 1))
                else:
                    module, _, attr = name.rpartition(".")
                    info = self._info(module or MODEL, _ACCUMULATE, attr, name)
                self._hook(step, node, info)
            else:
                ops.append((nr, node))
        ops.sort(key=_first)
        owner = _owners(step)
        ordinals = step.ordinals
        for nr, node in ops:
            module, op = owner(nr), op_name(node)
            k = ordinals.get((module, op), 0)
            ordinals[(module, op)] = k + 1
            self._hook(step, node, self._info(module, op, str(k)))
        if len(self._infos) == known:
            return  # no node the run has not seen: no edge it has not seen (a graph of known keys)
        hooked = step.hooked
        for node, nexts in found.items():  # the graph's edges, as keys (the viewer draws them)
            src = hooked[node].key
            step.edges.extend((src, hooked[fn].key) for fn, _nr in nexts if fn is not None and fn in hooked)

    def _info(self, module: str, op: str, ordinal: str, param: str | None = None) -> NodeInfo:
        """The node's record, made once per key for the whole run."""
        info = self._infos.get((module, op, ordinal))
        if info is None:
            info = self._infos[(module, op, ordinal)] = NodeInfo(
                f"{module}/{op}#{ordinal}", module, op, ordinal, param
            )
        return info

    def _hook(self, step: _Step, node: Any, info: NodeInfo) -> None:
        step.hooked[node] = info
        handle = node.register_hook(functools.partial(self._on_node, step, info))
        if info.op == _ACCUMULATE:  # (a parameter's accumulator outlives the step: unhooked at its end)
            step.handles.append(handle)

    def _on_node(self, step: _Step, info: NodeInfo, grad_inputs: Any, grad_outputs: Any) -> None:
        if step is not self._pending:
            return
        if not step.started:
            step.started = True
            self._unwrap_backward()
            torch.autograd.Variable._execution_engine.queue_callback(
                functools.partial(self._queue_last, step)
            )
        norm = step.values.norm
        ins = [norm(g) for g in grad_outputs if g is not None]
        if info.op == _ACCUMULATE:
            outs = ins
        else:
            outs = [norm(g) for g in grad_inputs if g is not None]
        zero, zero_of = None, 0
        if info.op in RELU_LIKE and grad_inputs and grad_inputs[0] is not None:
            zero, zero_of = step.values.zeros(grad_inputs[0]), grad_inputs[0].numel()
        step.executed.append(_Executed(info, ins, outs, zero, zero_of))

    def _queue_last(self, step: _Step) -> None:
        # (queued from the first callback: it runs after every callback queued during the
        # backward, DDP's reduction among them)
        torch.autograd.Variable._execution_engine.queue_callback(
            functools.partial(self._after_backward, step)
        )

    def _after_backward(self, step: _Step) -> None:
        if step is not self._pending:
            return
        with_grad = [(name, p) for name, p in self._params if p.grad is not None]
        with torch.no_grad():
            grads = step.values.scalars(exact_norms([p.grad for _n, p in with_grad]))  # type: ignore[misc]
            weights = step.values.scalars(exact_norms([p for _n, p in with_grad]))
        for (name, p), g, w in zip(with_grad, grads, weights, strict=True):
            step.params[id(p)] = (name, g, w)
        step.backward_done = True

    # ---- the optimizer -----------------------------------------------------------------------
    def _on_optimizer_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        step = self._pending
        if step is None or not step.backward_done:
            return
        todo = [p for p in _optimizer_params(optimizer) if id(p) in step.params and id(p) not in step.ratios]
        groups: dict[tuple[Any, Any], list[Any]] = {}
        for p in todo:
            groups.setdefault((p.device, p.dtype), []).append(p)
        with torch.no_grad():  # one flat copy per device and dtype (a copy per tensor costs more)
            for ps in groups.values():
                step.olds_flat.append((ps, torch.cat([p.reshape(-1) for p in ps])))

    def _on_optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        step = self._pending
        if step is None or not step.backward_done:
            return
        with torch.no_grad():
            for ps, old in step.olds_flat:
                old.sub_(torch.cat([p.reshape(-1) for p in ps]))  # (old - new: the norm of Δw)
                deltas = list(old.split([p.numel() for p in ps]))
                for p, slot in zip(ps, step.values.scalars(list(torch._foreach_norm(deltas))), strict=True):
                    step.ratios[id(p)] = slot
        step.olds_flat = []
        step.stepped = True
        if len(step.ratios) == len(step.params):
            self._finish_pending()

    # ---- writing -----------------------------------------------------------------------------
    def _finish_pending(self) -> None:
        step = self._pending
        if step is None:
            return
        self._drop(step)
        if step.backward_done:  # (else a forward without its backward: nothing to log)
            self._write(step)

    def _drop(self, step: _Step) -> None:
        for h in step.handles:
            h.remove()
        step.handles = []
        # the graph's nodes hold hooks that hold the step: the step lets go of the nodes, or
        # the cycle (through C++, out of the collector's sight) would keep every graph alive
        step.hooked = {}
        if self._pending is step:
            self._pending = None

    def _write(self, step: _Step) -> None:
        v = step.values.read()

        def norm(slots: list[int]) -> float:
            if len(slots) == 1:  # (most nodes)
                return v[slots[0]]
            return math.sqrt(sum(v[k] * v[k] for k in slots))

        nodes = step.executed
        nan_at = {k for k, x in enumerate(v) if x != x}
        inf_at = {k for k, x in enumerate(v) if x in (math.inf, -math.inf)}
        nans = [sum(k in nan_at for k in e.outs) for e in nodes] if nan_at else [0] * len(nodes)
        infs = [sum(k in inf_at for k in e.outs) for e in nodes] if inf_at else [0] * len(nodes)
        zero = [None if e.zero is None else (v[e.zero] / e.zero_of if e.zero_of else 0.0) for e in nodes]
        params = list(step.params.items())
        ratios: list[float | None] = []
        for pid, (_name, _g, w) in params:
            r = step.ratios.get(pid)
            ratios.append(None if r is None else (v[r] / v[w] if v[w] else math.inf if v[r] else 0.0))
        record = StepRecord(
            step=step.index,
            loss=None if step.loss is None else v[step.loss],
            stepped=step.stepped,
            nodes=[e.info for e in nodes],
            grad_in=[norm(e.ins) for e in nodes],
            grad_out=[norm(e.outs) for e in nodes],
            zero_frac=zero,
            nan=nans,
            inf=infs,
            params=[name for _pid, (name, _g, _w) in params],
            param_grad=[v[g] for _pid, (_n, g, _w) in params],
            param_norm=[v[w] for _pid, (_n, _g, w) in params],
            update_ratio=ratios,
            param_nan=[int(math.isnan(v[g])) for _pid, (_n, g, _w) in params],
            param_inf=[int(math.isinf(v[g])) for _pid, (_n, g, _w) in params],
            edges=step.edges,
        )
        self.last_nodes = len(nodes)
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
            self._weights(record),
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


_first = itemgetter(0)


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


def _graph_size(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The graph one forward of a copy of ``model`` makes: nodes, ReLU-like nodes, and the
    elements of the gradients flowing into (``grad_in``) and out of (``grad_out``) them."""
    with torch.random.fork_rng(devices=[]):
        twin = copy.deepcopy(model)
        output = twin(*args, **kwargs)
    found = walk_new([t.grad_fn for t in _tensors(output) if t.grad_fn is not None], set())
    grad_in = grad_out = relu = 0
    for node, nexts in found.items():
        if op_name(node) in RELU_LIKE:
            relu += 1
        grad_in += sum(_numel(m.shape) for m in node._input_metadata)  # (private, stable: shapes)
        for fn, nr in nexts:
            if fn is not None and nr < len(fn._input_metadata):
                grad_out += _numel(fn._input_metadata[nr].shape)
    return {
        "nodes": len(found),
        "relu": relu,
        "grad_in": grad_in,
        "grad_out": grad_out,
        "from": "the example inputs",
    }


def _numel(shape: Any) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
