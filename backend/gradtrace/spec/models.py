"""ModelSpec v1: the public model format (README "Model specs"); field names are the contract.

Structure is validated by pydantic; the root validator then compiles every program and checks
the one shared name space, the steps, the hooks and retain_grad (see `semantics.py`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr, ValidationInfo, model_validator

from .hooks import HOOK_TARGETS, HookAction, HookSpec, ModuleHookSpec, TensorHookSpec  # noqa: F401 (re-exported)
from .ir import Program
from .modules import (
    MAX_PROGRAM_LINES,
    LeafSpec,
    ModuleSpec,
    ProgramLine,
    SpecModel,
    walk_modules,
)
from .steps import (  # noqa: F401 (re-exported)
    MAX_STEPS,
    BackwardStep,
    ForwardStep,
    GradStep,
    SgdStep,
    StepSpec,
    ZeroGradStep,
)
from .values import (
    Int,
    Name,
    NestedNumbers,
    Size,
    literal_is_integral,
    literal_shape,
    map_literal,
)

FloatDtype = Literal["float32", "float64"]
DEFAULT_TITLE = "Untitled spec"
MAX_HOOKS = 200


class InputSpec(SpecModel):
    """A named input tensor: an explicit `value`, or a `shape` with a seeded `init`."""

    # What `_check` enforces, in JSON Schema terms: `value` alone, or `shape` (with init/high).
    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {
                    "required": ["value"],
                    "not": {"anyOf": [{"required": [k]} for k in ("shape", "init", "high")]},
                },
                {"required": ["shape"], "not": {"required": ["value"]}},
            ]
        }
    )

    value: NestedNumbers | None = None
    shape: Annotated[list[Size], Field(max_length=8)] | None = None
    init: Literal["randn", "rand", "zeros", "ones", "arange", "randint"] | None = None
    high: Annotated[Int, Field(ge=1, le=2**31 - 1)] | None = None  # randint: values in [0, high)
    requires_grad: bool = False
    dtype: Literal["float32", "float64", "int64"] | None = None

    @model_validator(mode="after")
    def _check(self) -> InputSpec:
        if (self.value is None) == (self.shape is None):
            raise ValueError("give exactly one of `value` or `shape`")
        if self.value is not None and (self.init is not None or self.high is not None):
            raise ValueError("`init` and `high` go with `shape`, not with `value`")
        if self.shape is not None and self.init is None:
            self.init = "randn"
        if (self.init == "randint") != (self.high is not None):
            raise ValueError(
                "`init: randint` needs `high` (values are drawn from [0, high)), and only it takes `high`"
            )
        if self.dtype == "int64":
            if self.requires_grad:
                raise ValueError("an int64 tensor cannot require grad (only floating point tensors can)")
            if self.init in ("randn", "rand"):
                raise ValueError(
                    f"`init: {self.init}` draws floats; an int64 input takes zeros, ones, arange or randint"
                )
            if self.value is not None:
                if not literal_is_integral(self.value):
                    raise ValueError("an int64 input's value must hold whole numbers")
                self.value = map_literal(self.value, int)
        else:
            if self.init == "randint":
                raise ValueError("`init: randint` is for int64 inputs (set `dtype: int64`)")
            if self.value is not None:
                self.value = map_literal(self.value, float)
        return self

    def declared_shape(self) -> tuple[int, ...]:
        return tuple(self.shape) if self.shape is not None else literal_shape(self.value)


class ModelSpec(SpecModel):
    """A model spec, format version 1. Use `parse_spec(data)` to get one (it raises SpecError)."""

    spec_version: Literal[1] = Field(description="Format version: 1.")
    title: Annotated[str, Field(min_length=1, max_length=200)] = Field(
        DEFAULT_TITLE, description=f"Shown above the diagram (default: {DEFAULT_TITLE!r})."
    )
    description: Annotated[str, Field(max_length=4000)] | None = Field(
        None, description="One paragraph: what to watch in this example."
    )
    seed: Annotated[Int, Field(ge=0, le=2**63 - 1)] = Field(
        0, description="Seeds a per-trace torch.Generator: inputs are drawn first, then parameters."
    )
    dtype: FloatDtype = Field("float32", description="Floating-point type of parameters and float inputs.")
    modules: Annotated[dict[Name, ModuleSpec], Field(max_length=1000)] = Field(
        default_factory=dict,
        description="Named modules (real torch.nn layers, Sequential, composite Module).",
    )
    inputs: Annotated[dict[Name, InputSpec], Field(max_length=1000)] = Field(
        default_factory=dict, description="Named input tensors: a `value`, or a `shape` with a seeded `init`."
    )
    forward: Annotated[list[ProgramLine], Field(min_length=1, max_length=MAX_PROGRAM_LINES)] = Field(
        description='The forward program: one assignment per line, e.g. "y = f0(x)". No `return`.'
    )
    hooks: Annotated[list[HookSpec], Field(max_length=MAX_HOOKS)] = Field(
        default_factory=list, description="Module and tensor hooks to register, with optional actions."
    )
    retain_grad: Annotated[list[Name], Field(max_length=1000)] = Field(
        default_factory=list, description="Intermediate tensors whose .grad to keep (retain_grad())."
    )
    steps: Annotated[list[StepSpec], Field(min_length=1, max_length=MAX_STEPS)] | None = Field(
        None, description="What runs after the forward; absent: one backward of the last assigned tensor."
    )

    _program: Any = PrivateAttr(default=None)
    _step_programs: dict[int, Any] = PrivateAttr(default_factory=dict)
    _warnings: list[Any] = PrivateAttr(default_factory=list)
    _analysis: Any = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check_semantics(self, info: ValidationInfo) -> ModelSpec:
        from .semantics import check_spec  # late import: semantics imports this module

        # parse_spec passes the parts the schema refused (``gaps``) when it checks the rest.
        check_spec(self, (info.context or {}).get("gaps"))
        return self

    # ---- compiled views (filled by the validator) ----------------------------------------
    @property
    def program(self) -> Program:
        """The compiled top-level forward program."""
        return self._program

    def step_program(self, index: int) -> Program | None:
        """The compiled program of a `forward` step with lines (None: rerun the top level)."""
        return self._step_programs.get(index)

    @property
    def warnings(self) -> list[Any]:
        """Harmless findings (unused tensors, …) as SpecWarning."""
        return list(self._warnings)

    @property
    def analysis(self) -> Any:
        """ProgramAnalysis of the top-level program (longest path, fan-in/out)."""
        return self._analysis

    def effective_steps(self) -> list[StepSpec]:
        """The steps, with the default (one backward of the last assigned tensor) filled in."""
        if self.steps is not None:
            return list(self.steps)
        last = self._program.statements[-1].targets[-1]
        return [BackwardStep(do="backward", of=last)]

    def parameter_shapes(self) -> dict[str, tuple[int, ...]]:
        from .modules import parameter_shapes

        return parameter_shapes(self.modules)

    def module_paths(self) -> dict[str, Any]:
        """Dotted module path -> its spec, parents first ("f1", "f1.f", "seq.0")."""
        return {path: spec for path, _ptr, spec, _depth in walk_modules(self.modules)}

    def normalized(self) -> dict[str, Any]:
        """The canonical JSON form: defaults filled, fixed key order (hash it, store it in traces)."""
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        data["modules"] = {name: _type_first(m) for name, m in data["modules"].items()}
        data["steps"] = [
            s.model_dump(mode="json", by_alias=True, exclude_none=True) for s in self.effective_steps()
        ]
        return data


def _type_first(module: dict[str, Any]) -> dict[str, Any]:
    """Module dicts read best with "type" first (pydantic puts inherited `init` first)."""
    out = {"type": module["type"], **{k: v for k, v in module.items() if k != "type"}}
    if "layers" in out:
        out["layers"] = [_type_first(m) for m in out["layers"]]
    if out["type"] == "Module":
        out["modules"] = {n: _type_first(m) for n, m in out.get("modules", {}).items()}
    return out


def leaf_specs(spec: ModelSpec) -> dict[str, LeafSpec]:
    return {p: s for p, s in spec.module_paths().items() if isinstance(s, LeafSpec)}
