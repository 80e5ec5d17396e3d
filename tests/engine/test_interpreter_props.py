"""Differential property test: random programs give exactly what the same torch calls give."""

import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradtrace.engine.build import build
from gradtrace.engine.interpreter import run_program
from gradtrace.spec import parse_spec

# Each entry: how the program writes it, and the torch call it must equal (shape-preserving ops).
UNARY = [
    ("relu({})", F.relu),
    ("tanh({})", torch.tanh),
    ("sigmoid({})", torch.sigmoid),
    ("{}.exp()", torch.exp),
    ("-{}", torch.neg),
    ("{}.abs()", torch.abs),
    ("softmax({}, dim=-1)", lambda t: F.softmax(t, dim=-1)),
    ("({}) ** 2", lambda t: t**2),
    ("{}.clamp(min=-0.5)", lambda t: t.clamp(min=-0.5)),
    ("gelu({})", F.gelu),
    ("{}.t().t()", lambda t: t.t().t()),
    ("{}.view(6).reshape(2, 3)", lambda t: t.view(6).reshape(2, 3)),
]
ARITHMETIC = [("({}) + ({})", torch.add), ("({}) - ({})", torch.sub), ("({}) * ({})", torch.mul)]
TENSOR_ONLY = [("maximum({}, {})", torch.maximum), ("({}) @ ({}).t() @ ({})", None)]


def expressions(depth):
    """Tensor-valued (source, fn(env)) pairs; constants appear only as a binary op's right side."""
    tensor_leaf = st.sampled_from([("a", lambda env: env["a"]), ("b", lambda env: env["b"])])
    if depth == 0:
        return tensor_leaf
    sub = expressions(depth - 1)
    right = sub | st.sampled_from([("0.5", lambda env: 0.5), ("2", lambda env: 2)])

    def unary(args):
        (src, fn), (text, f) = args
        return text.format(f"({src})"), lambda env: f(fn(env))

    def binary(args):
        (s1, f1), (s2, f2), (text, op) = args
        if op is None:  # matrix product that keeps (2, 3): x @ y.t() @ x
            return text.format(s1, s2, s1), lambda env: f1(env) @ f2(env).t() @ f1(env)
        return text.format(s1, s2), lambda env: op(f1(env), f2(env))

    return st.one_of(
        tensor_leaf,
        st.tuples(sub, st.sampled_from(UNARY)).map(unary),
        st.tuples(sub, right, st.sampled_from(ARITHMETIC)).map(binary),
        st.tuples(sub, sub, st.sampled_from(TENSOR_ONLY)).map(binary),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(expressions(3), min_size=1, max_size=4))
def test_random_programs_match_torch(exprs):
    lines = [f"r{i} = {src}" for i, (src, _) in enumerate(exprs)]
    doc = {
        "spec_version": 1,
        "title": "p",
        "seed": 3,
        "inputs": {"a": {"shape": [2, 3], "requires_grad": True}, "b": {"shape": [2, 3]}},
        "forward": lines,
    }
    spec = parse_spec(doc)
    built = build(spec, torch.Generator().manual_seed(3))
    env = run_program(spec.program, dict(built.inputs), built.modules)
    for i, (src, fn) in enumerate(exprs):
        assert torch.equal(env[f"r{i}"], fn(dict(built.inputs))), src
