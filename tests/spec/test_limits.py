"""check_declared: limits from declarations alone, sizes multiplied in Python ints."""

import pytest
from design_specs import seed_002

from gradtrace.spec import SpecError, SpecLimits, check_declared, parse_spec


def _check(doc, limits=None):
    with pytest.raises(SpecError) as info:
        check_declared(parse_spec(doc), limits or SpecLimits())
    assert info.value.code == "limit_exceeded"
    return info.value


def test_seed002_is_within_the_hosted_limits():
    check_declared(parse_spec(seed_002()), SpecLimits())


def test_overflowing_shape_is_caught_in_python_ints():
    doc = seed_002()
    doc["inputs"]["big"] = {"shape": [2**20, 2**20, 2**20]}
    doc["forward"].append("z = big.sum()")
    err = _check(doc, SpecLimits(max_dim=2**31))
    assert err.path == "/inputs/big"
    assert err.message == (
        "the element count of input big is 1,152,921,504,606,846,976; "
        "the limit max_tensor_elements is 1,000,000"
    )


def test_parameter_count():
    doc = seed_002()
    doc["modules"]["big"] = {"type": "Linear", "in_features": 1000, "out_features": 999}
    doc["inputs"]["v"] = {"shape": [1000]}
    doc["forward"].append("z = big(v)")
    err = _check(doc, SpecLimits(max_parameters=500_000))
    assert err.message == "the parameter count is 1,000,003; the limit max_parameters is 500,000"


def test_single_parameter_too_large():
    doc = seed_002()
    doc["modules"]["emb"] = {"type": "Embedding", "num_embeddings": 100_000, "embedding_dim": 100}
    err = _check(doc)
    assert err.path == "/modules/emb"
    assert (
        err.message
        == "the element count of parameter emb.weight is 10,000,000; the limit max_tensor_elements is 1,000,000"
    )


def test_program_lines_steps_modules_depth():
    doc = seed_002()
    doc["forward"] += [f"z{i} = loss * {i}" for i in range(10)]
    assert _check(doc, SpecLimits(max_program_lines=5)).message == (
        "the line count of the forward program is 13; the limit max_program_lines is 5"
    )
    doc = seed_002()
    doc["steps"] = [{"do": "zero_grad"}] * 3
    assert _check(doc, SpecLimits(max_steps=2)).path == "/steps"
    assert _check(seed_002(), SpecLimits(max_modules=2)).message == (
        "the number of modules is 3; the limit max_modules is 2"
    )
    err = _check(seed_002(), SpecLimits(max_depth=1))
    assert (err.path, err.message) == (
        "/modules/f1/modules/f",
        "the nesting depth of module f1.f is 2; the limit max_depth is 1",
    )


def test_module_program_lines_are_limited_too():
    doc = seed_002()
    doc["modules"]["f1"]["forward"] = ["s = f(x)"] + [f"s{i} = s * {i}" for i in range(5)] + ["return s ** 2"]
    err = _check(doc, SpecLimits(max_program_lines=3))
    assert err.path == "/modules/f1/forward"


def test_literal_count():
    doc = seed_002()
    doc["inputs"]["v"] = {"value": [0.0] * 2000}
    doc["forward"].append("z = v.sum()")
    assert _check(doc, SpecLimits(max_literal_elements=1000)).message == (
        "the count of numbers written in value/init literals is 2,005; the limit max_literal_elements is 1,000"
    )


def test_local_limits_are_generous_but_below_the_crash_point():
    local = SpecLimits.local()
    assert local.max_nodes == 40_000 < 50_000
    assert local.max_nodes > SpecLimits().max_nodes
    assert SpecLimits().with_(max_nodes=10).max_nodes == 10
