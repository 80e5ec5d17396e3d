"""dry_run on the meta device: limits named with their values, nothing allocated; every example runs."""

import dataclasses

import pytest
import torch

import gradtrace
from gradtrace.engine.build import build, resolve_tensor
from gradtrace.engine.dryrun import dry_run
from gradtrace.engine.interpreter import run_program
from gradtrace.examples import example_ids, get_example
from gradtrace.spec import SpecError, SpecLimits, parse_spec
from gradtrace.spec.modules import LEAF_TYPES
from gradtrace.spec.program import Call, MethodCall
from gradtrace.spec.vocabulary import FUNCTIONS, METHODS


def _doc(forward, inputs, modules=None, steps=None):
    doc = {"spec_version": 1, "title": "t", "modules": modules or {}, "inputs": inputs, "forward": forward}
    if steps:
        doc["steps"] = steps
    return doc


@pytest.mark.parametrize("example_id", example_ids())
def test_every_example_passes_the_dry_run_and_runs_its_forward(example_id):
    spec = parse_spec(get_example(example_id))
    report = dry_run(spec, SpecLimits())
    assert 0 < report.nodes <= SpecLimits().max_nodes
    built = build(spec, torch.Generator().manual_seed(spec.seed))
    env = run_program(built.program, dict(built.inputs), built.modules)
    last = spec.program.statements[-1].targets[-1]
    assert torch.isfinite(env[last]).all()
    for step in spec.effective_steps():  # every name a step reads resolves on the real build
        for ref in getattr(step, "inputs", None) or []:
            resolve_tensor(ref, {**env, "g": None}, built.root)
    expected_errors = 1 if example_id == "freed-graph-error" else 0
    assert len(report.step_errors) == expected_errors


def test_report_counts_for_seed002():
    report = dry_run(parse_spec(get_example("full-backward-hook")), SpecLimits())
    assert report.parameters == 4
    assert report.max_tensor_elements == 1
    assert report.step_errors == []


def test_flops_are_counted_for_matmul():
    doc = _doc(
        ["y = a @ b", "loss = y.sum()"],
        {"a": {"shape": [10, 20], "requires_grad": True}, "b": {"shape": [20, 30]}},
    )
    report = dry_run(parse_spec(doc), SpecLimits())
    assert report.flops == 2 * 10 * 20 * 30 * 2  # forward mm + the grad of a (b needs none)


def test_hidden_blowup_is_caught_on_its_line():
    doc = _doc(["c = a @ b", "loss = c.sum()"], {"a": {"shape": [100000, 1]}, "b": {"shape": [1, 100000]}})
    with pytest.raises(SpecError) as info:
        dry_run(parse_spec(doc), SpecLimits())
    err = info.value
    assert (err.code, err.path, err.line) == ("limit_exceeded", "/forward/0", 1)
    assert err.message == (
        "forward line 1 (`c = a @ b`): the element count of a tensor of shape [100000, 100000] "
        "would be 10,000,000,000; the limit max_tensor_elements is 1,000,000"
    )


def test_flop_limit():
    doc = _doc(["y = a @ b"], {"a": {"shape": [500, 500]}, "b": {"shape": [500, 500]}})
    with pytest.raises(SpecError) as info:
        dry_run(parse_spec(doc), SpecLimits(max_flops=1e6))
    assert info.value.code == "limit_exceeded"
    assert info.value.message == (
        "forward line 1 (`y = a @ b`): the floating-point operation count would be "
        "250,000,000; the limit max_flops is 1,000,000.0"
    )


def test_node_limit_counts_autograd_nodes():
    forward = ["h0 = x * 2"] + [f"h{i} = h{i - 1} * 2" for i in range(1, 50)]
    doc = _doc(forward, {"x": {"value": 1.0, "requires_grad": True}})
    with pytest.raises(SpecError) as info:
        dry_run(parse_spec(doc), SpecLimits(max_nodes=20))
    assert info.value.code == "limit_exceeded"
    assert info.value.message == "the number of autograd nodes would be 51; the limit max_nodes is 20"
    assert dry_run(parse_spec(doc), SpecLimits()).nodes == 51  # 50 MulBackward0 + 1 AccumulateGrad


