"""torch.compile'd submodules of models nobody here wrote: torchvision's resnet18 and a Llama MLP
built by transformers from a config (random weights, nothing downloaded). Both are optional
packages: without them the tests skip. The oracle is a clean run of an identical copy of the model,
its gradients taken with ``torch.autograd.grad``.

The compiled regions use ``backend="aot_eager"`` (AOTAutograd without inductor's C++ code
generation): the same Dynamo capture and compiled backward node, seconds instead of minutes on CPU.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
import torch
from third_party import torchvision_python_only
from torch import nn

import gradtrace

_BUDGET_S = 240  # each test, import and compilation included


def _resnet18() -> nn.Module:
    """torchvision's resnet18, its Python code only (see third_party)."""
    if torchvision_python_only() is None:
        pytest.skip("torchvision is not installed")
    from torchvision.models.resnet import resnet18

    return resnet18(num_classes=10)


def _llama_mlp() -> nn.Module:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, hidden_act="silu")
    from transformers.models.llama.modeling_llama import LlamaMLP

    return nn.Sequential(nn.Linear(8, 32), LlamaMLP(config), nn.Linear(32, 1))


def _grads(model: nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    params = dict(model.named_parameters())
    grads = torch.autograd.grad(model(x).sum(), list(params.values()))
    return dict(zip(params, grads, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("make", "compiled", "shape"),
    [(_resnet18, "layer1", (2, 3, 32, 32)), (_llama_mlp, "1", (3, 5, 8))],
    ids=["torchvision-resnet18", "transformers-llama-mlp"],
)
def test_a_compiled_third_party_submodule_traces_like_the_plain_run(
    make: Any, compiled: str, shape: tuple
) -> None:
    start = time.monotonic()
    torch.manual_seed(0)
    model = make()
    setattr(model, compiled, torch.compile(model.get_submodule(compiled), backend="aot_eager"))
    twin = copy.deepcopy(model)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    plain = _grads(twin, x)
    trace = gradtrace.trace(model, x, lambda out: out.sum())
    assert trace.grads.keys() >= plain.keys()
    for name, grad in plain.items():
        assert torch.equal(torch.from_numpy(trace.grads[name]), grad), name
    [diagnostic] = [d for d in trace.doc.analyses.diagnostics if d.code == "compiled_module"]
    assert diagnostic.module == compiled
    assert [n.op for n in trace.doc.graph.nodes].count("CompiledFunctionBackward") == 1
    assert time.monotonic() - start < _BUDGET_S
