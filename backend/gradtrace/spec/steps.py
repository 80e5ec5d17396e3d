"""Step specs: what runs after the first forward (backward, grad, forward, zero_grad, sgd_step)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from .values import MAX_PROGRAM_LINES, Name, ProgramLine, SpecModel, TensorRef

MAX_STEPS = 100  # hard cap; SpecLimits.max_steps is usually tighter


class BackwardStep(SpecModel):
    do: Literal["backward"]
    of: Name
    retain_graph: bool = False
    create_graph: bool = False
    inputs: Annotated[list[TensorRef], Field(min_length=1, max_length=100)] | None = None


class GradStep(SpecModel):
    """torch.autograd.grad(of, inputs) -> tensors named by `as`."""

    do: Literal["grad"]
    of: Name | Annotated[list[Name], Field(min_length=1, max_length=100)]
    inputs: Annotated[list[TensorRef], Field(min_length=1, max_length=100)]
    as_: Annotated[list[Name], Field(min_length=1, max_length=100)] = Field(alias="as")
    retain_graph: bool | None = None
    create_graph: bool = False
    allow_unused: bool = False

    @model_validator(mode="after")
    def _check_lengths(self) -> GradStep:
        if len(self.as_) != len(self.inputs):
            raise ValueError(f"`as` names {len(self.as_)} result(s) but `inputs` has {len(self.inputs)}")
        return self

    def outputs(self) -> list[str]:
        return [self.of] if isinstance(self.of, str) else list(self.of)


class ForwardStep(SpecModel):
    """Run the forward again: `program` null reruns the top-level program (a new graph);
    lines run these extra assignments in the same name space."""

    do: Literal["forward"]
    program: Annotated[list[ProgramLine], Field(min_length=1, max_length=MAX_PROGRAM_LINES)] | None = None


class ZeroGradStep(SpecModel):
    do: Literal["zero_grad"]
    set_to_none: bool = True


class SgdStep(SpecModel):
    do: Literal["sgd_step"]
    lr: Annotated[float, Field(gt=0, le=1e6)]


StepSpec = Annotated[
    BackwardStep | GradStep | ForwardStep | ZeroGradStep | SgdStep, Field(discriminator="do")
]
