"""Module specs: the named tree of leaf layers, Sequential lists and composite Modules (torch-free)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, PrivateAttr

from .ir import Program
from .leaves import (  # noqa: F401 (re-exported)
    LEAF_SPECS,
    LEAF_TYPES,
    BatchNorm1dSpec,
    Conv1dSpec,
    Conv2dSpec,
    DropoutSpec,
    EmbeddingSpec,
    FlattenSpec,
    GELUSpec,
    IdentitySpec,
    LayerNormSpec,
    LeafSpec,
    LinearSpec,
    LogSoftmaxSpec,
    MultiheadAttentionSpec,
    ReLUSpec,
    SigmoidSpec,
    SoftmaxSpec,
    TanhSpec,
)
from .values import (  # noqa: F401 (re-exported)
    HARD_MAX_DIM,
    MAX_LINE_LENGTH,
    MAX_PROGRAM_LINES,
    Dim,
    Name,
    ProgramLine,
    Shape,
    SpecModel,
)


class SequentialSpec(SpecModel):
    """torch.nn.Sequential: children are named "0", "1", … as torch names them."""

    type: Literal["Sequential"]
    layers: Annotated[list[ModuleSpec], Field(min_length=1, max_length=1000)]
    call_arity: ClassVar[int] = 1
    returns: ClassVar[int] = 1

    def children(self) -> dict[str, Any]:
        return {str(i): layer for i, layer in enumerate(self.layers)}


class CompositeSpec(SpecModel):
    """A real nn.Module subclass whose forward runs a program over its own children."""

    type: Literal["Module"]
    args: Annotated[list[Name], Field(min_length=1, max_length=16)]
    modules: Annotated[dict[Name, ModuleSpec], Field(max_length=1000)] = Field(default_factory=dict)
    forward: Annotated[list[ProgramLine], Field(min_length=1, max_length=MAX_PROGRAM_LINES)]
    _program: Any = PrivateAttr(default=None)  # the compiled Program, set by the spec validator

    @property
    def call_arity(self) -> int:
        return len(self.args)

    @property
    def returns(self) -> int:
        return self._program.returns if self._program is not None else 1

    @property
    def program(self) -> Program:
        """The compiled forward program."""
        return self._program

    def children(self) -> dict[str, Any]:
        return dict(self.modules)


ModuleSpec = Annotated[
    LinearSpec
    | Conv1dSpec
    | Conv2dSpec
    | EmbeddingSpec
    | LayerNormSpec
    | BatchNorm1dSpec
    | DropoutSpec
    | ReLUSpec
    | GELUSpec
    | TanhSpec
    | SigmoidSpec
    | SoftmaxSpec
    | LogSoftmaxSpec
    | IdentitySpec
    | FlattenSpec
    | MultiheadAttentionSpec
    | SequentialSpec
    | CompositeSpec,
    Field(discriminator="type"),
]

SequentialSpec.model_rebuild()
CompositeSpec.model_rebuild()


def module_children(spec: Any) -> dict[str, Any]:
    """Child specs by name ({} for leaves)."""
    return spec.children() if isinstance(spec, SequentialSpec | CompositeSpec) else {}


def walk_modules(modules: dict[str, Any], pointer_prefix: str = "/modules"):
    """Yield (dotted path, JSON pointer, spec, depth) for every module, parents first, in order."""
    stack = [(name, f"{pointer_prefix}/{name}", spec, 1) for name, spec in reversed(modules.items())]
    while stack:
        path, ptr, spec, depth = stack.pop()
        yield path, ptr, spec, depth
        if isinstance(spec, SequentialSpec):
            kids = [(f"{path}.{i}", f"{ptr}/layers/{i}", child) for i, child in enumerate(spec.layers)]
        elif isinstance(spec, CompositeSpec):
            kids = [(f"{path}.{n}", f"{ptr}/modules/{n}", child) for n, child in spec.modules.items()]
        else:
            kids = []
        stack.extend((p, q, c, depth + 1) for p, q, c in reversed(kids))


def parameter_shapes(modules: dict[str, Any]) -> dict[str, Shape]:
    """Every parameter's full name ("f1.f.weight") -> shape, in named_parameters() order."""
    out: dict[str, Shape] = {}
    for path, _ptr, spec, _depth in walk_modules(modules):
        if isinstance(spec, LeafSpec):
            for name, shape in spec.parameter_shapes().items():
                out[f"{path}.{name}"] = shape
    return out
