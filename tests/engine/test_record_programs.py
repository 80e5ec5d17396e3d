"""``gradtrace.record()`` around more programs written as PyTorch's tutorials write them
(record_programs.py; each is also run by test_record's bit-equality test): what the trace says
of them, as a new user would read it: its passes, the optimizers' and zero_grad's events,
the names, and that it saves."""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from record_programs import (
    ENSEMBLE,
    PROGRAMS,
    TORCHVISION_PROGRAMS,
    TRANSFORMERS_PROGRAMS,
    recorded_as_plain,
    run_program,
)
from third_party import torchvision_python_only
from torch import nn

import gradtrace

ROOT = Path(__file__).resolve().parents[2]


def _recorded(program: str) -> tuple[dict[str, Any], gradtrace.Trace]:
    namespace, _printed = run_program(textwrap.dedent(PROGRAMS[program]), recorded=True)
    return namespace, namespace["rec"].trace


def _labels(trace: gradtrace.Trace) -> list[str]:
    return [p.label for p in trace.doc.passes if p.parent is None]


def _events(trace: gradtrace.Trace, kind: str) -> list[Any]:
    return [e for e in trace.doc.events if e.kind == kind]


def _loop(*steps: list[str]) -> list[str]:
    return [label for step in steps for label in step]


EXPECTED_PASSES = {
    # a.grad = None (four of them in a row): one zero_grad event, as one zero_grad() call makes
    "polynomial_tensors": _loop(
        *([f"forward #{k}", f"backward #{k} of loss", "zero_grad"] for k in (1, 2, 3))
    ),
    "legendre_function": _loop(
        *([f"forward #{k}", f"backward #{k} of loss", "zero_grad"] for k in (1, 2, 3)),
        ["forward #4", "backward #4 of loss"],
    ),
    # (optimizer.zero_grad() between the forward and the backward: inside the forward pass;
    # linear_layer.weight[:, 0] after the loop builds graph: a forward of its own)
    "polynomial_rmsprop": _loop(
        *([f"forward #{k}", f"backward #{k} of loss", f"optimizer.step #{k}"] for k in (1, 2, 3)),
        ["forward #4"],
    ),
    "polynomial_nn_manual": _loop(*([f"forward #{k}", f"backward #{k} of loss"] for k in (1, 2, 3))),
    "dynamic_net": _loop(
        *([f"forward #{k}", f"backward #{k} of loss", f"optimizer.step #{k}"] for k in (1, 2, 3, 4))
    ),
    "lenet": [
        "forward #1",
        "backward #1 of out",  # out.backward(torch.randn(1, 10))
        "forward #2",
        "backward #2 of loss",
        "zero_grad",
        "forward #3",
        "backward #3 of loss",
        "optimizer.step #1",
    ],
    "gradient_accumulation": _loop(
        *([f"forward #{k}", f"backward #{k} of loss"] for k in (1, 2, 3, 4)),
        ["optimizer.step #1", "zero_grad"],
        *([f"forward #{k}", f"backward #{k} of loss"] for k in (5, 6)),
    ),
    "autocast_bf16": [
        "forward #1",
        "backward #1 of loss",
        "optimizer.step #1",
        "zero_grad",
        "forward #2",
        "backward #2 of loss",
        "optimizer.step #2",
    ],
    "checkpoint": [
        "forward #1",
        "backward #1 of loss",
        "optimizer.step #1",
        "zero_grad",
        "forward #2",
        "backward #2 of loss",
        "optimizer.step #2",
    ],
    "hessian_vector": [
        "forward #1",
        "autograd.grad #1 of loss",  # the gradients, with create_graph=True
        "forward #2",
        "autograd.grad #2 of gv",  # the Hessian-vector product: through the first one's graph
        "forward #3",
        "backward #1 of loss",  # backward(create_graph=True)
        "forward #4",
        "backward #2 of grad_norm",  # through the .grad the first one left with a graph
    ],
    "spatial_transformer": [
        "forward #1",
        "backward #1 of loss",
        "optimizer.step #1",
        "zero_grad",
        "forward #2",
        "backward #2 of loss",
        "optimizer.step #2",
    ],
    # backward() called in a function the block calls (train(), optimize_model(), train_loop()):
    # labelled by that function's variable
    "seq2seq": [
        "forward #1",
        "backward #1 of loss",
        "encoder_optimizer.step #1",
        "decoder_optimizer.step #1",
        "zero_grad",
        "forward #2",
        "backward #2 of loss",
        "encoder_optimizer.step #2",
        "decoder_optimizer.step #2",
    ],
    "dqn": _loop(*([f"forward #{k}", f"backward #{k} of loss", f"optimizer.step #{k}"] for k in (1, 2))),
    "dataloader_loop": _loop(
        *(
            [f"forward #{k}", f"backward #{k} of loss", f"optimizer.step #{k}", "zero_grad"]
            for k in (1, 2, 3, 4)
        ),
        ["forward #5"],  # (test_loop's model calls under no_grad: module calls, no graph)
    ),
    # opt_g.zero_grad() clears what d_loss's backward gave the generator (critic(fake_imgs));
    # autograd.grad in compute_gradient_penalty: labelled by its variable
    "wgan_gp": [
        "forward #1",
        "autograd.grad #1 of d_interpolates",
        "forward #2",
        "backward #1 of d_loss",
        "opt_c.step #1",
        "zero_grad",
        "forward #3",
        "backward #2 of g_loss",
        "opt_g.step #1",
        "zero_grad",
        "forward #4",
        "autograd.grad #2 of d_interpolates",
        "forward #5",
        "backward #3 of d_loss",
        "opt_c.step #2",
        "zero_grad",
        "forward #6",
        "backward #4 of g_loss",
        "opt_g.step #2",
    ],
    # scaler.scale(loss).backward(): the scaled loss is no variable's; scaler.step: the step
    "grad_scaler": _loop(
        *([f"forward #{k}", f"backward #{k} of tensor", f"optimizer.step #{k}"] for k in (1,)),
        ["zero_grad", "forward #2", "backward #2 of tensor", "optimizer.step #2"],
    ),
    # FGSM: the attack's backward in the loop, then the perturbed image's forward (evaluated)
    "fgsm": ["forward #1", "backward #1 of loss", "forward #2", "backward #2 of loss", "forward #3"],
    "saliency": ["forward #1", "backward #1 of score_max"],  # (frozen model, the image's .grad)
    "weight_tied_lm": ["forward #1", "backward #1 of loss", "zero_grad", "forward #2", "backward #2 of loss"],
    "multihead_attention": ["forward #1", "backward #1 of loss", "forward #2", "backward #2 of tensor"],
}