def test_nested_modules_calling_children_repeatedly_hit_the_runaway_guard():
    inner = {
        "type": "Module",
        "args": ["v"],
        "forward": ["a = v * 2", "b = a * 2", "c = b * 2", "return c * 2"],
    }
    modules = {"m": inner}
    for _ in range(5):  # each level calls its child 4 times: 4**6 multiplications
        modules = {
            "m": {
                "type": "Module",
                "args": ["v"],
                "modules": modules,
                "forward": ["a = m(v)", "b = m(a)", "c = m(b)", "return m(c)"],
            }
        }
    doc = _doc(["y = m(x)"], {"x": {"value": 1.0, "requires_grad": True}}, modules)
    with pytest.raises(SpecError) as info:
        dry_run(parse_spec(doc), SpecLimits(max_nodes=200))
    assert info.value.code == "limit_exceeded"
    assert "the limit max_nodes is 3,200" in info.value.message


def test_grad_with_create_graph_and_forward_steps_are_run():
    spec = parse_spec(get_example("higher-order-grad"))
    report = dry_run(spec, SpecLimits())
    assert report.step_errors == []
    assert report.nodes > 2  # the second graph (of g) was counted too


@pytest.mark.parametrize(
    "doc",
    [
        # no steps, a non-scalar last tensor: the real run's backward is of its sum
        _doc(["y = x * 2"], {"x": {"shape": [3], "init": "randn", "requires_grad": True}}),
        # create_graph without retain_graph: PyTorch keeps the graph (retain_graph defaults to
        # create_graph), so the second backward runs
        _doc(
            ["y = x * x"],
            {"x": {"value": 1.0, "requires_grad": True}},
            steps=[
                {"do": "backward", "of": "y", "create_graph": True},
                {"do": "backward", "of": "y"},
                {"do": "sgd_step", "lr": 0.1},
                {"do": "zero_grad", "set_to_none": False},
            ],
        ),
    ],
    ids=["default-sum", "create-graph-retains"],
)
def test_the_dry_run_runs_the_steps_the_real_run_runs(doc):
    """The dry run and the capture run each step through the same calls (engine/steps.py):
    what the real run does, the dry run measured (no step it skips as refused)."""
    spec = parse_spec(doc)
    report = dry_run(spec, SpecLimits())
    doc_trace = gradtrace.trace_spec(doc).doc
    assert report.step_errors == [] and [e for e in doc_trace.events if e.kind == "error"] == []
    backward_nodes = {e.node for e in doc_trace.events if e.kind == "node_pre"}
    assert backward_nodes  # (the real run's backward ran)
    assert report.nodes >= len(backward_nodes)


def test_forward_error_on_meta_is_a_forward_error():
    doc = _doc(["y = a @ b"], {"a": {"shape": [2, 3]}, "b": {"shape": [2, 3]}})
    with pytest.raises(SpecError) as info:
        dry_run(parse_spec(doc), SpecLimits())
    assert (info.value.code, info.value.path) == ("forward_error", "/forward/0")


def test_declared_limits_are_checked_first():
    doc = _doc(["y = x.sum()"], {"x": {"shape": [2**30, 2**30]}})
    with pytest.raises(SpecError) as info:
        dry_run(parse_spec(doc), SpecLimits.local())
    assert info.value.path == "/inputs/x"
    assert info.value.message == ("dimension 0 of input x is 1,073,741,824; the limit max_dim is 100,000,000")


