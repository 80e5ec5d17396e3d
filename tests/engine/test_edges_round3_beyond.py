"""Truth cases past issue 36's list: models built from transformers configs (dropout on, the
same seed), torch.func transforms inside forward, and the round's edge programs written as
plain programs under ``gradtrace.record()``. The oracle is the same program without gradtrace:
every gradient torch.equal, the same calls, the same exceptions.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from edge_models import Logged
from torch import nn
from torch.func import functional_call, grad, jacrev, linearize, stack_module_state, vjp, vmap

import gradtrace
from gradtrace.engine import UnreadableTensor


def _traced_like_plain(model: nn.Module, inputs: tuple, loss_fn: Callable[[Any], torch.Tensor]) -> None:
    """The model's gradients traced equal a plain run's, both from the same seed (dropout
    draws the same masks: gradtrace draws no random numbers)."""
    plain = copy.deepcopy(model)
    torch.manual_seed(0)
    loss_fn(plain(*inputs)).backward()
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = gradtrace.trace(model, inputs, loss_fn)
    for name, p in plain.named_parameters():
        traced = trace.grads[name]
        assert (traced is None) == (p.grad is None), name
        if p.grad is not None:
            assert torch.equal(torch.from_numpy(traced), p.grad), name


# ---- models from transformers configs (never downloaded weights) ------------------------------
def _gpt2() -> nn.Module:
    import transformers

    config = transformers.GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    config.bos_token_id = config.eos_token_id = 0
    return transformers.GPT2LMHeadModel(config)


def _bert() -> nn.Module:
    import transformers

    return transformers.BertModel(
        transformers.BertConfig(
            vocab_size=50,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=16,
        )
    )


def _llama() -> nn.Module:
    import transformers

    return transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=50,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=16,
        )
    )


@pytest.mark.slow
@pytest.mark.parametrize("make", [_gpt2, _bert, _llama], ids=["gpt2", "bert", "llama"])
def test_a_transformers_model_from_its_config_traces_with_the_plain_runs_grads(make: Callable) -> None:
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = make()  # (train mode: GPT-2's and BERT's dropout is on)
    ids = torch.randint(0, 50, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    mask[1, 4:] = 0
    if make is _bert:
        _traced_like_plain(model, (ids, mask), lambda out: out.last_hidden_state.pow(2).mean())
    else:
        _traced_like_plain(model, (ids,), lambda out: out.logits.pow(2).mean())


# ---- torch.func transforms inside forward ------------------------------------------------------
class _GradPenalty(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = vmap(grad(lambda z: torch.tanh(self.lin(z)).sum()))(x)
        return self.lin(x).sum() + (g.norm(dim=-1) - 1).pow(2).mean()


class _Ensemble(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.members = nn.ModuleList([nn.Linear(3, 2) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        params, buffers = stack_module_state(list(self.members))
        base = copy.deepcopy(self.members[0]).to("meta")

        def member(p: dict, b: dict, x: torch.Tensor) -> torch.Tensor:
            return functional_call(base, (p, b), (x,))

        return vmap(member, in_dims=(0, 0, None))(params, buffers, x).pow(2).sum()


class _PerSampleGrads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def loss(p: dict, xi: torch.Tensor) -> torch.Tensor:
            return functional_call(self.lin, p, (xi.unsqueeze(0),)).pow(2).sum()

        per_sample = vmap(grad(loss), in_dims=(None, 0))(dict(self.lin.named_parameters()), x)
        return sum(g.pow(2).sum() for g in per_sample.values())


class _Linearize(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, jvp_fn = linearize(lambda z: torch.sin(self.lin(z)), x)
        return (out * jvp_fn(torch.ones_like(x))).sum()


class _Vjp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, pull = vjp(lambda z: torch.sin(self.lin(z)), x)
        (g,) = pull(torch.ones_like(out))
        return (g * out).sum()


class _VmapJacrev(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return vmap(jacrev(lambda z: torch.tanh(self.lin(z))))(x).pow(2).sum()


@pytest.mark.parametrize(
    "model_class", [_GradPenalty, _Ensemble, _PerSampleGrads, _Linearize, _Vjp, _VmapJacrev]
)
def test_torch_func_transforms_in_forward_trace_with_the_plain_runs_grads(model_class: type) -> None:
    torch.manual_seed(1)
    model, x = model_class(), torch.randn(4, 3, requires_grad=True)
    plain, x_plain = copy.deepcopy(model), x.detach().clone().requires_grad_()
    plain(x_plain).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trace = gradtrace.trace(model, x)
    assert torch.equal(torch.from_numpy(trace.grads["x"]), x_plain.grad)
    for name, p in plain.named_parameters():  # (an ensemble's members get none: stacked copies did)
        traced = trace.grads[name]
        assert (traced is None) == (p.grad is None), name
        if p.grad is not None:
            assert torch.equal(torch.from_numpy(traced), p.grad), name


# ---- the round's edge programs under record() ---------------------------------------------------
def _jvp_step(lin: nn.Linear, x: torch.Tensor) -> None:
    out, tangent = torch.func.jvp(lambda z: lin(z).tanh(), (x,), (torch.ones_like(x),))
    (out * tangent).sum().backward()


def test_forward_mode_ad_under_record_has_the_plain_runs_grads() -> None:
    torch.manual_seed(0)
    lin, x = nn.Linear(40, 40), torch.randn(2, 40, requires_grad=True)
    plain, x_plain = copy.deepcopy(lin), x.detach().clone().requires_grad_()
    _jvp_step(plain, x_plain)
    with gradtrace.record() as rec:
        _jvp_step(lin, x)
    assert torch.equal(torch.from_numpy(rec.trace.grads["x"]), x_plain.grad)
    for name, p in plain.named_parameters():
        assert torch.equal(torch.from_numpy(rec.trace.grads[f"lin.{name}"]), p.grad), name


def test_a_nested_tensor_under_record_is_refused_by_name_with_the_partial_trace() -> None:
    lin = nn.Linear(4, 4)
    with pytest.raises(UnreadableTensor, match="nested tensor") as caught, gradtrace.record():
        rows = torch.nested.nested_tensor_from_jagged(lin(torch.randn(5, 4)), offsets=torch.tensor([0, 2, 5]))
        rows.relu().values().sum().backward()
    assert any(e.kind == "error" for e in caught.value.gradtrace_trace.doc.events)


def test_a_torch_function_subclass_under_record_sees_the_plain_call_list() -> None:
    model, x = nn.Linear(3, 2), torch.randn(4, 3)
    plain = copy.deepcopy(model)
    Logged.calls = []
    (plain(x.as_subclass(Logged)) * 2).sum().backward()
    expected, Logged.calls = Logged.calls, []
    with gradtrace.record() as rec:
        (model(x.as_subclass(Logged)) * 2).sum().backward()
    assert expected == ["linear", "mul", "sum", "backward"]
    assert Logged.calls == expected
    assert torch.equal(torch.from_numpy(rec.trace.grads["model.weight"]), plain.weight.grad)


def test_a_look_only_tensor_hook_under_record_leaves_grad_the_engines_buffer() -> None:
    model, seen = nn.Linear(30, 20), []
    model.weight.register_hook(lambda g: seen.append(g.data_ptr()))
    with gradtrace.record():
        model(torch.randn(4, 30)).sum().backward()
    assert model.weight.grad is not None
    assert seen == [model.weight.grad.data_ptr()]


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_a_no_grad_mode_under_record_raises_pytorchs_error_with_the_partial_trace(mode: Callable) -> None:
    model, x = nn.Linear(3, 2), torch.randn(4, 3)
    with mode(), pytest.raises(RuntimeError) as expected:
        copy.deepcopy(model)(x).sum().backward()
    with mode(), pytest.raises(RuntimeError) as caught, gradtrace.record():
        model(x).sum().backward()
    assert (type(caught.value), str(caught.value)) == (type(expected.value), str(expected.value))
    assert caught.value.gradtrace_trace is not None


def test_an_inference_mode_input_under_record_gets_pytorchs_error() -> None:
    model = nn.Linear(3, 2)
    with torch.inference_mode():
        x = torch.randn(4, 3)
    with pytest.raises(RuntimeError) as expected:
        copy.deepcopy(model)(x).sum().backward()
    with pytest.raises(RuntimeError) as caught, gradtrace.record():
        model(x).sum().backward()
    assert str(caught.value) == str(expected.value)
    assert "Inference tensors cannot be saved for backward" in str(expected.value)


@pytest.mark.slow
def test_a_warm_compiled_submodule_under_record_is_not_recompiled() -> None:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()  # (Dynamo's caches are the process's: see test_edges_round3.fresh_dynamo)
    try:
        torch.manual_seed(0)
        inner = torch.compile(nn.Sequential(nn.Linear(5, 5), nn.Tanh()), backend="aot_eager")
        model, x = nn.Sequential(nn.Linear(4, 5), inner, nn.Linear(5, 2)), torch.randn(3, 4)
        model(x).sum().backward()  # warm
        before = (counters["frames"]["total"], counters["stats"]["unique_graphs"])
        for _ in range(10):
            model.zero_grad()
            with gradtrace.record() as rec:
                model(x).sum().backward()
        assert (counters["frames"]["total"], counters["stats"]["unique_graphs"]) == before
        assert "CompiledFunctionBackward" in {n.op for n in rec.trace.doc.graph.nodes}
    finally:
        torch._dynamo.reset()
