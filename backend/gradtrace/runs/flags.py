"""Flags: where on the graph, and from which step, a gradient goes wrong.

Each flag names a step and a node (a node key, see ``store``). A kind fires once per node
(``dead_relu``, ``stalled``) or once per run (``nonfinite``, ``vanishing``, ``exploding``):
a run of 100,000 steps keeps at most one flag per node and kind.

=============  ============================================================================
kind           fires when (thresholds: :class:`FlagRules`)
=============  ============================================================================
nonfinite      a NaN or inf first appears: the loss, else the first node in the engine's
               order whose outgoing gradients hold one, else a parameter's gradient
vanishing      along the engine's order, a weight's gradient (an AccumulateGrad node of a
               parameter of 2 or more dimensions) is below ``vanishing_ratio`` (1e-4) times
               the largest weight gradient before it: the norm shrank by that factor across
               the span of nodes between them
exploding      the same, above ``exploding_ratio`` (1e4) times the smallest before it
dead_relu      a ReLU-like node (ReLU, threshold, hardtanh/ReLU6) passes back at least
               ``dead_fraction`` (99%) zeros at each of ``window`` (5) logged steps in a row
stalled        a parameter's update ratio ‖Δw‖/‖w‖ stays below ``stalled_ratio`` (1e-7) at
               each of ``window`` logged steps in a row where the optimizer stepped it
=============  ============================================================================

Two more kinds are the watch's own, about the run rather than the gradients (no node; the
step itself ran as without gradtrace): ``no_full_trace``, a full trace the watch was to save
of a step was not saved, and why (the recorder could not read a tensor of the step, the graph
was past the node limit, …); ``not_logged``, a logged step's numbers were not recorded, and
why (the watch could not norm or read a gradient: a tensor subclass's), once per reason.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

NO_FULL_TRACE = "no_full_trace"  # (the watch's own kinds: see the module's docstring)
NOT_LOGGED = "not_logged"


@dataclass(frozen=True)
class Flag:
    """One anomaly: ``kind`` (see the module's table), the logged ``step`` it fired at, the
    ``node`` key (or parameter name for ``stalled``) and a ``message`` in words."""

    kind: str
    step: int
    node: str | None
    message: str


@dataclass(frozen=True)
class FlagRules:
    """The thresholds of the flags (documented in the module's table)."""

    vanishing_ratio: float = 1e-4
    exploding_ratio: float = 1e4
    dead_fraction: float = 0.99
    stalled_ratio: float = 1e-7
    window: int = 5


@dataclass
class FlagState:
    """What the flags remember between logged steps: bounded by the graph, not the run."""

    rules: FlagRules = field(default_factory=FlagRules)
    fired: set[tuple[str, str | None]] = field(default_factory=set)
    dead: dict[str, deque[bool]] = field(default_factory=dict)
    slow: dict[str, deque[bool]] = field(default_factory=dict)

    def check(
        self,
        step: int,
        loss: float | None,
        nodes: list[tuple[str, float, float, float | None, int, int]],
        weights: list[tuple[str, float]],
        params: list[tuple[str, float, float | None, int, int]],
    ) -> list[Flag]:
        """The flags that fire at ``step``.

        ``nodes``: (key, norm in, norm out, zero fraction or None, NaN count, inf count) in the
        engine's order; ``weights``: (AccumulateGrad node key, gradient norm) of the weights,
        in the engine's order; ``params``: (name, gradient norm, update ratio or None, NaN
        count, inf count)."""
        found: list[Flag] = []
        self._nonfinite(step, loss, nodes, params, found)
        self._spans(step, weights, found)
        for key, _gin, _gout, zero, _nan, _inf in nodes:
            if zero is not None and self._window(self.dead, key, zero >= self.rules.dead_fraction):
                self._fire(
                    found, "dead_relu", step, key,
                    f"{zero:.1%} of the gradient through {key} is zero, at each of the last "
                    f"{self.rules.window} logged steps",
                )  # fmt: skip
        for name, _g, ratio, _nan, _inf in params:
            if ratio is not None and self._window(self.slow, name, ratio < self.rules.stalled_ratio):
                self._fire(
                    found, "stalled", step, name,
                    f"{name} moves by {ratio:.2e} of its norm per step (under "
                    f"{self.rules.stalled_ratio:g} at each of the last {self.rules.window} logged steps)",
                )  # fmt: skip
        return found

    def _window(self, table: dict[str, deque[bool]], key: str, hit: bool) -> bool:
        seen = table.get(key)
        if seen is None:
            seen = table[key] = deque(maxlen=self.rules.window)
        seen.append(hit)
        return len(seen) == self.rules.window and all(seen)

    def _fire(self, found: list[Flag], kind: str, step: int, node: str | None, message: str) -> None:
        once = (kind, node if kind in ("dead_relu", "stalled") else None)
        if once not in self.fired:
            self.fired.add(once)
            found.append(Flag(kind, step, node, message))

    def _nonfinite(self, step: int, loss: float | None, nodes: list, params: list, found: list[Flag]) -> None:
        if ("nonfinite", None) in self.fired:
            return
        if loss is not None and not math.isfinite(loss):
            self._fire(found, "nonfinite", step, None, f"the loss is {loss}")
            return
        for key, _gin, _gout, _zero, nan, inf in nodes:
            if nan or inf:
                message = f"{key} passes back {nan} NaN and {inf} inf (the first node in the engine's order)"
                self._fire(found, "nonfinite", step, key, message)
                return
        for name, _g, _ratio, nan, inf in params:
            if nan or inf:
                self._fire(
                    found, "nonfinite", step, name, f"the gradient of {name} holds {nan} NaN and {inf} inf"
                )
                return

    def _spans(self, step: int, weights: list[tuple[str, float]], found: list[Flag]) -> None:
        usable = [(key, norm) for key, norm in weights if math.isfinite(norm) and norm > 0]
        if len(usable) < 2:
            return
        Span = tuple[float, tuple[str, float] | None, tuple[str, float] | None]
        low: Span = (math.inf, None, None)  # (ratio, node, the node before it)
        high: Span = (0.0, None, None)
        top = bottom = usable[0]
        for key, norm in usable[1:]:
            if norm / top[1] < low[0]:
                low = (norm / top[1], (key, norm), top)
            if norm / bottom[1] > high[0]:
                high = (norm / bottom[1], (key, norm), bottom)
            top = max(top, (key, norm), key=lambda kn: kn[1])
            bottom = min(bottom, (key, norm), key=lambda kn: kn[1])
        for kind, (ratio, at, before), hit in (
            ("vanishing", low, low[0] < self.rules.vanishing_ratio),
            ("exploding", high, high[0] > self.rules.exploding_ratio),
        ):
            if hit and at is not None and before is not None:
                message = (
                    f"the gradient reaching {at[0]} is {at[1]:.2e}, {ratio:.1e} times the "
                    f"{before[1]:.2e} reaching {before[0]} earlier in the backward"
                )
                self._fire(found, kind, step, at[0], message)