# A program that calls every whitelisted function and method once.
VOCABULARY_PROGRAM = [
    "a = relu(x) + gelu(x) + gelu(x, approximate='tanh') + tanh(x) + sigmoid(x) + silu(x) + leaky_relu(x, 0.1)",
    "b = softmax(x, -1) + log_softmax(x, dim=1) + dropout(x, p=0.3) + dropout(x, p=0.3, training=False)",
    "c = exp(x) + log(p) + sqrt(p) + abs(x) + neg(x) + sin(x) + cos(x) + square(x) + pow(x, 2)",
    "d = add(x, 1) + sub(x, x) + mul(x, 2) + div(x, 3) + maximum(x, p) + minimum(x, p) + clamp(x, min=-0.5, max=0.5)",
    "e = sum(x) + mean(x) + amax(x, dim=1).sum() + amin(x).sum() + sum(x, 1).sum() + mean(x, dim=0, keepdim=True).sum()",
    "f = matmul(x, w) + mm(x, w) + bmm(x3, x3.transpose(1, 2)).sum() + outer(v, v).sum() + dot(v, v)",
    "g = transpose(x, 0, 1).sum() + reshape(x, (6,)).sum() + permute(x3, (2, 0, 1)).sum() + flatten(x3, start_dim=1).sum() + unsqueeze(x, 0).sum() + squeeze(x3, 0).sum()",
    "h = cat([x, x], dim=0).sum() + stack([x, x]).sum()",
    "i = mse_loss(x, p) + l1_loss(x, p, reduction='sum') + cross_entropy(x, t) + nll_loss(log_softmax(x, dim=1), t) + binary_cross_entropy(sigmoid(x), sigmoid(p)) + binary_cross_entropy_with_logits(x, sigmoid(p))",
    "j = ones_like(x) + zeros_like(x)",
    "k = x.sum() + x.mean() + x.amax() + x.amin() + x.pow(2).sum() + x.t().sum() + x.relu().sum() + x.tanh().sum() + x.sigmoid().sum() + x.exp().sum() + p.log().sum() + p.sqrt().sum() + x.abs().sum() + x.neg().sum() + x.square().sum()",
    "l = x.softmax(1).sum() + x.log_softmax(dim=1).sum() + x.norm() + x.norm(1) + x.clamp(min=0).sum() + x.matmul(w).sum() + x.mm(w).sum()",
    "m = x.view(6).sum() + x.reshape(3, 2).sum() + v.expand(3, 3).sum() + v.repeat(2).sum() + x3.permute(2, 1, 0).sum() + x.transpose(0, 1).sum() + x3.flatten().sum() + x.flatten(0, 1).sum() + x.unsqueeze(1).sum() + x3.squeeze(0).sum() + x.squeeze().sum()",
    "n = x.detach().sum() + x.clone().sum() + x.contiguous().sum()",
    "o = x.clone()",
    "o2 = o.add_(1, alpha=2).sub_(1).mul_(2).div_(3).relu_().tanh_().sigmoid_().exp_().clamp_(min=0, max=2)",
    "o3 = o2.sum() + x.clone().zero_().sum()",
    "loss = a.sum() + b.sum() + c.sum() + d.sum() + e + f.sum() + g + h + i + j.sum() + k + l + m + n + o3",
]
VOCABULARY_DOC = {
    "spec_version": 1,
    "title": "all",
    "inputs": {
        "x": {"shape": [2, 3], "requires_grad": True},
        "p": {"shape": [2, 3], "init": "rand"},
        "w": {"shape": [3, 3], "requires_grad": True},
        "v": {"shape": [3]},
        "x3": {"shape": [1, 2, 3]},
        "t": {"value": [0, 2], "dtype": "int64"},
    },
    "forward": VOCABULARY_PROGRAM,
}


def _callees(node, out):
    if isinstance(node, Call):
        out.add(("function", node.callee))
    if isinstance(node, MethodCall):
        out.add(("method", node.method))
    if dataclasses.is_dataclass(node):
        for f in dataclasses.fields(node):
            _callees(getattr(node, f.name), out)
    elif isinstance(node, tuple | list):
        for item in node:
            _callees(item, out)
    return out


def test_every_function_and_method_runs_on_meta_and_on_cpu():
    spec = parse_spec(VOCABULARY_DOC)
    used = _callees([s.value for s in spec.program.statements], set())
    assert {("function", f) for f in FUNCTIONS} | {("method", m) for m in METHODS} == used
    report = dry_run(spec, SpecLimits())  # no meta kernel missing: no forward_error
    assert report.nodes > 100
    built = build(spec, torch.Generator().manual_seed(0))
    env = run_program(built.program, dict(built.inputs), built.modules)
    assert torch.isfinite(env["loss"])


