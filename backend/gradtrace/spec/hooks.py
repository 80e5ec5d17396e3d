"""Hook specs: module hooks and tensor hooks, with an optional declarative action (torch-free)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from .values import ModulePath, SpecModel, TensorRef

# Which value each hook type's action may change (one per type).
HookTarget = Literal["input", "output", "grad_input", "grad_output", "grad"]
HOOK_TARGETS: dict[str, HookTarget] = {
    "forward_pre": "input",
    "forward": "output",
    "full_backward_pre": "grad_output",
    "full_backward": "grad_input",
    "backward": "grad_input",
    "tensor": "grad",
    "post_accumulate_grad": "grad",
}


def _present(*fields: str) -> dict[str, Any]:
    return {"anyOf": [{"required": [f]} for f in fields]}


class HookAction(SpecModel):
    """What a hook does to the value it sees, declaratively (PyTorch: return a replacement)."""

    # What `_check_fields` enforces, in JSON Schema terms (all but clamp's min <= max).
    model_config = ConfigDict(
        json_schema_extra={
            "oneOf": [
                {
                    "properties": {"op": {"enum": ["scale", "add"]}},
                    "required": ["by"],
                    "not": _present("min", "max"),
                },
                {"properties": {"op": {"const": "zero"}}, "not": _present("by", "min", "max")},
                {
                    "properties": {"op": {"const": "clamp"}},
                    "not": {"required": ["by"]},
                    **_present("min", "max"),
                },
            ]
        }
    )

    op: Literal["scale", "add", "zero", "clamp"]
    target: HookTarget | None = None
    by: float | None = None
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _check_fields(self) -> HookAction:
        if self.op in ("scale", "add"):
            if self.by is None:
                raise ValueError(f"op {self.op} needs `by`")
            if self.min is not None or self.max is not None:
                raise ValueError(f"op {self.op} takes `by`, not `min`/`max`")
        elif self.op == "zero":
            if self.by is not None or self.min is not None or self.max is not None:
                raise ValueError("op zero takes no `by`, `min` or `max`")
        else:
            if self.by is not None:
                raise ValueError("op clamp takes `min` and/or `max`, not `by`")
            if self.min is None and self.max is None:
                raise ValueError("op clamp needs `min` and/or `max`")
            if self.min is not None and self.max is not None and self.min > self.max:
                raise ValueError("op clamp needs min <= max")
        return self


class _HookBase(SpecModel):
    action: HookAction | None = None
    if TYPE_CHECKING:
        type: str  # each hook kind's own Literal (a field of the subclass)

    @model_validator(mode="after")
    def _check_target(self) -> _HookBase:
        if self.action is None:
            return self
        expected = HOOK_TARGETS[self.type]
        if self.action.target is None:
            self.action.target = expected  # the only valid target: fill it in
        elif self.action.target != expected:
            raise ValueError(
                f"a {self.type} hook's action can change {expected!r}, not {self.action.target!r}"
            )
        return self


class ModuleHookSpec(_HookBase):
    type: Literal["forward_pre", "forward", "full_backward_pre", "full_backward", "backward"]
    module: ModulePath


class TensorHookSpec(_HookBase):
    type: Literal["tensor", "post_accumulate_grad"]
    tensor: TensorRef


HookSpec = Annotated[ModuleHookSpec | TensorHookSpec, Field(discriminator="type")]
