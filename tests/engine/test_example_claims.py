"""Each gallery example teaches numbers in its description: check them with plain torch hooks.

These run the example's built model with hooks registered by hand (independent of the capture
engine), so a wrong example cannot hide behind a wrong recorder.
"""

import warnings

import pytest
import torch

from gradtrace.engine.build import build
from gradtrace.engine.interpreter import run_program
from gradtrace.examples import get_example
from gradtrace.spec import parse_spec


def _built(example_id):
    spec = parse_spec(get_example(example_id))
    built = build(spec, torch.Generator().manual_seed(spec.seed))
    return spec, built


def _forward(built, program=None):
    return run_program(program or built.program, dict(built.inputs), built.modules)


def test_two_layer_linear_weight_grads_are_outer_products():
    _, built = _built("two-layer-linear")
    env = _forward(built)
    for t in ("a0", "a1"):
        env[t].retain_grad()
    env["L"].backward()
    W0, W1 = built.root.W0.weight, built.root.W1.weight
    # one sample (batch of 1): each weight's gradient is the outer product δ ⊗ input
    assert torch.allclose(W1.grad, torch.outer(env["a1"].grad[0], env["a0"][0]))
    assert torch.allclose(W0.grad, torch.outer(env["a0"].grad[0], built.inputs["x"][0]))
    assert built.inputs["x"].grad is None  # gray leaf: the gradient was not kept


def test_mlp_hooks_reconstruct_weight_grads():
    _, built = _built("mlp-hooks-reconstruction")
    captured, handles = {}, []
    for name in ("fc1", "fc2"):
        mod = getattr(built.root, name)
        handles.append(
            mod.register_forward_hook(lambda m, i, o, n=name: captured.__setitem__(f"{n}_a", i[0].detach()))
        )
        handles.append(
            mod.register_full_backward_hook(
                lambda m, gi, go, n=name: captured.__setitem__(f"{n}_delta", go[0].detach())
            )
        )
    try:
        _forward(built)["loss"].backward()
    finally:
        for h in handles:
            h.remove()
    assert captured["fc1_a"].shape == (5, 6, 4) and captured["fc1_delta"].shape == (5, 6, 3)
    for name in ("fc1", "fc2"):
        rebuilt = torch.einsum("bto,bti->oi", captured[f"{name}_delta"], captured[f"{name}_a"])
        assert torch.allclose(rebuilt, getattr(built.root, name).weight.grad, atol=1e-6)


def test_retain_graph_accumulates_then_freed_graph_fails():
    _, built = _built("retain-graph-accumulation")
    env = _forward(built)
    env["y"].backward(retain_graph=True)
    assert built.inputs["x"].grad.item() == 2.0
    env["y"].backward()
    assert built.inputs["x"].grad.item() == 4.0
    _, built = _built("freed-graph-error")
    env = _forward(built)
    env["y"].backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        env["y"].backward()
    assert built.inputs["x"].grad.item() == 2.0


def test_two_losses_sum_their_contributions():
    _, built = _built("two-losses")
    env = _forward(built)
    w = built.root.model.weight
    (g1,) = torch.autograd.grad(env["loss1"], w, retain_graph=True)
    (g2,) = torch.autograd.grad(env["loss2"], w, retain_graph=True)
    env["loss1"].backward(retain_graph=True)
    env["loss2"].backward()
    assert torch.allclose(w.grad, g1 + g2)


def test_higher_order_grad():
    _, built = _built("higher-order-grad")
    env = _forward(built)
    w = built.inputs["w"]
    (g,) = torch.autograd.grad(env["loss"], w, create_graph=True)
    assert g.item() == pytest.approx(6.75)
    g.backward()
    assert w.grad.item() == pytest.approx(9.0)


def test_tensor_hook_sees_contributions_post_accumulate_sees_totals():
    spec, built = _built("tensor-vs-post-accumulate-hooks")
    w = built.inputs["w"]
    seen = []
    h1 = w.register_hook(lambda g: seen.append(("hook", g.item())))
    h2 = w.register_post_accumulate_grad_hook(lambda p: seen.append(("post", p.grad.item())))
    try:
        env = _forward(built)
        env["y1"].backward(retain_graph=True)
        run_program(spec.step_program(1), env, built.modules)
        env["y2"].backward()
    finally:
        h1.remove()
        h2.remove()
    assert seen == [("hook", 2.0), ("post", 2.0), ("hook", 3.0), ("post", 5.0)]


def _seed002_with(example_id, register):
    _, built = _built(example_id)
    seen = {}
    handle = register(built.root.f1, seen)
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            _forward(built)["loss"].backward()
    finally:
        handle.remove()
    grads = {n: p.grad.item() for n, p in built.root.named_parameters()}
    grads["x"] = built.inputs["x"].grad.item()
    return seen, grads


def test_full_backward_hook_x2_doubles_everything_upstream():
    def register(mod, seen):
        return mod.register_full_backward_hook(lambda m, gi, go: (gi[0] * 2,))

    _, grads = _seed002_with("full-backward-hook-x2", register)
    assert grads["x"] == pytest.approx(-0.2448, abs=1e-4)
    assert grads["f0.weight"] == pytest.approx(-0.2448, abs=1e-4)
    assert grads["f0.bias"] == pytest.approx(-0.8159, abs=1e-4)
    assert grads["f1.f.bias"] == pytest.approx(-1.0199, abs=1e-4)