@pytest.mark.parametrize("program", sorted(EXPECTED_PASSES))
def test_the_passes_are_the_programs_in_its_order(program: str) -> None:
    _namespace, trace = _recorded(program)
    assert _labels(trace) == EXPECTED_PASSES[program]


def test_manual_updates_under_no_grad_leave_the_leaves_named_and_cleared() -> None:
    namespace, trace = _recorded("polynomial_tensors")
    doc = trace.doc
    tensors = {n.tensor for n in doc.graph.nodes if n.kind == "tensor"}
    assert tensors == {"x", "y", "a", "b", "c", "d", None}  # (None: x ** 2, x ** 3, made of x alone)
    cleared = [e.payload for e in _events(trace, "zero_grad")]
    assert cleared == [{"set_to_none": True, "tensors": ["a", "b", "c", "d"]}] * 3
    assert trace.grads == {"a": None, "b": None, "c": None, "d": None}
    # the in-place updates under no_grad are no graph: three forwards of the same ops
    ops = {n.op for n in doc.graph.nodes if n.kind != "tensor"}
    assert "AccumulateGrad" in ops and not {op for op in ops if "Sub" in op and op != "SubBackward0"}
    assert namespace["a"].requires_grad and namespace["a"].is_leaf


def test_a_custom_autograd_function_is_its_own_node() -> None:
    namespace, trace = _recorded("legendre_function")
    nodes = [n for n in trace.doc.graph.nodes if n.op == "LegendrePolynomial3Backward"]
    assert len(nodes) == 4  # one per forward
    for name in "abcd":
        np.testing.assert_array_equal(trace.grads[name], namespace[name].grad.numpy())


