"""run_program agrees with the same computation in plain torch; torch errors name the line."""

import pytest
import torch
import torch.nn.functional as F

from gradtrace.engine.build import build
from gradtrace.engine.functions import FUNCTION_IMPLS, METHOD_IMPLS
from gradtrace.engine.interpreter import run_program
from gradtrace.examples import get_example
from gradtrace.spec import SpecError, parse_spec
from gradtrace.spec.vocabulary import FUNCTIONS, METHODS


def test_registries_match_the_torch_free_vocabulary():
    assert set(FUNCTION_IMPLS) == set(FUNCTIONS)
    assert set(METHOD_IMPLS) == set(METHODS)
    assert all(METHODS[m].inplace == m.endswith("_") for m in METHODS)


def _run(spec_dict, seed=0):
    spec = parse_spec(spec_dict)
    built = build(spec, torch.Generator().manual_seed(seed))
    assigned = []
    env = run_program(
        built.program, dict(built.inputs), built.modules, on_assign=lambda n, t: assigned.append(n)
    )
    return spec, built, env, assigned


def _doc(forward, inputs, modules=None):
    return {"spec_version": 1, "title": "t", "modules": modules or {}, "inputs": inputs, "forward": forward}


def test_seed002_forward_and_backward_match_the_seed_numbers():
    spec, built, env, assigned = _run(get_example("full-backward-hook"))
    assert assigned == ["x1", "y", "loss"]
    assert env["x1"].item() == pytest.approx(0.19)
    assert env["y"].item() == pytest.approx(0.076176)
    assert env["loss"].item() == pytest.approx(0.85345, abs=1e-5)
    env["loss"].backward()
    params = dict(built.root.named_parameters())
    assert built.inputs["x"].grad.item() == pytest.approx(-0.12238, abs=1e-4)
    assert params["f0.bias"].grad.item() == pytest.approx(-0.40796, abs=1e-4)
    assert params["f1.f.bias"].grad.item() == pytest.approx(-1.0199, abs=1e-4)
    assert params["f1.f.weight"].grad.item() == pytest.approx(-0.1938, abs=1e-4)


def test_full_backward_hook_on_the_program_module_sees_the_seed_gradients():
    spec, built, env, _ = _run(get_example("full-backward-hook"))
    seen = {}
    built2 = build(spec, torch.Generator().manual_seed(0))
    handle = built2.root.f1.register_full_backward_hook(
        lambda m, gi, go: seen.update(gi=gi[0].item(), go=go[0].item())
    )
    try:
        env = run_program(built2.program, dict(built2.inputs), built2.modules)
        assert env["y"].grad_fn.name() == "BackwardHookFunctionBackward"
        env["loss"].backward()
    finally:
        handle.remove()
    assert seen["go"] == pytest.approx(-1.847648, abs=1e-5)
    assert seen["gi"] == pytest.approx(-0.40796, abs=1e-4)


def test_mlp_program_matches_plain_torch():
    spec, built, env, _ = _run(get_example("mlp-hooks-reconstruction"))
    x, y = built.inputs["x"], built.inputs["y"]
    w1, w2 = built.root.fc1.weight, built.root.fc2.weight
    expected = 0.5 * ((F.relu(x @ w1.t()) @ w2.t() - y) ** 2).sum()
    assert torch.equal(env["loss"], expected)
    got = torch.autograd.grad(env["loss"], [w1, w2])
    want = torch.autograd.grad(expected, [w1, w2])
    for g, w in zip(got, want, strict=True):
        assert torch.allclose(g, w, atol=1e-6)


def test_operators_functions_methods_subscripts_and_kwargs():
    forward = [
        "a = (x @ m.t() + 1) * 2 - x / 4",
        "b = -a ** 2",
        "c = softmax(b, dim=-1)",
        "d = cat([c, a], dim=0)",
        "e = d.view(2, 6)[0, 1:5:2]",
        "f = stack([e, e], dim=1).sum(dim=0, keepdim=True)",
        "g = mse_loss(c, a, reduction='sum') + x.reshape([6]).mean()",
        "h = d[..., None][:, -1]",
    ]
    torch.manual_seed(0)
    xv = torch.randn(2, 3)
    mv = torch.randn(3, 3)
    _, built, env, assigned = _run(_doc(forward, {"x": {"value": xv.tolist()}, "m": {"value": mv.tolist()}}))
    x, m = built.inputs["x"], built.inputs["m"]
    a = (x @ m.t() + 1) * 2 - x / 4
    b = -(a**2)
    c = torch.softmax(b, dim=-1)
    d = torch.cat([c, a], dim=0)
    e = d.view(2, 6)[0, 1:5:2]
    f = torch.stack([e, e], dim=1).sum(dim=0, keepdim=True)
    g = F.mse_loss(c, a, reduction="sum") + x.reshape([6]).mean()
    h = d[..., None][:, -1]
    for name, value in {"a": a, "b": b, "c": c, "d": d, "e": e, "f": f, "g": g, "h": h}.items():
        assert torch.equal(env[name], value), name
    assert assigned == list("abcdefgh")