def test_views_and_inplace_results_do_not_count_as_allocations():
    doc = _doc(
        ["a = x.t()", "b = x.view(6)", "c = x.clone()", "d = c.mul_(2)", "loss = d.sum()"],
        {"x": {"shape": [2, 3]}},
    )
    report = dry_run(parse_spec(doc), SpecLimits())
    # clone (6) + sum (1) + the scalar backward seed is not run (no grad needed): views and mul_ are free
    assert report.total_elements == 7
    assert report.max_tensor_elements == 6


def test_a_two_million_parameter_model_fits_the_hosted_totals():
    doc = _doc(
        ["h = l1(x)", "g = l2(h)", "loss = g.pow(2).mean()"],
        {"x": {"shape": [4, 1000]}},
        {
            "l1": {"type": "Linear", "in_features": 1000, "out_features": 999},
            "l2": {"type": "Linear", "in_features": 999, "out_features": 1000},
        },
        steps=[{"do": "backward", "of": "loss"}, {"do": "sgd_step", "lr": 0.1}, {"do": "zero_grad"}],
    )
    report = dry_run(parse_spec(doc), SpecLimits())
    assert report.parameters == 1_999_999 <= SpecLimits().max_parameters
    assert report.total_elements < SpecLimits().max_total_elements


def test_every_leaf_module_runs_on_meta_and_on_cpu():
    modules = {
        "lin": {"type": "Linear", "in_features": 6, "out_features": 6},
        "c1": {"type": "Conv1d", "in_channels": 2, "out_channels": 2, "kernel_size": 3, "padding": 1},
        "c2": {
            "type": "Conv2d",
            "in_channels": 1,
            "out_channels": 1,
            "kernel_size": [1, 3],
            "padding": [0, 1],
        },
        "emb": {"type": "Embedding", "num_embeddings": 4, "embedding_dim": 6},
        "ln": {"type": "LayerNorm", "normalized_shape": 6},
        "bn": {"type": "BatchNorm1d", "num_features": 2},
        "drop": {"type": "Dropout", "p": 0.1},
        "act1": {"type": "ReLU"},
        "act2": {"type": "GELU"},
        "act3": {"type": "Tanh"},
        "act4": {"type": "Sigmoid"},
        "sm": {"type": "Softmax", "dim": -1},
        "lsm": {"type": "LogSoftmax", "dim": -1},
        "ident": {"type": "Identity"},
        "flat": {"type": "Flatten"},
        "attn": {"type": "MultiheadAttention", "embed_dim": 6, "num_heads": 2, "batch_first": True},
    }
    forward = [
        "h = lin(x)",
        "c = c1(h.view(2, 2, 3))",
        "d = c2(c.view(2, 1, 2, 3))",
        "e = emb(idx)",
        "n = ln(h + e)",
        "b = bn(c)",
        "r = drop(act1(n)) + act2(n) + act3(n) + act4(n) + sm(n) + lsm(n) + ident(n)",
        "f = flat(d)",
        "o, w = attn(r.view(1, 2, 6), r.view(1, 2, 6), r.view(1, 2, 6))",
        "loss = o.sum() + f.sum() + b.sum() + w.sum()",
    ]
    doc = _doc(
        forward,
        {"x": {"shape": [2, 6], "requires_grad": True}, "idx": {"value": [1, 3], "dtype": "int64"}},
        modules,
    )
    spec = parse_spec(doc)
    assert {m["type"] for m in modules.values()} == set(LEAF_TYPES)
    report = dry_run(spec, SpecLimits())
    assert report.step_errors == [] and report.nodes > 30
    built = build(spec, torch.Generator().manual_seed(0))
    env = run_program(built.program, dict(built.inputs), built.modules)
    env["loss"].backward()
    assert all(p.grad is not None for p in built.root.parameters())