def test_lenet_names_its_modules_and_the_optimizer_changes_every_parameter() -> None:
    namespace, trace = _recorded("lenet")
    doc = trace.doc
    assert [m.path for m in doc.graph.modules] == [
        "net",
        "net.conv1",
        "net.conv2",
        "net.fc1",
        "net.fc2",
        "net.fc3",
        "criterion",
    ]
    inputs = {n.tensor for n in doc.graph.nodes if n.kind == "tensor" and not n.requires_grad}
    assert inputs == {"input", "target"}
    (step,) = _events(trace, "optimizer_step")
    net = namespace["net"]
    assert step.payload["optimizer"] == "SGD" and step.payload["name"] == "optimizer"
    assert list(step.payload["after"]) == [f"net.{n}" for n, _p in net.named_parameters()]
    for name, param in net.named_parameters():
        assert torch.equal(
            torch.from_numpy(trace.array(step.payload["after"][f"net.{name}"])), param.detach()
        )
    # net.zero_grad() between the forward and the backward: in the forward's pass
    zeroed = _events(trace, "zero_grad")
    assert [doc.passes[e.pass_index].label for e in zeroed] == ["forward #2", "zero_grad"]


def test_two_models_two_optimizers_each_step_changes_its_own() -> None:
    namespace, trace = _recorded("dcgan")
    doc = trace.doc
    steps = _events(trace, "optimizer_step")
    assert [(e.payload["name"], e.payload["optimizer"]) for e in steps] == [
        ("optimizerD", "Adam"),
        ("optimizerG", "Adam"),
    ] * 2
    for event in steps:
        model = "netD" if event.payload["name"] == "optimizerD" else "netG"
        params = [f"{model}.{n}" for n, _p in namespace[model].named_parameters()]
        assert list(event.payload["after"]) == params
    backwards = [p.label for p in doc.passes if p.phase == "backward"]
    assert backwards == [
        "backward #1 of errD_real",
        "backward #2 of errD_fake",  # netD(fake.detach()): nothing of netG in it
        "backward #3 of errG",
        "backward #4 of errD_real",
        "backward #5 of errD_fake",
        "backward #6 of errG",
    ]
    second = doc.passes[[p.label for p in doc.passes].index("backward #2 of errD_fake")]
    written = {
        doc.graph.nodes[int(e.target[1:])].tensor
        for e in doc.events[second.first_seq : second.last_seq + 1]
        if e.kind == "grad_write"
    }
    assert written == {"netD.main.0.weight", "netD.main.2.weight"}
    assert {m.path for m in doc.graph.modules if m.parent is None} == {"netG", "netD", "criterion"}


def test_a_target_network_under_no_grad_gets_no_gradient_and_clipping_is_in_the_grads() -> None:
    namespace, trace = _recorded("dqn")
    target = namespace["target_net"]
    for name, param in target.named_parameters():
        assert param.grad is None and trace.grads[f"target_net.{name}"] is None
    policy = namespace["policy_net"]
    for name, param in policy.named_parameters():
        got = trace.grads[f"policy_net.{name}"]
        assert np.abs(got).max() <= 0.05  # clip_grad_value_ after the backward: the final .grad
        np.testing.assert_array_equal(got, param.grad.numpy())
    assert [e.payload["optimizer"] for e in _events(trace, "optimizer_step")] == ["AdamW", "AdamW"]


def test_gradient_accumulation_steps_once_per_four_backwards() -> None:
    namespace, trace = _recorded("gradient_accumulation")
    (step,) = _events(trace, "optimizer_step")
    assert trace.doc.passes[step.pass_index].label == "optimizer.step #1"
    (cleared,) = _events(trace, "zero_grad")  # (the first zero_grad() clears nothing: no event)
    assert cleared.payload["tensors"] == [f"model.{n}" for n, _p in namespace["model"].named_parameters()]
    # the final .grad: the last two micro-batches' (after the step's zero_grad), accumulated
    model = namespace["model"]
    loss_fn = namespace["loss_fn"]
    again = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    for inputs, labels in namespace["micro_batches"][4:]:
        grads = torch.autograd.grad(loss_fn(model(inputs), labels) / 4, list(model.parameters()))
        for (name, _p), grad in zip(model.named_parameters(), grads, strict=True):
            again[name] += grad
    for name, grad in again.items():
        np.testing.assert_allclose(trace.grads[f"model.{name}"], grad.numpy(), rtol=1e-5, atol=1e-7)


def test_autocast_bfloat16_values_are_recorded_in_their_dtype() -> None:
    _namespace, trace = _recorded("autocast_bf16")
    dtypes = {n.op: n.dtype for n in trace.doc.graph.nodes if n.op == "AddmmBackward0"}
    assert dtypes == {"AddmmBackward0": "bfloat16"}
    assert all(g is not None and g.dtype == np.float32 for g in trace.grads.values())


