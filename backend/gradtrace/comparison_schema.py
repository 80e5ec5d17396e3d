"""The comparison of two traces of one model: gradtrace's diff format (schema version 1).

Torch-free, like the trace format it reads. Nodes of trace ``a`` and trace ``b`` are matched by
what they are, not by their ids (ids are discovery order, and a hook that inserts a node
shifts every later id): a leaf by its name, an op by its PyTorch class, module and the tensor
it made, counting repeats in creation order. Edges match when both ends match and they fill
the same input slot; hooks by what they hang on and their type.

A number "changed" when the two arrays differ beyond ``rtol`` (relative, 1e-6 by default) —
identical specs give identical traces, so an unchanged gradient compares equal to the bit.
``ratio`` is b / a when every element of a scales by the same factor (a ×2 hook gives 2.0),
else null: the least-squares factor, accepted when no element of b is further from it times a
than a tolerance of the dtype's rounding and the computation's depth allow (relative to the
largest magnitude: 32 machine epsilons per edge on the longest data path through the number's
node, never less than ``rtol``). A scaled run rounds differently at every operation (×3 or ×0.7
are not powers of two), so its gradients are rarely the exact multiples; a number that is all
rounding (a gradient that cancels to ~0, e.g. a bias before a BatchNorm) has no factor.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

COMPARE_SCHEMA_VERSION: Final = 1

Status = Literal["changed", "unchanged", "only_a", "only_b", "no_gradient", "not_comparable"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Side(_Model):
    title: str
    source: Literal["spec", "module", "program"]
    nodes: int
    edges: int
    permalink: str | None = None  # the stored spec it came from, when it did


class NumberDiff(_Model):
    """One tensor's numbers in a and in b (a gradient, a value, an edge's gradient)."""

    name: str  # grad/value name, or for an edge's gradient the edge's label (EdgeMatch.label)
    status: Status
    shape_a: list[int] | None = None
    shape_b: list[int] | None = None
    max_abs_diff: float | None = None
    ratio: float | None = None  # b / a when every element scales alike (see the module's docstring)
    norm_a: float | None = None
    norm_b: float | None = None


class NodeMatch(_Model):
    a: str
    b: str
    key: str  # what matched them, e.g. "op AddmmBackward0 in f0 (x1)"


class EdgeMatch(_Model):
    a: str
    b: str
    label: str  # the nodes it joins, by what matched them: "op MulBackward0 in f0 → leaf f0.weight"
    grads: list[NumberDiff] = Field(default_factory=list)  # one per backward pass both traces ran


class HookDiff(_Model):
    where: str  # the module path or tensor name the hook hangs on
    type: str
    status: Literal["same", "changed", "only_a", "only_b"]
    action_a: dict | None = None
    action_b: dict | None = None


class Matched(_Model):
    matched: list[NodeMatch] = Field(default_factory=list)
    only_a: list[str] = Field(default_factory=list)
    only_b: list[str] = Field(default_factory=list)


class EdgesMatched(_Model):
    matched: list[EdgeMatch] = Field(default_factory=list)
    only_a: list[str] = Field(default_factory=list)
    only_b: list[str] = Field(default_factory=list)


class Summary(_Model):
    changed_grads: list[str]  # names of final gradients that changed (x, f0.weight, …)
    unchanged_grads: list[str]
    changed_values: list[str]
    changed_edges: list[str]  # edge ids in ``b`` whose gradient changed in some pass
    inserted_nodes: list[str]  # ids in ``b`` that only ``b`` has
    removed_nodes: list[str]  # ids in ``a`` that only ``a`` has
    # The same three told by name (the nodes' keys: op, module, tensor), for people to read
    changed_edges_named: list[str] = Field(default_factory=list)
    inserted_nodes_named: list[str] = Field(default_factory=list)
    removed_nodes_named: list[str] = Field(default_factory=list)


class CompareDoc(_Model):
    """What ``POST /api/v1/compare`` and ``gradtrace.compare(a, b)`` return."""

    schema_version: Literal[1] = COMPARE_SCHEMA_VERSION
    rtol: float
    a: Side
    b: Side
    nodes: Matched
    edges: EdgesMatched
    hooks: list[HookDiff]
    grads: list[NumberDiff]
    values: list[NumberDiff]
    summary: Summary
