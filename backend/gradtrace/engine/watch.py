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

The first logged step, and the step after a flag of a kind first fires (the first
``stalled`` flag arms one, not each parameter's), are also recorded in full as they run,
from the model's call to the end of its optimizer's step (step_capture.py: the trace the
player replays); the watch's own hooks are not in it (own_hooks.py).

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

import numpy as np
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from gradtrace.engine.forward_capture import drop_left_modes
from gradtrace.engine.graph_walk import op_name, raw_sequence_nr, sequence_base, walk_new
from gradtrace.engine.own_hooks import Own, OwnHook
from gradtrace.engine.recorder import owning_module
from gradtrace.engine.step_capture import StepTrace
from gradtrace.engine.watch_values import StepValues, copied_rows, exact_norms, norm_dtype
from gradtrace.runs.flags import NO_FULL_TRACE, NOT_LOGGED, Flag, FlagRules, FlagState
from gradtrace.runs.store import NodeInfo, RunWriter, StepRecord

# Nodes whose backward zeroes the gradient where the forward clipped: their zero fraction
# is recorded (dead units show as a fraction near 1).
RELU_LIKE = frozenset({"ReluBackward0", "ThresholdBackward0", "HardtanhBackward0"})
_ACCUMULATE = "AccumulateGrad"
HOOK_SECONDS = 20e-6  # Python per hooked node on a logged step (tests/perf/bench_watch.py, chain60 on a CPU)
MODEL = "(model)"  # the module path of the watched model's own ops
LOSS = "(loss)"  # ops after the model's forward (the loss)
BEFORE = "(input)"  # ops before it (inputs built with grad)
LEAF = "(leaf)"  # AccumulateGrad nodes of leaves that are not the model's parameters


def _on_step(method: Callable[..., None]) -> Callable[..., None]:
    """A method doing the watch's own work on the step it is given first: what that work
    raises (a gradient it cannot norm or read to the host, a tensor subclass's) is never raised
    into the training; it marks the step failed (``Watch._fail``), and the step goes on as
    without the watch."""

    @functools.wraps(method)
    def guarded(self: Watch, step: _Step, *args: Any) -> None:
        try:
            method(self, step, *args)
        except Exception as exc:  # noqa: BLE001 - never raised into the training (see _fail)
            self._fail(step, exc)

    return guarded


class _Step:
    """What one logged step has gathered so far."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.values = StepValues()
        self.stack: list[tuple[int, str, int]] = []  # (id(module), path, start)
        self.spans: list[tuple[int, int, str]] = []  # (start, end, path)
        self.model_span: tuple[int, int] | None = None
        self.hooked: dict[Any, NodeInfo] = {}
        # AccumulateGrad nodes listed by the hook of the one node that feeds them: node ->
        # (that hook's list, its entry)
        self.fed: dict[Any, tuple[list[tuple[int, NodeInfo]], tuple[int, NodeInfo]]] = {}
        self.ordinals: dict[tuple[str, str], int] = {}
        self.leaves = 0
        self.infos: list[NodeInfo] = []  # the nodes that ran, in the engine's order
        self.accumulates: list[int] = []  # (their indices: AccumulateGrad nodes)
        self.zeros: list[tuple[int, int, int]] = []  # (index, slot of the zero count, elements)
        self.edges: list[tuple[str, str]] = []  # (node, a node it passes a gradient to)
        self.loss: int | None = None
        self.loss_seen = False
        self.started = False
        self.numbered = False  # (this step's forward was numbered with module hooks)
        self.backward_done = False
        # id(p) -> [name, its gradient's norm slot, its weight's (None: not yet, see _weigh), p]
        self.params: dict[int, list[Any]] = {}
        self.olds: list[tuple[list[Any], torch.Tensor]] = []  # (parameters, a copy of them as rows)
        self.ratios: dict[int, int] = {}
        self.stepped = False
        self.handles: list[Any] = []
        self.failure: str | None = None  # what the watch's own work raised (the step is not logged)


class Watch(Own):
    """The context manager ``gradtrace.watch`` returns (see ``gradtrace.watch``)."""

    def __init__(
        self,
        model: nn.Module,
        path: Any,
        every: int = 1,
        *,
        rules: FlagRules | None = None,
        rank: int | None = None,
        full_traces: bool = True,
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
        self._full_traces = full_traces
        self._params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self._names = {id(p): n for n, p in self._params}
        self._paths = {id(m): (name or MODEL) for name, m in model.named_modules()}
        self._pending: _Step | None = None
        self._handles: list[Any] = []
        self._writer: RunWriter | None = None
        self._backward: Any = None  # torch.autograd.backward while it is wrapped
        # the reason the next step is traced in full (step_capture.py), its capture while on
        self._trace_next: str | None = "first logged step" if full_traces else None
        self._armed: set[str] = set()  # the flag kinds that have armed a full trace
        self._failures: set[str] = set()  # the reasons steps were not logged, told once each
        self._tracing: tuple[StepTrace, str] | None = None
        self._modes_left = False  # (a step capture's discovery mode is still to be dropped)
        self.last_nodes: int | None = None
        self._infos: dict[tuple[str, str, str], NodeInfo] = {}
        # The module spans of the last forward numbered with module hooks, relative to its
        # start, and how many nodes it made: a logged forward that makes as many reuses them
        # (no module hooks: they cost most of a logged step on small models)
        self._spans: tuple[list[tuple[int, int, str]], int] | None = None
        self._log_next = False
        self._weight_params: set[str] | None = None
        # the keys of the op nodes of the last forward numbered with module hooks, by their
        # place after the forward's start (sequence numbers), with their class
        self._template: dict[int, tuple[type, NodeInfo, tuple[tuple[int, int, NodeInfo], ...]]] = {}
        self._stepping: Any = None  # the optimizer whose step runs now
        self._on_cpu = False  # every parameter is on the CPU (read at __enter__)
        self._param_infos: dict[int, NodeInfo] = {}  # id(parameter) -> its AccumulateGrad node's

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
        self._on_cpu = all(p.device.type == "cpu" for _n, p in self._params)
        self._handles = [
            self.model.register_forward_pre_hook(OwnHook(self._on_forward_pre), with_kwargs=True),
            self.model.register_forward_hook(OwnHook(self._on_forward)),
            register_optimizer_step_pre_hook(self._on_optimizer_pre),
            register_optimizer_step_post_hook(self._on_optimizer_post),
        ]
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._end_trace(exc[1])
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
        if self._modes_left:
            self._modes_left = not drop_left_modes()
        if not torch.is_grad_enabled():
            return
        if self._tracing is not None:  # (a traced step whose forward no backward followed)
            self._end_trace(None)
        self._finish_pending()
        self.step += 1
        if self.step % self.every and self._trace_next is None and not self._log_next:
            return
        self._log_next = False
        if self._trace_next is not None:
            self._start_trace(module, args, kwargs)
        step = self._pending = _Step(self.step)
        step.model_span = (sequence_base(), -1)
        if self._spans is not None:  # the last numbered forward's module spans, checked at its end
            return
        step.handles = [
            nn.modules.module.register_module_forward_pre_hook(functools.partial(self._on_module_pre, step)),
            nn.modules.module.register_module_forward_hook(functools.partial(self._on_module, step)),
        ]

    # ---- full traces (the real step, recorded: step_capture.py) --------------------------
    def _start_trace(self, module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> None:
        reason, self._trace_next = self._trace_next, None
        assert reason is not None
        title = f"{type(module).__name__}: step {self.step} of a watched run ({reason})"
        tracing = StepTrace(module, args, kwargs, title, functools.partial(self._traced, self.step, reason))
        if tracing.start():
            self._tracing = (tracing, reason)
        else:
            self._no_full_trace(self.step, reason, tracing.failure)

    def _traced(self, index: int, reason: str, doc: bytes | None, failure: str | None) -> None:
        """The traced step's capture is over (its backward ended, or its recording failed:
        no ``doc``, the ``failure``; inside the step: its discovery mode is dropped at the
        watch's next hook)."""
        self._tracing = None
        self._modes_left = True
        if doc is None:
            self._no_full_trace(index, reason, failure)
        elif self._writer is not None:
            self._writer.write_trace(index, reason, doc)

    def _no_full_trace(self, index: int, reason: str, failure: str | None) -> None:
        """The step's full trace is not saved: a ``no_full_trace`` flag says why, in the run."""
        if self._writer is not None:
            message = (
                f"the full trace of step {index} ({reason}) was not saved: {failure}; "
                "the step itself ran as without gradtrace"
            )
            self._writer.write_flags([Flag(NO_FULL_TRACE, index, None, message)])

    def _end_trace(self, exc: BaseException | None) -> None:
        """A step capture still on comes off without a trace (its forward had no backward, or
        the loop raised: ``exc``); the next logged step is traced instead."""
        if self._tracing is not None:
            (tracing, reason), self._tracing = self._tracing, None
            if exc is None and tracing.backward_done:  # (no optimizer step followed its backward)
                tracing.finish()
            else:
                if exc is None and not tracing.failed:
                    self._trace_next = reason
                tracing.abandon()
        if self._modes_left:
            self._modes_left = not drop_left_modes()

    def _on_module_pre(self, step: _Step, module: nn.Module, args: Any) -> None:
        path = self._paths.get(id(module))
        if path is not None:
            step.stack.append((id(module), path, sequence_base()))

    def _on_module(self, step: _Step, module: nn.Module, args: Any, output: Any) -> None:
        if step.stack and step.stack[-1][0] == id(module):
            _key, path, start = step.stack.pop()
            step.spans.append((start, sequence_base(), path))

    def _on_forward(self, module: nn.Module, args: Any, output: Any) -> None:
        if self._tracing is not None:
            tracing = self._tracing[0]
            with tracing.quiet():
                tracing.forward_ended(output)
                if self._pending is not None:
                    self._forward_ended(self._pending, output)
        elif self._pending is not None:
            self._forward_ended(self._pending, output)

    @_on_step
    def _forward_ended(self, step: _Step, output: Any) -> None:
        if step.started or step.model_span is None or step.model_span[1] != -1:
            return
        numbered = bool(step.handles)
        for h in step.handles:
            h.remove()
        step.handles = []
        start, end = step.model_span[0], sequence_base()
        step.model_span = (start, end)
        step.numbered = numbered
        if numbered:
            self._spans = ([(a - start, b - start, path) for a, b, path in step.spans], end - start)
            self._template = {}
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
                if self._pending is not None:
                    self._on_backward(self._pending, tensors)
                return original(tensors, *args, **kwargs)

            torch.autograd.backward = backward

    def _unwrap_backward(self) -> None:
        if self._backward is not None:
            torch.autograd.backward = self._backward
            self._backward = None

    @_on_step
    def _on_backward(self, step: _Step, tensors: Any) -> None:
        if step.started:
            return
        roots = list(_tensors(tensors))
        if len(roots) == 1 and roots[0].numel() == 1:
            loss = roots[0].detach().reshape(())
            step.loss = step.values.scalar(loss if loss.is_floating_point() else loss.double())
        self._hook_new(step, [t.grad_fn for t in roots if t.grad_fn is not None])

    # ---- the graph ---------------------------------------------------------------------------
    def _hook_new(self, step: _Step, roots: list[Any]) -> None:
        """Name and hook the nodes reachable from ``roots`` not hooked yet.

        A parameter's AccumulateGrad node fed by one node only is not hooked: what it
        accumulates is what that node passes it, read by that node's hook, and the engine
        runs it right after that node (its priority is the highest), where the hook lists it
        (several fed by one node: in the order of its inputs). A hook per node costs about
        6 us on a CPU (registering it, PyTorch calling it, removing it: an accumulator
        outlives the step); most models have as many of them as op nodes."""
        found = walk_new(roots, step.hooked)
        if step.fed:
            self._unfeed(step, found)
        if self._named_as_before(step, found):
            return
        known = len(self._infos)
        ops = []
        accumulates = {}
        for node in found:
            nr = raw_sequence_nr(node)
            if nr is None:  # AccumulateGrad
                accumulates[node] = self._accumulate_info(step, node)
            else:
                ops.append((nr, node))
        feeds = _single_feeds(found, accumulates)
        for node, info in accumulates.items():
            if node in feeds:
                step.hooked[node] = info
            else:
                self._hook(step, node, info)
        ops.sort(key=_first)
        owner = _owners(step)
        ordinals = step.ordinals
        start = step.model_span[0] if step.model_span is not None else 0
        for nr, node in ops:
            module, op = owner(nr), op_name(node)
            k = ordinals.get((module, op), 0)
            ordinals[(module, op)] = k + 1
            info = self._info(module, op, str(k))
            fed = [
                (j, id(found[node][j][0].variable), accumulates[found[node][j][0]])
                for j in feeds.get(node, ())
            ]
            self._hook(step, node, info, self._feed(step, node, found, fed))
            self._template[nr - start] = (type(node), info, tuple(fed))
        if len(self._infos) == known:
            return  # no node the run has not seen: no edge it has not seen (a graph of known keys)
        hooked = step.hooked
        for node, nexts in found.items():  # the graph's edges, as keys (the viewer draws them)
            src = hooked[node].key
            step.edges.extend((src, hooked[fn].key) for fn, _nr in nexts if fn is not None and fn in hooked)

    def _feed(
        self, step: _Step, node: Any, found: dict[Any, tuple], fed: list[tuple[int, int, NodeInfo]]
    ) -> list[tuple[int, NodeInfo]]:
        """The AccumulateGrad nodes ``node``'s hook lists after it: (input, node record); each
        remembered in ``step.fed`` (a node found later that feeds it too gets it hooked)."""
        feeds = [(j, info) for j, _pid, info in fed]
        for j, _pid, info in fed:
            acc = found[node][j][0]
            step.hooked[acc] = info
            step.fed[acc] = (feeds, (j, info))
        return feeds

    def _unfeed(self, step: _Step, found: dict[Any, tuple]) -> None:
        """Nodes found after the forward's end (the loss) that feed an AccumulateGrad node
        listed by its feeder's hook: it has two feeders, its own hook now (before the backward)."""
        for nexts in found.values():
            for fn, _nr in nexts:
                entry = step.fed.pop(fn, None) if fn is not None else None
                if entry is not None:
                    feeds, item = entry
                    feeds.remove(item)
                    self._hook(step, fn, item[1])

    def _named_as_before(self, step: _Step, found: dict[Any, tuple]) -> bool:
        """Hook ``found`` under the keys of the forward numbered before (``_template``: the
        node at the same place after the forward's start, of the same class, feeding the
        same parameters' AccumulateGrad nodes), if every op node has one (forwards that make
        as many nodes: the same code, most of the time)."""
        template = self._template
        if not template or step.numbered or step.model_span is None:
            return False
        start = step.model_span[0]
        named: list[tuple[Any, NodeInfo, tuple]] = []
        accumulates = []
        fed = set()
        for node in found:
            nr = raw_sequence_nr(node)
            if nr is None:
                accumulates.append(node)
                continue
            known = template.get(nr - start)
            if known is None or known[0] is not type(node):
                return False
            for j, pid, _info in known[2]:
                acc = found[node][j][0]
                if acc is None or id(getattr(acc, "variable", None)) != pid:
                    return False
                fed.add(acc)
            named.append((node, known[1], known[2]))
        for node, info, feeds in named:
            self._hook(step, node, info, self._feed(step, node, found, list(feeds)) if feeds else None)
        for node in accumulates:
            if node not in fed:
                self._hook(step, node, self._accumulate_info(step, node))
        return True

    def _accumulate_info(self, step: _Step, node: Any) -> NodeInfo:
        var = getattr(node, "variable", None)
        info = self._param_infos.get(id(var))
        if info is not None:
            return info
        name = self._names.get(id(var)) if var is not None else None
        if name is None:
            step.leaves += 1
            return self._info(LEAF, _ACCUMULATE, str(step.leaves - 1))
        module = owning_module(name)  # (none for a container's member: params["fc1.weight"])
        attr = name[len(module) + 1 :] if module else name
        info = self._param_infos[id(var)] = self._info(module or MODEL, _ACCUMULATE, attr, name)
        return info

    def _info(self, module: str, op: str, ordinal: str, param: str | None = None) -> NodeInfo:
        """The node's record, made once per key for the whole run."""
        info = self._infos.get((module, op, ordinal))
        if info is None:
            info = self._infos[(module, op, ordinal)] = NodeInfo(
                f"{module}/{op}#{ordinal}", module, op, ordinal, param
            )
        return info

    def _hook(
        self, step: _Step, node: Any, info: NodeInfo, feeds: list[tuple[int, NodeInfo]] | None = None
    ) -> None:
        step.hooked[node] = info
        if info.op == _ACCUMULATE:  # (a parameter's accumulator outlives the step: unhooked at its end)
            step.handles.append(node.register_hook(functools.partial(self._on_accumulate, step, info)))
        elif info.op in RELU_LIKE:
            node.register_hook(functools.partial(self._on_relu, step, info, feeds))
        elif feeds:
            node.register_hook(functools.partial(self._on_feeder, step, info, feeds))
        else:
            node.register_hook(functools.partial(self._on_node, step, info))

    # (a hook per node that ran: it keeps the gradients for the norms, computed together)
    @_on_step
    def _on_node(self, step: _Step, info: NodeInfo, grad_inputs: Any, grad_outputs: Any) -> None:
        if step is not self._pending or step.failure is not None:
            return
        if not step.started:
            self._start(step)
        k = 2 * len(step.infos)
        step.infos.append(info)
        step.values.hold(grad_outputs, k)
        step.values.hold(grad_inputs, k + 1)

    @_on_step
    def _on_feeder(
        self,
        step: _Step,
        info: NodeInfo,
        feeds: list[tuple[int, NodeInfo]],
        grad_inputs: Any,
        grad_outputs: Any,
    ) -> None:
        k = len(step.infos)
        self._on_node(step, info, grad_inputs, grad_outputs)
        if len(step.infos) == k or step.failure is not None:
            return
        for j, acc in feeds:  # the AccumulateGrad nodes it feeds run next
            k = len(step.infos)
            step.accumulates.append(k)
            step.values.hold(grad_inputs[j : j + 1], 2 * k)
            step.infos.append(acc)

    @_on_step
    def _on_accumulate(self, step: _Step, info: NodeInfo, grad_inputs: Any, grad_outputs: Any) -> None:
        if step is not self._pending or step.failure is not None:
            return
        if not step.started:
            self._start(step)
        step.accumulates.append(len(step.infos))  # (what it accumulates is what it passes on)
        step.values.hold(grad_outputs, 2 * len(step.infos))
        step.infos.append(info)

    @_on_step
    def _on_relu(self, step: _Step, info: NodeInfo, feeds: Any, grad_inputs: Any, grad_outputs: Any) -> None:
        k = len(step.infos)
        if feeds:
            self._on_feeder(step, info, feeds, grad_inputs, grad_outputs)
        else:
            self._on_node(step, info, grad_inputs, grad_outputs)
        g = grad_inputs[0] if grad_inputs else None
        if g is not None and len(step.infos) > k and step.failure is None:
            step.zeros.append((k, step.values.zeros(g), g.numel()))

    def _start(self, step: _Step) -> None:
        step.started = True
        self._unwrap_backward()
        torch.autograd.Variable._execution_engine.queue_callback(functools.partial(self._queue_last, step))

    def _queue_last(self, step: _Step) -> None:
        # (queued from the first callback: it runs after every callback queued during the
        # backward, DDP's reduction among them)
        torch.autograd.Variable._execution_engine.queue_callback(
            functools.partial(self._after_backward, step)
        )

    @_on_step
    def _after_backward(self, step: _Step) -> None:
        if step is not self._pending:
            return
        step.backward_done = True
        if step.failure is not None:
            return
        with_grad = [(name, p) for name, p in self._params if p.grad is not None]
        with torch.no_grad():
            grads = step.values.scalars(exact_norms([p.grad for _n, p in with_grad], self._on_cpu))  # type: ignore[misc]
        for (name, p), g in zip(with_grad, grads, strict=True):
            step.params[id(p)] = [name, g, None, p]
        if self._stepping is not None:  # (the backward of an optimizer's closure)
            self._copy_before_step(step, self._stepping)

    # ---- the optimizer -----------------------------------------------------------------------
    def _on_optimizer_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        # (an optimizer stepped with a closure, as Lightning does, runs the forward and the
        # backward inside its step: the copy is then taken at the backward's end)
        if self._modes_left:
            self._modes_left = not drop_left_modes()
        if self._tracing is not None:  # (a traced step's optimizer step: in its trace)
            self._tracing[0].optimizer_began(optimizer, args, kwargs)
        self._stepping = optimizer
        step = self._pending
        if step is not None and step.backward_done:
            self._copy_before_step(step, optimizer)

    @_on_step
    def _copy_before_step(self, step: _Step, optimizer: Any) -> None:
        if step.failure is not None:
            return
        params = step.params
        todo = [p for p in _optimizer_params(optimizer) if id(p) in params and params[id(p)][2] is None]
        with torch.no_grad():  # a copy of the parameters, as the rows of one tensor per shape
            for ps, old in copied_rows(todo):
                # (the weights' norms before the step, from the copy: not another pass over them)
                norms = torch.linalg.vector_norm(old, dim=1, dtype=norm_dtype(old.dtype))
                for p, slot in zip(ps, step.values.vector(norms), strict=True):
                    params[id(p)][2] = slot
                step.olds.append((ps, old))

    def _on_optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._stepping = None
        if self._tracing is not None:  # (the traced step is over with its optimizer's step)
            self._tracing[0].optimizer_ended(optimizer, args, kwargs)
        step = self._pending
        if step is None or not step.backward_done:
            return
        self._updates(step)
        step.olds = []
        step.stepped = True
        if step.failure is not None or len(step.ratios) == len(step.params):
            self._finish_pending()

    @_on_step
    def _updates(self, step: _Step) -> None:
        """‖Δw‖ of the stepped parameters, from the copies made before the step."""
        if step.failure is not None:
            return
        with torch.no_grad():
            for ps, old in step.olds:
                new = torch.stack(ps).reshape(len(ps), -1) if len(ps) > 1 else ps[0].reshape(1, -1)
                old.sub_(new)  # (old - new: the norm of Δw)
                norms = torch.linalg.vector_norm(old, dim=1, dtype=norm_dtype(old.dtype))
                for p, slot in zip(ps, step.values.vector(norms), strict=True):
                    step.ratios[id(p)] = slot

    # ---- writing -----------------------------------------------------------------------------
    def _finish_pending(self) -> None:
        step = self._pending
        if step is None:
            return
        self._drop(step)
        if not step.backward_done:  # (a forward without its backward: nothing to log)
            return
        self._log(step)
        if step.failure is not None:
            self._not_logged(step)

    @_on_step
    def _log(self, step: _Step) -> None:
        if step.failure is None:
            self._weigh(step)
            self._write(step)

    def _fail(self, step: _Step, exc: Exception) -> None:
        """The watch's own work on ``step`` raised ``exc`` (a gradient it cannot norm or read
        to the host, a tensor subclass's): the step goes on as without the watch, and is not
        logged; the run says why (``_not_logged``)."""
        if step.failure is None:
            step.failure = f"{type(exc).__name__}: {exc}"

    def _not_logged(self, step: _Step) -> None:
        """A ``not_logged`` flag and a warning the first time a failure is met (the same one
        at later steps: not again)."""
        why = step.failure or "unknown"
        if why in self._failures:
            return
        self._failures.add(why)
        message = f"step {step.index} was not logged: {why}; the step itself ran as without gradtrace"
        warnings.warn(f"gradtrace.watch: {message}", RuntimeWarning, stacklevel=2)
        try:
            if self._writer is not None:
                self._writer.write_flags([Flag(NOT_LOGGED, step.index, None, message)])
        except Exception as exc:  # noqa: BLE001 - the run's file failed too: the warning says so
            warnings.warn(
                f"gradtrace.watch: the run could not be written ({exc})", RuntimeWarning, stacklevel=2
            )

    def _weigh(self, step: _Step) -> None:
        """The weights' norms of the parameters no optimizer stepped (the others' were taken
        from their copy before the step): unchanged since the backward."""
        rest = [entry for entry in step.params.values() if entry[2] is None]
        if rest:
            with torch.no_grad():
                for entry, slot in zip(rest, step.values.norms([e[3] for e in rest]), strict=True):
                    entry[2] = slot

    def _drop(self, step: _Step) -> None:
        for h in step.handles:
            h.remove()
        step.handles = []
        # the graph's nodes hold hooks that hold the step: the step lets go of the nodes, or
        # the cycle (through C++, out of the collector's sight) would keep every graph alive
        step.hooked = {}
        step.fed = {}
        if self._pending is step:
            self._pending = None

    def _write(self, step: _Step) -> None:
        v = step.values.read()
        n = len(step.infos)
        norm, nan, inf = step.values.per_owner(v, 2 * n)
        grad_in, grad_out = norm[0::2], norm[1::2]
        nan, inf = nan[1::2], inf[1::2]  # (of the gradients a node passes on)
        if step.accumulates:  # an AccumulateGrad node passes on what it accumulates
            acc = np.asarray(step.accumulates, dtype=np.int64)
            grad_out[acc] = grad_in[acc]
            nan[acc], inf[acc] = np.isnan(grad_in[acc]), np.isinf(grad_in[acc])
        zero: list[float | None] = [None] * n
        for k, slot, numel in step.zeros:
            zero[k] = v[slot] / numel if numel else 0.0
        params = list(step.params.values())
        ratios: list[float | None] = [None] * len(params)
        for i, pid in enumerate(step.params):
            r = step.ratios.get(pid)
            if r is not None:
                w = v[params[i][2]]
                ratios[i] = v[r] / w if w else math.inf if v[r] else 0.0
        param_grad = v[[g for _n, g, _w, _p in params]]
        param_nan = np.isnan(param_grad).astype(np.int64)
        param_inf = np.isinf(param_grad).astype(np.int64)
        record = StepRecord(
            step=step.index,
            loss=None if step.loss is None else float(v[step.loss]),
            stepped=step.stepped,
            nodes=step.infos,
            grad_in=grad_in,
            grad_out=grad_out,
            zero_frac=zero,
            nan=nan,
            inf=inf,
            params=[name for name, _g, _w, _p in params],
            param_grad=param_grad,
            param_norm=v[[w for _n, _g, w, _p in params]],
            update_ratio=ratios,
            param_nan=param_nan,
            param_inf=param_inf,
            edges=step.edges,
        )
        self.last_nodes = n
        infos = step.infos
        odd = np.flatnonzero((nan > 0) | (inf > 0)).tolist()  # (the nodes the flags look at one by one)
        for k, _slot, _numel in step.zeros:
            odd.append(k)
        flags = self.flags.check(
            record.step,
            record.loss,
            [
                (infos[k].key, grad_in[k], grad_out[k], zero[k], int(nan[k]), int(inf[k]))
                for k in sorted(set(odd))
            ],
            self._weights(step.infos, grad_in),
            list(
                zip(
                    record.params,
                    param_grad.tolist(),
                    ratios,
                    param_nan.tolist(),
                    param_inf.tolist(),
                    strict=True,
                )
            ),
        )
        armed = [kind for kind in dict.fromkeys(f.kind for f in flags) if kind not in self._armed]
        if armed and self._full_traces:  # (a kind's later flags, at other nodes, arm nothing)
            self._armed.update(armed)
            why = "flag: " + ", ".join(armed)
            self._trace_next = why if self._trace_next is None else f"{self._trace_next}; {why}"
        assert self._writer is not None
        self._writer.write_step(record, flags)

    def _weights(self, infos: list[NodeInfo], grad_in: np.ndarray) -> list[tuple[str, float]]:
        """(AccumulateGrad node key, gradient norm) of the weights (parameters of 2 or more
        dimensions), in the engine's order."""
        if self._weight_params is None:
            self._weight_params = {n for n, p in self._params if p.dim() >= 2}
        weights = self._weight_params
        return [
            (info.key, float(grad_in[k]))
            for k, info in enumerate(infos)
            if info.param is not None and info.param in weights
        ]


_first = itemgetter(0)


def _single_feeds(found: dict[Any, tuple], accumulates: dict[Any, NodeInfo]) -> dict[Any, list[int]]:
    """The parameters' AccumulateGrad nodes among ``accumulates`` fed by exactly one node of
    ``found`` (through one input): feeder -> the inputs that feed them."""
    feeders: dict[Any, list[tuple[Any, int]]] = {}
    for node, nexts in found.items():
        for j, (fn, _nr) in enumerate(nexts):
            if fn is not None and fn in accumulates:
                feeders.setdefault(fn, []).append((node, j))
    feeds: dict[Any, list[int]] = {}
    for acc, by in feeders.items():
        if len(by) == 1 and accumulates[acc].param is not None:
            feeds.setdefault(by[0][0], []).append(by[0][1])
    return feeds


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