def test_a_tied_weight_has_one_name() -> None:
    namespace, trace = _recorded("weight_tied_lm")
    model = namespace["model"]
    assert model.decoder.weight is model.encoder.weight
    assert "model.encoder.weight" in trace.grads and "model.decoder.weight" not in trace.grads
    assert set(trace.grads) == {f"model.{n}" for n, _p in model.named_parameters()}


def test_a_loop_in_functions_over_a_dataloader() -> None:
    namespace, trace = _recorded("dataloader_loop")
    steps = _events(trace, "optimizer_step")
    assert len(steps) == 4  # 2 epochs of 2 batches
    assert trace.grads == dict.fromkeys(trace.grads)  # (each loop ends with zero_grad: None)
    model = namespace["model"]
    for name, param in model.named_parameters():
        assert torch.equal(
            torch.from_numpy(trace.array(steps[-1].payload["after"][f"model.{name}"])), param.detach()
        )


@pytest.mark.parametrize("suffix", [".json", ".html", ".svg"])
def test_a_programs_trace_saves(tmp_path: Path, suffix: str) -> None:
    _namespace, trace = _recorded("dcgan")
    path = trace.save(tmp_path / f"dcgan{suffix}")
    assert path.stat().st_size > 0
    if suffix == ".json":
        loaded = gradtrace.Trace.load(path)
        assert [p.label for p in loaded.doc.passes] == [p.label for p in trace.doc.passes]


@pytest.mark.parametrize("program", sorted(TORCHVISION_PROGRAMS))
def test_torchvision_programs_bit_equal_to_plain_run(program: str) -> None:
    if torchvision_python_only(also_in=ROOT / "var" / "bench-torchvision") is None:
        pytest.skip("torchvision is not installed (make bench installs it in var/bench-torchvision)")
    recorded = recorded_as_plain(TORCHVISION_PROGRAMS[program])
    trace = recorded["rec"].trace
    model = recorded["model_conv"]
    # frozen: no gradient; the new fc: its gradient, and the only parameters the steps change
    for name, param in model.named_parameters():
        got = trace.grads[f"model_conv.{name}"]
        if name.startswith("fc."):
            np.testing.assert_array_equal(got, param.grad.numpy())
        else:
            assert got is None, name
    steps = _events(trace, "optimizer_step")
    assert [sorted(e.payload["after"]) for e in steps] == [["model_conv.fc.bias", "model_conv.fc.weight"]] * 2
    assert [e.payload["lr"] for e in steps] == [0.001, pytest.approx(0.0001)]  # (StepLR's step between)
    assert _labels(trace) == [
        "forward #1",
        "backward #1 of loss",
        "optimizer_conv.step #1",
        "zero_grad",
        "forward #2",
        "backward #2 of loss",
        "optimizer_conv.step #2",
    ]


def test_functional_call_first_does_not_take_the_models_parameter_names() -> None:
    """torch.func.functional_call swaps the tensors it is given into the model's
    ``_parameters`` for the call: a model met there first (per-sample gradients with vmap and
    grad, then the plain backward) keeps its paths for its own parameters, whose ``.grad`` the
    plain backward fills; no variable that happens to hold one (a loop's ``p``) names it too."""
    namespace, trace = _recorded("per_sample_grads")
    model = namespace["model"]
    assert set(trace.grads) == {f"model.{n}" for n, _p in model.named_parameters()}
    for name, param in model.named_parameters():
        np.testing.assert_array_equal(trace.grads[f"model.{name}"], param.grad.numpy())
    assert _labels(trace) == ["forward #1", "autograd.grad #1 of tensor", "forward #2", "backward #1 of loss"]


def test_functional_call_after_the_plain_call_keeps_the_names() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    with gradtrace.record() as rec:
        model(x).sum().backward()
        fast = {k: v - 0.1 * v.grad for k, v in model.named_parameters()}  # (MAML's fast weights)
        loss = torch.func.functional_call(model, fast, (x,)).square().sum()
        loss.backward()
    assert set(rec.trace.grads) == {"model.weight", "model.bias"}
    np.testing.assert_array_equal(rec.trace.grads["model.weight"], model.weight.grad.numpy())
    np.testing.assert_array_equal(rec.trace.grads["model.bias"], model.bias.grad.numpy())


