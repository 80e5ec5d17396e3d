"""Leaf module specs: real torch.nn layers with their constructor arguments.

Each knows the shapes of the parameters torch will give it (in named_parameters() order), so
`init` values are shape-checked and parameter counts known before anything is built. Torch-free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from .values import Dim, Int, NestedNumbers, Shape, Size, SpecModel, literal_shape


class LeafSpec(SpecModel):
    """A real torch.nn layer. `init` maps parameter names to explicit values."""

    if TYPE_CHECKING:
        type: str  # each layer's own Literal (a field of the subclass: its order stays)

    init: Annotated[dict[str, NestedNumbers], Field(max_length=16)] | None = None
    call_arity: ClassVar[int] = 1  # positional tensors the module's forward takes
    returns: ClassVar[int] = 1  # values the call returns (MultiheadAttention: 2)
    ops: ClassVar[int] = 1  # tensor operations one call dispatches in its forward (for the price)

    def parameter_shapes(self) -> dict[str, Shape]:
        """Parameter name -> shape, in torch's named_parameters() order."""
        return {}

    @model_validator(mode="after")
    def _check_init(self) -> LeafSpec:
        shapes = self.parameter_shapes()
        for name, value in (self.init or {}).items():
            if name not in shapes:
                known = ", ".join(shapes) or "none"
                raise ValueError(f"init: {self.type} has no parameter {name[:64]!r} (parameters: {known})")
            got = literal_shape(value)
            if got != shapes[name]:
                raise ValueError(f"init: {name} has shape {list(got)}, expected {list(shapes[name])}")
        return self


def _pair(value: int | list[int], dims: int) -> Shape:
    return tuple(value) if isinstance(value, list) else (value,) * dims


class LinearSpec(LeafSpec):
    type: Literal["Linear"]
    ops: ClassVar[int] = 3
    in_features: Dim
    out_features: Dim
    bias: bool = True

    def parameter_shapes(self) -> dict[str, Shape]:
        shapes: dict[str, Shape] = {"weight": (self.out_features, self.in_features)}
        if self.bias:
            shapes["bias"] = (self.out_features,)
        return shapes


class _ConvSpec(LeafSpec):
    dims: ClassVar[int] = 1
    ops: ClassVar[int] = 2
    in_channels: Dim
    out_channels: Dim
    kernel_size: Dim | Annotated[list[Dim], Field(min_length=1, max_length=2)]
    stride: Dim | Annotated[list[Dim], Field(min_length=1, max_length=2)] = 1
    padding: Size | Annotated[list[Size], Field(min_length=1, max_length=2)] = 0
    bias: bool = True

    @model_validator(mode="after")
    def _check_lists(self) -> _ConvSpec:
        for field in ("kernel_size", "stride", "padding"):
            value = getattr(self, field)
            if isinstance(value, list) and len(value) != self.dims:
                raise ValueError(
                    f"{field} must be an int or a list of {self.dims} int{'s' if self.dims > 1 else ''}"
                )
        return self

    def parameter_shapes(self) -> dict[str, Shape]:
        shapes = {"weight": (self.out_channels, self.in_channels, *_pair(self.kernel_size, self.dims))}
        if self.bias:
            shapes["bias"] = (self.out_channels,)
        return shapes


class Conv1dSpec(_ConvSpec):
    type: Literal["Conv1d"]
    dims: ClassVar[int] = 1


class Conv2dSpec(_ConvSpec):
    type: Literal["Conv2d"]
    dims: ClassVar[int] = 2


class EmbeddingSpec(LeafSpec):
    type: Literal["Embedding"]
    ops: ClassVar[int] = 2
    num_embeddings: Dim
    embedding_dim: Dim

    def parameter_shapes(self) -> dict[str, Shape]:
        return {"weight": (self.num_embeddings, self.embedding_dim)}


class LayerNormSpec(LeafSpec):
    type: Literal["LayerNorm"]
    ops: ClassVar[int] = 2
    normalized_shape: Dim | Annotated[list[Dim], Field(min_length=1, max_length=8)]
    eps: Annotated[float, Field(gt=0)] = 1e-5
    elementwise_affine: bool = True
    bias: bool = True

    def parameter_shapes(self) -> dict[str, Shape]:
        if not self.elementwise_affine:
            return {}
        shape = _pair(self.normalized_shape, 1)
        return {"weight": shape, "bias": shape} if self.bias else {"weight": shape}


class BatchNorm1dSpec(LeafSpec):
    type: Literal["BatchNorm1d"]
    ops: ClassVar[int] = 3
    num_features: Dim
    eps: Annotated[float, Field(gt=0)] = 1e-5
    momentum: Annotated[float, Field(ge=0, le=1)] = 0.1
    affine: bool = True

    def parameter_shapes(self) -> dict[str, Shape]:
        n = (self.num_features,)
        return {"weight": n, "bias": n} if self.affine else {}


class DropoutSpec(LeafSpec):
    type: Literal["Dropout"]
    ops: ClassVar[int] = 2
    p: Annotated[float, Field(ge=0, le=1)] = 0.5


class ReLUSpec(LeafSpec):
    type: Literal["ReLU"]


class GELUSpec(LeafSpec):
    type: Literal["GELU"]
    approximate: Literal["none", "tanh"] = "none"


class TanhSpec(LeafSpec):
    type: Literal["Tanh"]


class SigmoidSpec(LeafSpec):
    type: Literal["Sigmoid"]


class SoftmaxSpec(LeafSpec):
    type: Literal["Softmax"]
    dim: Int


class LogSoftmaxSpec(LeafSpec):
    type: Literal["LogSoftmax"]
    dim: Int


class IdentitySpec(LeafSpec):
    type: Literal["Identity"]
    ops: ClassVar[int] = 0


class FlattenSpec(LeafSpec):
    type: Literal["Flatten"]
    start_dim: Int = 1
    end_dim: Int = -1


class MultiheadAttentionSpec(LeafSpec):
    type: Literal["MultiheadAttention"]
    ops: ClassVar[int] = 40
    embed_dim: Dim
    num_heads: Dim
    bias: bool = True
    batch_first: bool = False
    call_arity: ClassVar[int] = 3  # query, key, value
    returns: ClassVar[int] = 2  # (attn_output, attn_weights)

    @model_validator(mode="after")
    def _check_heads(self) -> MultiheadAttentionSpec:
        if self.embed_dim % self.num_heads:
            raise ValueError(
                f"embed_dim ({self.embed_dim}) must be divisible by num_heads ({self.num_heads})"
            )
        return self

    def parameter_shapes(self) -> dict[str, Shape]:
        e = self.embed_dim
        shapes: dict[str, Shape] = {"in_proj_weight": (3 * e, e)}
        if self.bias:
            shapes["in_proj_bias"] = (3 * e,)
        shapes["out_proj.weight"] = (e, e)
        if self.bias:
            shapes["out_proj.bias"] = (e,)
        return shapes


LEAF_SPECS: tuple[type[LeafSpec], ...] = (
    LinearSpec,
    Conv1dSpec,
    Conv2dSpec,
    EmbeddingSpec,
    LayerNormSpec,
    BatchNorm1dSpec,
    DropoutSpec,
    ReLUSpec,
    GELUSpec,
    TanhSpec,
    SigmoidSpec,
    SoftmaxSpec,
    LogSoftmaxSpec,
    IdentitySpec,
    FlattenSpec,
    MultiheadAttentionSpec,
)
LEAF_TYPES: tuple[str, ...] = tuple(cls.model_fields["type"].annotation.__args__[0] for cls in LEAF_SPECS)  # type: ignore[union-attr]