def test_deprecated_backward_hook_sees_the_last_ops_input():
    def register(mod, seen):
        return mod.register_backward_hook(lambda m, gi, go: seen.update(gi=gi[0].item(), go=go[0].item()))

    seen, grads = _seed002_with("deprecated-backward-hook", register)
    assert seen["gi"] == pytest.approx(-1.0199, abs=1e-4)
    assert seen["go"] == pytest.approx(-1.8476, abs=1e-4)
    assert grads["x"] == pytest.approx(-0.1224, abs=1e-4)


def test_forward_hook_adding_one_changes_the_gradient():
    _, built = _built("forward-hook-modifies-output")
    handle = built.root.linear.register_forward_hook(lambda m, i, o: o + 1)
    try:
        env = _forward(built)
    finally:
        handle.remove()
    out = env["output"]
    out.retain_grad()
    env["loss"].backward()
    plain = built.root.linear(built.inputs["input_tensor"])
    assert torch.allclose(out, plain + 1)
    assert torch.allclose(out.grad, 2 * out)


def test_tensor_hook_fires_before_module_backward_hook():
    _, built = _built("tensor-hook-scales-grad")
    order = []
    handle = built.root.linear.register_full_backward_hook(
        lambda m, gi, go: order.append(("module", go[0].item()))
    )
    try:
        env = _forward(built)
        env["res"].register_hook(lambda g: (order.append(("tensor", g.item())), g * 0.1)[1])
        env["res"].backward()
    finally:
        handle.remove()
    assert order == [("tensor", 1.0), ("module", pytest.approx(0.1))]
    assert torch.allclose(built.root.linear.weight.grad, 0.1 * built.inputs["value"].detach())


def test_shared_weights_accumulate_two_contributions():
    _, built = _built("shared-weights-fan-in")
    env = _forward(built)
    w = built.root.f.weight
    env["loss"].backward()
    x, a, y = built.inputs["x"], env["a"], env["y"]
    dy = 2 * y
    da = dy @ w
    dh = da * (1 - a**2)
    assert torch.allclose(w.grad, dy.t() @ a + dh.t() @ x, atol=1e-6)


def test_sgd_step_then_new_forward():
    _, built = _built("sgd-training-step")
    lin = built.root.lin
    env = _forward(built)
    env["loss"].backward()
    before = lin.weight.detach().clone()
    grad = lin.weight.grad.clone()
    with torch.no_grad():
        for p in built.root.parameters():
            p -= 0.1 * p.grad
    assert torch.allclose(lin.weight, before - 0.1 * grad)
    built.root.zero_grad()
    env2 = _forward(built)
    assert env2["loss"].grad_fn is not env["loss"].grad_fn
    assert env2["loss"].item() < env["loss"].item()


def test_attention_and_conv_match_plain_modules():
    _, built = _built("tiny-attention")
    env = _forward(built)
    x = built.inputs["x"]
    out, _ = built.root.attn(x, x, x)
    assert torch.allclose(env["h"], built.root.norm(out + x))
    _, built = _built("conv-net")
    env = _forward(built)
    r = built.root
    logits = r.head(r.flat(r.act(r.conv(built.inputs["x"]))))
    assert torch.allclose(env["loss"], torch.nn.functional.cross_entropy(logits, built.inputs["target"]))


def test_retain_grad_intermediate_keeps_a0_grad():
    _, built = _built("retain-grad-intermediate")
    env = _forward(built)
    env["a0"].retain_grad()
    env["L"].backward()
    expected = 2 * env["a1"].detach() * built.root.W1.weight.detach()[0]
    assert torch.allclose(env["a0"].grad, expected)


def test_embedding_grad_rows():
    _, built = _built("embedding-rows")
    env = _forward(built)
    env["loss"].backward()
    grad = built.root.emb.weight.grad
    row_grads = 2 * env["e"].detach().sum(dim=1, keepdim=True).expand(3, 3)  # d loss / d e
    assert torch.equal(grad[[0, 2, 4]], torch.zeros(3, 3))
    assert torch.allclose(grad[3], row_grads[1])
    assert torch.allclose(grad[1], row_grads[0] + row_grads[2])


def test_hook_without_input_grad_gets_none_and_warns():
    _, built = _built("hook-no-input-grad")
    seen = {}
    handle = built.root.fc1.register_full_backward_hook(lambda m, gi, go: seen.update(gi=gi, go=go))
    try:
        with pytest.warns(UserWarning, match="no inputs require gradients"):
            _forward(built)["loss"].backward()
    finally:
        handle.remove()
    assert seen["gi"] == (None,)
    assert seen["go"][0].shape == (1, 2)


def test_detach_stops_the_gradient():
    _, built = _built("detach-stops-gradient")
    env = _forward(built)
    env["z"].backward()
    assert env["d"].grad_fn is None and env["z"].item() == 36.0
    assert built.inputs["w"].grad.item() == 3.0