def test_a_loss_summed_after_its_backward_is_no_detached_branch() -> None:
    """DCGAN's ``errD = errD_real + errD_fake``, made after both backwards to be logged, is
    made from what backward ran on, not cut off from it: no diagnostic. A branch the
    backward does not reach still is one."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", gradtrace.GradtraceWarning)
        _namespace, trace = _recorded("dcgan")
    assert not [d for d in trace.doc.analyses.diagnostics if d.code == "detached_branch"]

    torch.manual_seed(0)
    model, head = torch.nn.Linear(3, 4), torch.nn.Linear(4, 1)
    x = torch.randn(2, 3)
    with warnings.catch_warnings(record=True) as caught, gradtrace.record() as rec:
        h = model(x)
        aux = head(h)  # (never in the loss)
        loss = h.square().mean()
        loss.backward()
        logged = loss + aux.sum()  # (made from the loss, and from aux)
    detached = [d.tensor for d in rec.trace.doc.analyses.diagnostics if d.code == "detached_branch"]
    assert detached == ["aux"]  # (logged: made from the loss)
    assert [str(w.message) for w in caught if issubclass(w.category, gradtrace.GradtraceWarning)] == [
        "'aux' is not connected to what backward was called on: no gradient reaches it [detached_branch]"
    ]
    del logged


def test_an_embedding_with_a_padding_index_made_inside_the_block() -> None:
    """nn.Embedding(padding_idx=…) zeroes its padding row in ``__init__`` under no_grad
    (``self.weight[padding_idx].fill_(0)``): the view's grad_fn cannot be read after that,
    which the program never does. Made inside the block, it records as plain."""
    recorded = recorded_as_plain(PROGRAMS["packed_lstm"])
    trace = recorded["rec"].trace
    assert not trace.grads["model.embedding.weight"][0].any()  # (the padding row: no gradient)
    assert _labels(trace) == ["forward #1", "backward #1 of loss", "optimizer.step #1"]


def test_lbfgs_closure_backwards_are_nested_in_its_step() -> None:
    """LBFGS calls the closure (zero_grad, forward, backward) inside ``step()``: each backward
    is a pass nested in the step's."""
    namespace, trace = _recorded("lbfgs_closure")
    doc = trace.doc
    assert _labels(trace) == ["optimizer.step #1", "optimizer.step #2"]
    nested = [(p.label, doc.passes[p.parent].label) for p in doc.passes if p.parent is not None]
    assert (
        nested
        == [("nested backward inside optimizer.step #1", "optimizer.step #1")] * 4
        + [("nested backward inside optimizer.step #2", "optimizer.step #2")] * 4
    )
    steps = _events(trace, "optimizer_step")
    assert [doc.passes[e.pass_index].label for e in steps] == ["optimizer.step #1", "optimizer.step #2"]
    # the closure's zero_grad() in each step (the very first clears nothing: no event)
    cleared = [doc.passes[e.pass_index].label for e in _events(trace, "zero_grad")]
    assert cleared == ["optimizer.step #1"] * 3 + ["optimizer.step #2"] * 4
    model = namespace["model"]
    for name, param in model.named_parameters():
        after = steps[-1].payload["after"][f"model.{name}"]
        assert torch.equal(torch.from_numpy(trace.array(after)), param.detach())


def test_a_sparse_gradient_is_in_grads_dense() -> None:
    namespace, trace = _recorded("sparse_embedding")
    weight = namespace["embedding"].weight
    assert weight.grad.is_sparse
    np.testing.assert_array_equal(trace.grads["embedding.weight"], weight.grad.to_dense().numpy())
    names = [(e.payload["name"], e.payload["optimizer"]) for e in _events(trace, "optimizer_step")]
    assert names == [("sparse_opt", "SparseAdam"), ("dense_opt", "Adam")] * 2


def test_param_groups_and_a_scheduler_the_step_event_has_the_first_groups_lr() -> None:
    namespace, trace = _recorded("param_groups_onecycle")
    steps = _events(trace, "optimizer_step")
    assert len(steps) == 3 and all(e.payload["optimizer"] == "AdamW" for e in steps)
    model = namespace["model"]
    # every parameter of both groups changes (weight decay too)
    assert all(
        sorted(e.payload["after"]) == sorted(f"model.{n}" for n, _p in model.named_parameters())
        for e in steps
    )
    # OneCycleLR's lr of the first group before each step (the scheduler steps after it)
    assert [e.payload["lr"] for e in steps][0] == pytest.approx(1e-3 / 25)


