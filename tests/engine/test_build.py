"""build(): seeded initialisation bit-identical to torch's own, parameter names and shapes."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gradtrace.engine.build import LEAF_BUILDERS, LEAF_INITIALISERS, build, seeded_global_rng
from gradtrace.engine.interpreter import ProgramModule, run_program
from gradtrace.examples import get_example
from gradtrace.spec import parse_spec
from gradtrace.spec.modules import LEAF_SPECS, LEAF_TYPES


def _spec(modules, inputs=None, forward=None, seed=0, dtype="float32"):
    first = next(iter(modules))
    return parse_spec(
        {
            "spec_version": 1,
            "title": "t",
            "seed": seed,
            "dtype": dtype,
            "modules": modules,
            "inputs": inputs or {"x": {"value": 1.0}},
            "forward": forward or [f"y = {first}(x)"],
        }
    )


def test_seed000_mlp_is_bit_identical_to_the_notebook():
    spec = parse_spec(get_example("mlp-hooks-reconstruction"))
    built = build(spec, torch.Generator().manual_seed(spec.seed))

    class MLP(nn.Module):  # the seed notebook, literally
        def __init__(self, d_in, d_hidden, d_out):
            super().__init__()
            self.fc1 = nn.Linear(d_in, d_hidden, bias=False)
            self.fc2 = nn.Linear(d_hidden, d_out, bias=False)

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        x = torch.randn(5, 6, 4).requires_grad_(True)
        y = torch.randn(5, 6, 2)
        model = MLP(4, 3, 2)
    assert torch.equal(built.inputs["x"], x) and built.inputs["x"].requires_grad
    assert torch.equal(built.inputs["y"], y) and not built.inputs["y"].requires_grad
    params = dict(built.root.named_parameters())
    assert list(params) == ["fc1.weight", "fc2.weight"]
    assert torch.equal(params["fc1.weight"], model.fc1.weight)
    assert torch.equal(params["fc2.weight"], model.fc2.weight)


def test_build_does_not_touch_the_global_rng():
    spec = parse_spec(get_example("mlp-hooks-reconstruction"))
    state = torch.get_rng_state()
    build(spec, torch.Generator().manual_seed(3))
    assert torch.equal(torch.get_rng_state(), state)


def test_every_leaf_type_has_a_builder_and_a_spec():
    assert set(LEAF_BUILDERS) == set(LEAF_TYPES)
    assert set(LEAF_INITIALISERS) <= set(LEAF_TYPES)
    assert len(LEAF_SPECS) == len(LEAF_TYPES)


# One example per leaf type: spec fields, and the torch constructor call it stands for.
LEAVES = {
    "Linear": ({"in_features": 3, "out_features": 4}, lambda: nn.Linear(3, 4)),
    "Conv1d": ({"in_channels": 2, "out_channels": 3, "kernel_size": 3}, lambda: nn.Conv1d(2, 3, 3)),
    "Conv2d": (
        {"in_channels": 2, "out_channels": 3, "kernel_size": [3, 2], "stride": 2, "padding": 1},
        lambda: nn.Conv2d(2, 3, (3, 2), stride=2, padding=1),
    ),
    "Embedding": ({"num_embeddings": 5, "embedding_dim": 3}, lambda: nn.Embedding(5, 3)),
    "LayerNorm": ({"normalized_shape": [2, 3]}, lambda: nn.LayerNorm((2, 3))),
    "BatchNorm1d": ({"num_features": 3}, lambda: nn.BatchNorm1d(3)),
    "Dropout": ({"p": 0.2}, lambda: nn.Dropout(0.2)),
    "ReLU": ({}, nn.ReLU),
    "GELU": ({"approximate": "tanh"}, lambda: nn.GELU(approximate="tanh")),
    "Tanh": ({}, nn.Tanh),
    "Sigmoid": ({}, nn.Sigmoid),
    "Softmax": ({"dim": -1}, lambda: nn.Softmax(dim=-1)),
    "LogSoftmax": ({"dim": 1}, lambda: nn.LogSoftmax(dim=1)),
    "Identity": ({}, nn.Identity),
    "Flatten": ({}, nn.Flatten),
    "MultiheadAttention": ({"embed_dim": 4, "num_heads": 2}, lambda: nn.MultiheadAttention(4, 2)),
}


def test_the_table_covers_every_leaf_type():
    assert set(LEAVES) == set(LEAF_TYPES)


@pytest.mark.parametrize("kind", sorted(LEAVES))
@pytest.mark.parametrize("seed", [0, 7])
def test_leaf_init_mirrors_torch_reset_parameters(kind, seed):
    fields, make = LEAVES[kind]
    call = "y = m(x, x, x)" if kind == "MultiheadAttention" else "y = m(x)"
    spec = _spec({"m": {"type": kind, **fields}}, forward=[call], seed=seed)
    built = build(spec, torch.Generator().manual_seed(seed))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        torch.randn(0)  # no inputs drawn: the x input is a value
        reference = make()
    ours = built.root.m
    assert type(ours) is type(reference)
    got = dict(ours.named_parameters())
    want = dict(reference.named_parameters())
    assert list(got) == list(want)
    for name in want:
        assert torch.equal(got[name], want[name]), name
    for name, buf in reference.named_buffers():
        assert torch.equal(dict(ours.named_buffers())[name], buf), name
    # the torch-free spec knows the same parameter shapes
    declared = spec.parameter_shapes()
    assert {k: tuple(v.shape) for k, v in built.root.named_parameters()} == declared


def test_explicit_init_overrides_and_names_follow_torch():
    spec = parse_spec(get_example("full-backward-hook"))
    built = build(spec, torch.Generator().manual_seed(0))
    params = {k: v.detach().tolist() for k, v in built.root.named_parameters()}
    assert params == {
        "f0.weight": [[pytest.approx(0.3)]],
        "f0.bias": [pytest.approx(0.1)],
        "f1.f.weight": [[pytest.approx(0.4)]],
        "f1.f.bias": [pytest.approx(0.2)],
    }
    assert isinstance(built.root.f1, ProgramModule)
    assert all(p.requires_grad for p in built.root.parameters())


def test_inputs_are_drawn_in_declared_order_then_parameters():
    spec = _spec(
        {"lin": {"type": "Linear", "in_features": 2, "out_features": 2}},
        inputs={
            "a": {"shape": [3], "init": "rand"},
            "b": {"shape": [2, 2]},
            "c": {"shape": [2], "init": "arange"},
            "t": {"shape": [4], "init": "randint", "high": 3, "dtype": "int64"},
            "z": {"shape": [1], "init": "ones"},
        },
        forward=["y = lin(b)"],
        seed=5,
    )
    built = build(spec, torch.Generator().manual_seed(5))
    g = torch.Generator().manual_seed(5)
    a = torch.rand(3, generator=g)
    b = torch.randn(2, 2, generator=g)
    t = torch.randint(0, 3, (4,), generator=g)
    lin_w = torch.empty(2, 2)
    nn.init.kaiming_uniform_(lin_w, a=math.sqrt(5), generator=g)
    assert torch.equal(built.inputs["a"], a) and torch.equal(built.inputs["b"], b)
    assert torch.equal(built.inputs["t"], t) and built.inputs["t"].dtype == torch.int64
    assert built.inputs["c"].tolist() == [0.0, 1.0]
    assert built.inputs["z"].tolist() == [1.0]
    assert torch.equal(built.root.lin.weight.detach(), lin_w)


def test_float64_spec_builds_float64_everything():
    spec = _spec({"lin": {"type": "Linear", "in_features": 1, "out_features": 1}}, dtype="float64")
    built = build(spec, torch.Generator().manual_seed(0))
    assert built.inputs["x"].dtype == torch.float64
    assert built.root.lin.weight.dtype == torch.float64


def test_meta_build_allocates_nothing():
    spec = _spec({"big": {"type": "Linear", "in_features": 100_000, "out_features": 100_000}})
    built = build(spec, torch.Generator(), device="meta")
    assert built.root.big.weight.is_meta and built.inputs["x"].is_meta


def test_seeded_global_rng_makes_dropout_repeatable_and_restores_state():
    x = torch.ones(1000)
    before = torch.get_rng_state()
    with seeded_global_rng(3):
        first = F.dropout(x, 0.5)
    with seeded_global_rng(3):
        second = F.dropout(x, 0.5)
    assert torch.equal(first, second)
    assert torch.equal(torch.get_rng_state(), before)


def test_root_forward_runs_the_program():
    spec = parse_spec(get_example("two-layer-linear"))
    built = build(spec, torch.Generator())
    env = built.root(dict(built.inputs))
    assert env["L"].item() == pytest.approx(
        run_program(built.program, dict(built.inputs), built.modules)["L"].item()
    )