def test_tuple_unpacking_of_multihead_attention():
    _, built, env, assigned = _run(get_example("tiny-attention"))
    out, weights = built.root.attn(built.inputs["x"], built.inputs["x"], built.inputs["x"])
    assert torch.equal(env["out"], out) and torch.equal(env["weights"], weights)
    assert assigned[:2] == ["out", "weights"]


def test_module_returning_a_tuple():
    doc = _doc(
        ["p, q = two(x)", "r = p + q"],
        {"x": {"value": [1.0, 2.0]}},
        {"two": {"type": "Module", "args": ["v"], "forward": ["return v * 2, v * 3"]}},
    )
    _, _, env, _ = _run(doc)
    assert env["r"].tolist() == [5.0, 10.0]


def test_sequential_children_are_named_like_torch():
    doc = _doc(
        ["y = seq(x)"],
        {"x": {"value": [[1.0, -1.0]]}},
        {
            "seq": {
                "type": "Sequential",
                "layers": [
                    {
                        "type": "Linear",
                        "in_features": 2,
                        "out_features": 2,
                        "init": {"weight": [[1, 0], [0, 1]], "bias": [0, 0]},
                    },
                    {"type": "ReLU"},
                ],
            }
        },
    )
    _, built, env, _ = _run(doc)
    assert [n for n, _ in built.root.named_parameters()] == ["seq.0.weight", "seq.0.bias"]
    assert env["y"].tolist() == [[1.0, 0.0]]


def test_shape_mismatch_is_a_forward_error_naming_the_line():
    doc = _doc(["a = x + 1", "b = a @ a"], {"x": {"value": [[1.0, 2.0, 3.0]]}})
    with pytest.raises(SpecError) as info:
        _run(doc)
    err = info.value
    assert (err.code, err.path, err.line, err.exception) == ("forward_error", "/forward/1", 2, "RuntimeError")
    assert err.message == (
        "forward line 2 (`b = a @ a`): mat1 and mat2 shapes cannot be multiplied (1x3 and 1x3)"
    )


def test_error_inside_a_module_points_into_its_program():
    doc = _doc(
        ["y = f1(x)"],
        {"x": {"value": [1.0, 2.0]}},
        {"f1": {"type": "Module", "args": ["v"], "forward": ["s = v.view(3)", "return s"]}},
    )
    with pytest.raises(SpecError) as info:
        _run(doc)
    err = info.value
    assert (err.code, err.path, err.line) == ("forward_error", "/modules/f1/forward/0", 1)
    assert (
        err.message
        == "module f1, forward line 1 (`s = v.view(3)`): shape '[3]' is invalid for input of size 2"
    )


def test_dtype_clash_is_a_forward_error():
    doc = _doc(
        ["y = x + t", "z = y @ t"],
        {"x": {"value": [[1.0, 2.0]]}, "t": {"value": [[1], [2]], "dtype": "int64"}},
    )
    with pytest.raises(SpecError) as info:
        _run(doc)
    assert (info.value.path, info.value.code) == ("/forward/1", "forward_error")
    assert "dtype" in info.value.message


def test_inplace_after_full_backward_hook_raises_pytorchs_message():
    spec = parse_spec(get_example("inplace-after-hook"))
    built = build(spec, torch.Generator().manual_seed(0))
    env = run_program(built.program, dict(built.inputs), built.modules)  # no hook: fine
    assert env["loss"].requires_grad
    handle = built.root.lin.register_full_backward_hook(lambda m, gi, go: None)
    try:
        with pytest.raises(SpecError) as info:
            run_program(built.program, dict(built.inputs), built.modules)
    finally:
        handle.remove()
    err = info.value
    assert (err.path, err.exception) == ("/forward/1", "RuntimeError")
    assert err.message.startswith(
        "forward line 2 (`h2 = h.relu_()`): Output 0 of BackwardHookFunction is a view and is being modified inplace."
    )


def test_env_is_updated_in_place_and_step_programs_extend_it():
    spec = parse_spec(get_example("tensor-vs-post-accumulate-hooks"))
    built = build(spec, torch.Generator())
    env = dict(built.inputs)
    assert run_program(built.program, env, built.modules) is env
    run_program(spec.step_program(1), env, built.modules)
    assert env["y1"].item() == 2.0 and env["y2"].item() == 3.0


def test_program_module_reports_its_own_assignments_when_asked():
    spec = parse_spec(get_example("full-backward-hook"))
    built = build(spec, torch.Generator())
    names = []
    built.root.f1.on_assign = lambda n, t: names.append(n)
    run_program(built.program, dict(built.inputs), built.modules)
    assert names == ["s"]