def test_layers_called_while_their_model_is_built_are_named_under_it() -> None:
    """A model built inside the block whose ``__init__`` calls its layers (to size the next
    one), and spectral_norm's parametrization (which calls itself as it registers): their
    modules and parameters are named under the variable that holds the model once built,
    ``net.conv1.weight``, not by their type as modules no variable holds."""
    _namespace, trace = _recorded("cnn_sized_in_init")
    doc = trace.doc
    assert [m.path for m in doc.graph.modules] == [
        "net",
        "net.conv1",
        "net.conv2",
        "net.fc1",
        "net.fc2",
        "loss_function",
    ]
    params = sorted(n.tensor for n in doc.graph.nodes if n.kind == "tensor" and n.requires_grad)
    assert params == sorted(trace.grads)
    assert "net.conv1.weight" in trace.grads
    _namespace, trace = _recorded("weight_norm")
    assert sorted(trace.grads) == [
        "model.0.bias",
        "model.0.parametrizations.weight.original0",
        "model.0.parametrizations.weight.original1",
        "model.2.bias",
        "model.2.parametrizations.weight.original",
    ]


def test_a_layer_added_to_a_model_after_it_was_found() -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 3)
    with gradtrace.record() as rec:
        model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU())
        model.add_module("fc", torch.nn.Linear(5, 2))
        model(x).sum().backward()
        old_head = model.fc
        model.fc = torch.nn.Linear(5, 1)  # (a new head: its path is taken, it is the second)
        model(x).sum().backward()
    grads = rec.trace.grads
    assert sorted(grads) == sorted(
        [
            "model.0.weight",
            "model.0.bias",
            "model.fc.weight",
            "model.fc.bias",
            "model.fc#2.weight",
            "model.fc#2.bias",
        ]
    )
    np.testing.assert_array_equal(grads["model.fc#2.weight"], model.fc.weight.grad.numpy())
    np.testing.assert_array_equal(grads["model.fc.weight"], old_head.weight.grad.numpy())
    assert [m.parent for m in rec.trace.doc.graph.modules if m.path == "model.fc#2"] == [None]


def test_a_layer_of_a_model_only_a_function_holds() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3)

    def run() -> None:
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())
        model[0](x).sum().backward()  # (only its layer is called)

    with gradtrace.record() as rec:
        run()
    assert sorted(rec.trace.grads) == ["model.0.bias", "model.0.weight"]  # (run()'s local)


def test_a_model_built_and_trained_in_a_main_function_is_named_by_its_local() -> None:
    # the `if __name__ == "__main__": main()` shape: no variable of the block holds the models
    def main() -> tuple[nn.Module, nn.Module]:
        torch.manual_seed(0)
        netD = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
        netG = nn.Linear(2, 3)
        optD = torch.optim.SGD(netD.parameters(), lr=0.1)
        for _ in range(2):
            optD.zero_grad()
            errD = netD(netG(torch.randn(5, 2)).detach()).mean()
            errD.backward()
            optD.step()
        return netD, netG

    plain_d, _ = main()
    with gradtrace.record() as rec:
        main()
    grads = rec.trace.grads
    expected = [f"netD.{name}" for name, _p in plain_d.named_parameters()] + ["netG.weight", "netG.bias"]
    assert sorted(grads) == sorted(expected)
    assert grads["netG.weight"] is None and grads["netG.bias"] is None  # (its output detached)
    for name, param in plain_d.named_parameters():
        np.testing.assert_array_equal(grads[f"netD.{name}"], param.grad.numpy())
    paths = {m.path for m in rec.trace.doc.graph.modules}
    assert {"netD", "netD.0", "netG"} <= paths
    assert [p.label for p in rec.trace.doc.passes][:3] == [
        "forward #1",
        "backward #1 of errD",
        "optD.step #1",
    ]


