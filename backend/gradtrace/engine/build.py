"""Build the nn.Module tree and the input tensors of a spec, seeded by a per-trace Generator.

Draw order (so the seeds' numbers come out bit-identical): inputs in declared order, then
module parameters in module order, each layer initialised exactly as its own
reset_parameters() would, but from `generator` instead of the global RNG; explicit `init`
values override last. Modules are constructed on the meta device first, so building never
touches torch's global RNG.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn import init

from gradtrace.problem import public_text
from gradtrace.spec import SpecError
from gradtrace.spec.models import InputSpec, ModelSpec
from gradtrace.spec.modules import CompositeSpec, LeafSpec, SequentialSpec, walk_modules
from gradtrace.spec.program import Program

from .interpreter import ProgramModule, run_program

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64}


@dataclass
class BuiltModel:
    root: nn.Module
    inputs: dict[str, torch.Tensor]
    program: Program
    spec: ModelSpec | None = None
    modules: dict[str, nn.Module] = field(default_factory=dict)  # top-level children by name


class SpecRoot(nn.Module):
    """The root model: its children are the spec's top-level modules (so parameters are
    named "f0.weight", "f1.f.weight"); forward(env) runs the top-level program."""

    spec_type = "Root"

    def __init__(self, program: Program) -> None:
        super().__init__()
        self.program = program

    def forward(self, env: dict[str, Any]) -> dict[str, Any]:
        return run_program(self.program, env, dict(self.named_children()))


# ---- leaf builders (registry: spec type -> constructor) -----------------------------------
Factory = dict[str, Any]  # {"device": ..., "dtype": ...}

LEAF_BUILDERS: dict[str, Callable[[Any, Factory], nn.Module]] = {
    "Linear": lambda s, f: nn.Linear(s.in_features, s.out_features, bias=s.bias, **f),
    "Conv1d": lambda s, f: nn.Conv1d(
        s.in_channels, s.out_channels, s.kernel_size, stride=s.stride, padding=s.padding, bias=s.bias, **f
    ),
    "Conv2d": lambda s, f: nn.Conv2d(
        s.in_channels,
        s.out_channels,
        _tuple(s.kernel_size),
        stride=_tuple(s.stride),
        padding=_tuple(s.padding),
        bias=s.bias,
        **f,
    ),
    "Embedding": lambda s, f: nn.Embedding(s.num_embeddings, s.embedding_dim, **f),
    "LayerNorm": lambda s, f: nn.LayerNorm(
        _tuple(s.normalized_shape), eps=s.eps, elementwise_affine=s.elementwise_affine, bias=s.bias, **f
    ),
    "BatchNorm1d": lambda s, f: nn.BatchNorm1d(
        s.num_features, eps=s.eps, momentum=s.momentum, affine=s.affine, **f
    ),
    "Dropout": lambda s, f: nn.Dropout(s.p),
    "ReLU": lambda s, f: nn.ReLU(),
    "GELU": lambda s, f: nn.GELU(approximate=s.approximate),
    "Tanh": lambda s, f: nn.Tanh(),
    "Sigmoid": lambda s, f: nn.Sigmoid(),
    "Softmax": lambda s, f: nn.Softmax(dim=s.dim),
    "LogSoftmax": lambda s, f: nn.LogSoftmax(dim=s.dim),
    "Identity": lambda s, f: nn.Identity(),
    "Flatten": lambda s, f: nn.Flatten(s.start_dim, s.end_dim),
    "MultiheadAttention": lambda s, f: nn.MultiheadAttention(
        s.embed_dim, s.num_heads, bias=s.bias, batch_first=s.batch_first, **f
    ),
}


def _tuple(value: int | list[int]) -> int | tuple[int, int]:
    return (value[0], value[1]) if isinstance(value, list) else value  # the spec allows 2 numbers


# ---- initialisers: mirror each layer's reset_parameters(), drawing from `g` ----------------
def _init_linear_like(weight: torch.Tensor, bias: torch.Tensor | None, g: torch.Generator) -> None:
    init.kaiming_uniform_(weight, a=math.sqrt(5), generator=g)
    if bias is not None:
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        init.uniform_(bias, -bound, bound, generator=g)


def _init_mha(m: nn.MultiheadAttention, g: torch.Generator) -> None:
    # torch builds out_proj (a Linear, initialised on construction) before _reset_parameters.
    _init_linear_like(m.out_proj.weight, m.out_proj.bias, g)
    init.xavier_uniform_(m.in_proj_weight, generator=g)
    if m.in_proj_bias is not None:
        init.zeros_(m.in_proj_bias)
        init.zeros_(m.out_proj.bias)


def _init_batchnorm(m: nn.BatchNorm1d, g: torch.Generator) -> None:
    m.reset_parameters()  # ones/zeros and running stats: no random draws


LEAF_INITIALISERS: dict[str, Callable[[Any, torch.Generator], object]] = {
    "Linear": lambda m, g: _init_linear_like(m.weight, m.bias, g),
    "Conv1d": lambda m, g: _init_linear_like(m.weight, m.bias, g),
    "Conv2d": lambda m, g: _init_linear_like(m.weight, m.bias, g),
    "Embedding": lambda m, g: init.normal_(m.weight, generator=g),
    "LayerNorm": lambda m, g: m.reset_parameters(),
    "BatchNorm1d": _init_batchnorm,
    "MultiheadAttention": _init_mha,
}


def _build_module(spec: Any, factory: Factory) -> nn.Module:
    if isinstance(spec, LeafSpec):
        return LEAF_BUILDERS[spec.type](spec, factory)
    if isinstance(spec, SequentialSpec):
        return nn.Sequential(*(_build_module(layer, factory) for layer in spec.layers))
    if isinstance(spec, CompositeSpec):
        module = ProgramModule(spec.program)
        for name, child in spec.modules.items():
            module.add_module(name, _build_module(child, factory))
        return module
    raise TypeError(f"no builder for module spec {type(spec).__name__}")


def build_input(spec: InputSpec, dtype: torch.dtype, g: torch.Generator, device: str = "cpu") -> torch.Tensor:
    """One input tensor; `randn`/`rand`/`randint` draw from g (in declared order)."""
    shape = spec.declared_shape()
    if device == "meta":
        tensor = torch.empty(shape, dtype=dtype, device="meta")
    elif spec.value is not None:
        tensor = torch.tensor(spec.value, dtype=dtype)
    elif spec.init == "randn":
        tensor = torch.randn(shape, generator=g, dtype=dtype)
    elif spec.init == "rand":
        tensor = torch.rand(shape, generator=g, dtype=dtype)
    elif spec.init == "randint":
        assert spec.high is not None  # the spec requires it with randint
        tensor = torch.randint(0, spec.high, shape, generator=g, dtype=dtype)
    elif spec.init == "zeros":
        tensor = torch.zeros(shape, dtype=dtype)
    elif spec.init == "ones":
        tensor = torch.ones(shape, dtype=dtype)
    else:  # arange, laid out row-major over the shape
        tensor = torch.arange(math.prod(shape), dtype=dtype).reshape(shape)
    return tensor.requires_grad_(spec.requires_grad)


def build(spec: ModelSpec, generator: torch.Generator, device: str = "cpu") -> BuiltModel:
    """Build inputs and modules. device="meta" builds shapes only (no memory, no draws)."""
    dtype = DTYPES[spec.dtype]
    inputs = {
        name: build_input(inp, DTYPES[inp.dtype or spec.dtype], generator, device)
        for name, inp in spec.inputs.items()
    }
    root = SpecRoot(spec.program)
    factory: Factory = {"device": "meta", "dtype": dtype}
    for name, mod_spec in spec.modules.items():
        root.add_module(name, _build_module(mod_spec, factory))
    if device != "meta":
        root.to_empty(device=device)
        _initialise(root, spec, generator)
    return BuiltModel(
        root=root, inputs=inputs, program=spec.program, spec=spec, modules=dict(root.named_children())
    )


def build_model(spec: ModelSpec) -> BuiltModel:
    """The spec's model and inputs on the CPU, drawn from a Generator seeded with the spec's
    seed. An error torch raises building it (a module it refuses) is the spec's: a SpecError
    ``build_error`` (a 422 in the service)."""
    try:
        return build(spec, torch.Generator().manual_seed(spec.seed))
    except SpecError:
        raise
    except Exception as exc:  # noqa: BLE001 - torch refused the model: the spec's fault
        raise SpecError(
            "build_error",
            f"building the model failed: {public_text(str(exc), type(exc).__name__)}",
            "/modules",
            exception=type(exc).__name__,
        ) from exc


@torch.no_grad()
def _initialise(root: nn.Module, spec: ModelSpec, g: torch.Generator) -> None:
    modules = dict(root.named_modules())
    for path, _ptr, mod_spec, _depth in walk_modules(spec.modules):
        if not isinstance(mod_spec, LeafSpec):
            continue
        module = modules[path]
        initialiser = LEAF_INITIALISERS.get(mod_spec.type)
        if initialiser is not None:
            initialiser(module, g)
        params = dict(module.named_parameters())
        for pname, value in (mod_spec.init or {}).items():
            params[pname].copy_(torch.tensor(value, dtype=params[pname].dtype))


@contextlib.contextmanager
def seeded_global_rng(seed: int) -> Iterator[None]:
    """Seed torch's global CPU RNG for the duration (dropout draws from it, not from a
    Generator), restoring the previous state afterwards."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def resolve_tensor(ref: str, env: dict[str, Any], root: nn.Module) -> torch.Tensor:
    """A tensor named in a step or hook: a program/input name, or a parameter path ("f0.weight")."""
    if ref in env:
        return env[ref]
    params = dict(root.named_parameters())
    if ref in params:
        return params[ref]
    raise KeyError(ref)  # unreachable for a validated spec