def test_values_read_through_torch_func_wrappers_are_one_warning_per_transform() -> None:
    """The per-sample-gradients program's 27 nodes and modules that ran inside vmap(grad(…))
    are a diagnostic each in the trace, and one warning per way they ran (grad; grad inside
    vmap), naming the first three and counting the rest."""
    source = "with gradtrace.record() as rec:\n" + textwrap.indent(
        textwrap.dedent(PROGRAMS["per_sample_grads"]), "    "
    )
    namespace: dict[str, Any] = {"torch": torch, "nn": torch.nn, "gradtrace": gradtrace}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(source, "<program>", "exec"), namespace)
    notes = [d for d in namespace["rec"].trace.doc.analyses.diagnostics if d.code == "functorch_value"]
    assert len(notes) > 10 and all(d.node or d.module for d in notes)
    issued = [str(w.message) for w in caught if issubclass(w.category, gradtrace.GradtraceWarning)]
    assert len(issued) == 2, issued
    grad_only, in_vmap = issued
    total = sum(int(m.split(" and ")[1].split(" more")[0]) + 3 for m in issued)
    assert total == len(notes)
    assert grad_only.startswith("node n") and "ran inside torch.func (a grad transform):" in grad_only
    assert "ran inside torch.func (a grad transform, inside vmap (batch dim 0 of size 5))" in in_vmap
    assert in_vmap.endswith("(a vmap lane's value is shown as its whole batch) [functorch_value]")


def test_pruning_finds_its_own_hooks_inside_the_block() -> None:
    """torch.nn.utils.prune keeps its methods as forward-pre hooks and finds them again by
    their class (prune.remove; pruning a tensor twice): left unwrapped, the pruning tutorial's
    steps run inside the block as plain (prune.remove raised 'has to be pruned before pruning
    can be removed'). (The model is pruned before the block: inside it, pruning renames
    parameters the trace met already, weight to weight_orig, and the trace keeps the first.)"""
    import torch.nn.utils.prune as prune

    def build() -> torch.nn.Module:
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Conv2d(1, 3, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(108, 2)
        )
        prune.random_unstructured(model[0], name="weight", amount=0.3)
        prune.l1_unstructured(model[3], name="weight", amount=0.5)
        return model

    def train(model: torch.nn.Module) -> None:
        x = torch.randn(2, 1, 8, 8)
        model(x).pow(2).mean().backward()
        prune.l1_unstructured(model[0], name="weight", amount=0.2)  # (again: a PruningContainer)
        prune.remove(model[3], "weight")

    plain = build()
    train(plain)
    model = build()
    with gradtrace.record() as rec:
        train(model)
    for name, param in plain.named_parameters():
        assert torch.equal(dict(model.named_parameters())[name], param), name
    hooks = model[0]._forward_pre_hooks.values()
    assert [type(h).__name__ for h in hooks] == ["PruningContainer"]
    grads = rec.trace.grads
    assert sorted(grads) == ["model.0.bias", "model.0.weight_orig", "model.3.bias", "model.3.weight_orig"]
    np.testing.assert_array_equal(grads["model.0.weight_orig"], plain[0].weight_orig.grad.numpy())
    assert not [e for e in rec.trace.doc.events if e.hook is not None]  # (torch's hooks: no events)


def test_a_forward_after_the_last_backward_is_no_detached_branch() -> None:
    """FGSM's last forward (the perturbed image through the model, to evaluate it) follows
    every backward: no backward was called that could reach it, no diagnostic. Before the last
    backward, a branch it does not reach still is one."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    data = torch.rand(2, 4, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught, gradtrace.record() as rec:
        warnings.simplefilter("always")
        output = model(data)
        unused = data * 2  # noqa: F841  # (before the backward, not in the loss)
        loss = output.logsumexp(1).mean()
        model.zero_grad()
        loss.backward()
        perturbed_data = torch.clamp(data + 0.1 * data.grad.sign(), 0, 1)
        output = model(perturbed_data)
    detached = [d.tensor for d in rec.trace.doc.analyses.diagnostics if d.code == "detached_branch"]
    assert detached == ["unused"]
    assert len([w for w in caught if issubclass(w.category, gradtrace.GradtraceWarning)]) == 1


def test_a_compiled_model_trains_as_plain_without_torchs_global_hooks_warning() -> None:
    """torch warns when a compiled module is called while process-wide module hooks exist:
    record()'s own make it do so, a plain run does not. Not the program's warning: not issued
    (the trace says the module is compiled), and the training is bit-equal."""
    source = """
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 6), nn.GELU(), nn.Linear(6, 1))
compiled = torch.compile(model, backend="eager")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(5, 4)
for step in range(2):
    optimizer.zero_grad()
    loss = compiled(x).square().mean()
    loss.backward()
    optimizer.step()
"""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recorded = recorded_as_plain(source)
    torchs = [str(w.message) for w in caught if not issubclass(w.category, gradtrace.GradtraceWarning)]
    assert not [m for m in torchs if "global hooks" in m], torchs
    codes = {d.code for d in recorded["rec"].trace.doc.analyses.diagnostics}
    assert "compiled_module" in codes and "torch_warning" not in codes


@pytest.mark.parametrize("program", sorted(TRANSFORMERS_PROGRAMS))
def test_hugging_face_programs_bit_equal_and_a_backward_of_outputs_loss(program: str) -> None:
    """A Hugging Face model's training step as its docs write it: ``outputs.loss.backward()``
    is labelled by the member of the output the block holds."""
    pytest.importorskip("transformers")
    recorded = recorded_as_plain(TRANSFORMERS_PROGRAMS[program])
    backwards = [p.label for p in recorded["rec"].trace.doc.passes if p.phase == "backward"]
    assert backwards[-1].endswith(" of outputs.loss"), backwards


def test_an_optimizer_a_function_makes_is_named_by_its_variable_there() -> None:
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))

    def fit(model: torch.nn.Module) -> None:
        loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for xb, yb in loader:
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()

    model = torch.nn.Linear(4, 2)
    with gradtrace.record() as rec:
        fit(model)
    assert _labels(rec.trace) == [
        "forward #1",
        "backward #1 of loss",
        "opt.step #1",
        "zero_grad",
        "forward #2",
        "backward #2 of loss",
        "opt.step #2",
    ]
    assert [e.payload["name"] for e in _events(rec.trace, "optimizer_step")] == ["opt", "opt"]


def test_model_ensembling_with_stacked_state_and_a_meta_model() -> None:
    """torch.func's model-ensembling tutorial: stack_module_state, a base model on the meta
    device, vmap over functional_call, then a backward to the stacked parameters (a dict's
    members: named by their key there, ``params["fc1.weight"]``; their .grad is the plain
    run's)."""
    source = textwrap.dedent(ENSEMBLE)
    plain, _ = run_program(source, recorded=False)
    recorded, _ = run_program(source, recorded=True)
    trace = recorded["rec"].trace
    for key, param in plain["params"].items():
        assert torch.equal(recorded["params"][key].grad, param.grad), key
        assert torch.equal(torch.from_numpy(np.asarray(trace.grads[f'params["{key}"]'])), param.grad), key
    assert _labels(trace) == ["forward #1", "backward #1 of loss"]
    # the models of the list are named by their place there; the meta base model has no gradient
    assert {m.path for m in trace.doc.graph.modules if m.parent is None} == {
        "models[0]",
        "models[1]",
        "models[2]",
        "base_model",
    }
    assert all(grad is None for name, grad in trace.grads.items() if name.startswith("base_model."))
    trace.to_json_bytes()


def test_members_of_lists_and_dicts_are_named_by_their_place() -> None:
    """A leaf a dict holds is ``params["w"]``, a model a list holds ``models[0]`` (even while
    a loop variable holds it), a layer of a ModuleList a list holds ``stacks[0].1``: in grads,
    bit-equal to the plain run's .grad (test_record's bit-equality test runs each program)."""
    rec = recorded_as_plain(PROGRAMS["hand_dict"])["rec"]
    assert {'params["w"]', 'params["b"]'} <= set(rec.trace.grads)
    # (a container's member is no module's parameter)
    assert all(
        n.module is None for n in rec.trace.doc.graph.nodes if n.tensor and n.tensor.startswith("params")
    )
    rec = recorded_as_plain(PROGRAMS["ensemble_optimizers"])["rec"]
    assert {m.path for m in rec.trace.doc.graph.modules if m.parent is None} == {"models[0]", "models[1]"}
    assert {"models[0].fc.weight", "models[1].fc.bias"} <= set(rec.trace.grads)
    names = [e.payload["name"] for e in _events(rec.trace, "optimizer_step")]
    assert names == ["optimizers[0]", "optimizers[1]"] * 2
    rec = recorded_as_plain(PROGRAMS["tuple_unpacked"])["rec"]
    assert {"w", "b"} <= set(rec.trace.grads)
    rec = recorded_as_plain(PROGRAMS["modulelist_in_list"])["rec"]
    assert sorted(rec.trace.grads) == [f"stacks[0].{i}.{p}" for i in (0, 1) for p in ("bias", "weight")]
