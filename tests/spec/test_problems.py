"""Every validation error at once, the optional title, names that would shadow nn.Module, and
Problem crossing a process boundary unchanged."""

import pickle

import pytest
from design_specs import seed_002

from gradtrace.problem import Problem
from gradtrace.spec import SpecError, parse_spec
from gradtrace.spec.reserved import NN_MODULE_ATTRIBUTES


def _errors(doc) -> list[tuple[str, str, int | None]]:
    with pytest.raises(SpecError) as info:
        parse_spec(doc)
    first = info.value
    assert (first.code, first.path) == (first.errors[0].code, first.errors[0].path)
    return [(e.code, e.path, e.line) for e in first.errors]


def test_semantic_errors_are_all_reported(spec002):
    spec002["hooks"] = [
        {"module": "nope", "type": "forward"},
        {"tensor": "missing", "type": "tensor"},
        {"module": "f1", "type": "full_backward"},
    ]
    spec002["retain_grad"] = ["ghost", "x1"]
    assert _errors(spec002) == [
        ("undefined_module", "/hooks/0/module", None),
        ("undefined_name", "/hooks/1/tensor", None),
        ("undefined_name", "/retain_grad/0", None),
    ]


def test_module_programs_each_report_their_error(spec002):
    spec002["modules"]["f1"]["forward"] = ["s = f(q)", "return s ** 2"]
    spec002["modules"]["g"] = {"type": "Module", "args": ["a"], "forward": ["return tanh(a, b)"]}
    spec002["modules"]["relu"] = {"type": "ReLU"}
    codes = _errors(spec002)
    assert ("name_conflict", "/modules/relu", None) in codes
    assert ("undefined_name", "/modules/f1/forward/0", 1) in codes
    assert [c for c, p, _ in codes if p == "/modules/g/forward/0"]
    assert len(codes) == 3


def test_structural_errors_carry_their_program_line(spec002):
    spec002["forward"][2] = 7
    spec002["seed"] = "zero"
    assert _errors(spec002) == [("invalid_spec", "/seed", None), ("invalid_spec", "/forward/2", 3)]


def test_title_is_optional(spec002):
    del spec002["title"]
    spec = parse_spec(spec002)
    assert spec.title == "Untitled spec"
    assert spec.normalized()["title"] == "Untitled spec"


@pytest.mark.parametrize("name", ["training", "forward", "cuda", "_modules", "_x", "parameters", "to"])
def test_module_named_like_an_nn_module_attribute_is_refused(spec002, name):
    spec002["modules"][name] = spec002["modules"].pop("f0")
    spec002["forward"][0] = f"x1 = {name}(x)"
    [(code, path, _)] = _errors(spec002)
    assert (code, path) == ("reserved_name", f"/modules/{name}")


def test_child_module_input_argument_and_tensor_names_are_checked(spec002):
    spec002["modules"]["f1"]["modules"]["training"] = spec002["modules"]["f1"]["modules"].pop("f")
    spec002["modules"]["f1"]["forward"][0] = "s = training(x)"
    assert _errors(spec002)[0][:2] == ("reserved_name", "/modules/f1/modules/training")

    doc = seed_002()
    doc["inputs"]["cuda"] = doc["inputs"].pop("x")
    doc["forward"][0] = "x1 = f0(cuda)"
    assert _errors(doc) == [("reserved_name", "/inputs/cuda", None)]

    doc = seed_002()
    doc["modules"]["f1"]["args"] = ["half"]
    doc["modules"]["f1"]["forward"][0] = "s = f(half)"
    assert _errors(doc)[0][:2] == ("reserved_name", "/modules/f1/args/0")

    doc = seed_002()
    doc["forward"][1] = "forward = f1(x1)"
    doc["forward"][2] = "loss = (forward - 1) ** 2"
    [(code, path, line)] = _errors(doc)
    assert (code, path, line) == ("reserved_name", "/forward/1", 2)


def test_reserved_list_has_the_attributes_the_issue_names():
    assert {"training", "forward", "cuda"} <= NN_MODULE_ATTRIBUTES


def test_problem_pickles_with_every_field_and_its_class(spec002):
    spec002["hooks"] = [{"module": "nope", "type": "forward"}, {"module": "nada", "type": "forward"}]
    with pytest.raises(SpecError) as info:
        parse_spec(spec002)
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is SpecError and isinstance(back, Problem)
    assert back.to_dict() == info.value.to_dict()
    assert back.status == 422 and [e.path for e in back.errors] == ["/hooks/0/module", "/hooks/1/module"]
    assert back.to_dict()["errors"][0] == {
        "code": "undefined_module",
        "message": back.message,
        "path": "/hooks/0/module",
    }


def test_problem_status_follows_its_code():
    assert Problem("limit_exceeded", "too big").status == 413
    assert Problem("forward_error", "shape").status == 422
    assert Problem("rate_limited", "slow down", status=429, headers={"Retry-After": "3"}).headers == {
        "Retry-After": "3"
    }


def test_cli_validate_prints_every_error(tmp_path):
    import json
    import subprocess
    import sys

    doc = seed_002()
    doc["hooks"] = [{"module": "nope", "type": "forward"}, {"module": "nada", "type": "forward"}]
    bad = tmp_path / "two-errors.json"
    bad.write_text(json.dumps(doc))
    r = subprocess.run(
        [sys.executable, "-m", "gradtrace", "validate", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2, r.stderr
    assert "/hooks/0/module: undefined_module" in lines[0] and "/hooks/1/module: undefined_module" in lines[1]


def test_integer_fields_take_whole_floats_but_not_strings_or_booleans(spec002):
    spec002["seed"] = 1031.0  # JSON Schema counts 1031.0 as an integer; so does the spec
    spec002["modules"]["f0"]["in_features"] = 1.0
    spec = parse_spec(spec002)
    assert spec.seed == 1031 and type(spec.seed) is int
    for bad in ("3", True, 2.5):
        doc = seed_002()
        doc["seed"] = bad
        assert _errors(doc)[0][:2] == ("invalid_spec", "/seed"), bad


def test_published_schema_closes_name_maps():
    from gradtrace.spec import spec_json_schema

    names = spec_json_schema()["properties"]["modules"]["propertyNames"]
    assert names["pattern"] == "^[A-Za-z_][A-Za-z0-9_]*$"
    assert spec_json_schema()["properties"]["modules"]["additionalProperties"] is False
    refused = names["not"]["anyOf"]
    assert (
        {"pattern": "^_"} in refused and "training" in refused[1]["enum"] and "lambda" in refused[1]["enum"]
    )


@pytest.mark.parametrize(
    "action",
    [
        {"op": "scale", "by": 2},
        {"op": "scale"},
        {"op": "scale", "by": 2, "min": 0},
        {"op": "zero"},
        {"op": "zero", "by": 1},
        {"op": "clamp", "max": 1},
        {"op": "clamp"},
        {"op": "clamp", "by": 1, "min": 0},
    ],
)
def test_published_schema_and_validator_agree_on_hook_actions(spec002, action):
    import jsonschema

    from gradtrace.spec import spec_json_schema

    spec002["hooks"][0]["action"] = {"target": "grad_input", **action}
    by_schema = jsonschema.Draft202012Validator(spec_json_schema()).is_valid(spec002)
    try:
        parse_spec(spec002)
        by_validator = True
    except SpecError:
        by_validator = False
    assert by_schema == by_validator


def test_a_mistake_of_each_stage_is_reported_in_one_answer():
    from design_specs import FOUR_MISTAKES, spec_with_four_mistakes

    with pytest.raises(SpecError) as info:
        parse_spec(spec_with_four_mistakes())
    found = info.value.errors
    assert [(e.code, e.path) for e in found] == [(code, path) for code, path, _ in FOUR_MISTAKES]
    for error, (_, _, text) in zip(found, FOUR_MISTAKES, strict=True):
        assert text in error.message
    assert [e.line for e in found] == [None, 2, 3, None]


def test_what_a_refused_part_would_define_is_not_blamed_on_later_checks(spec002):
    # f0's type is refused: calling it, hooking it and reading its parameter are not errors.
    spec002["modules"]["f0"]["type"] = "Linaer"
    spec002["hooks"].append({"type": "forward", "module": "f0"})
    spec002["steps"] = [{"do": "backward", "of": "loss", "inputs": ["f0.weight"]}]
    # A line that does not parse still assigns `y`; a refused grad step still assigns `g`.
    spec002["forward"][1] = "y = f1(x1))"
    spec002["steps"] += [
        {"do": "grad", "of": "loss", "inputs": ["x"], "as": ["g"], "bogus": 1},
        {"do": "forward", "program": ["h = g * 2"]},
    ]
    spec002["retain_grad"] = ["h"]
    assert _errors(spec002) == [
        ("invalid_spec", "/modules/f0", None),
        ("invalid_spec", "/steps/1/bogus", None),
        ("program_syntax", "/forward/1", 2),
    ]


def test_a_refused_input_is_still_a_tensor_and_a_broken_composite_still_a_module(spec002):
    spec002["inputs"]["x"]["value"] = "0.3"
    spec002["modules"]["f1"]["forward"] = ["s = f(x, x)", "return s ** 2"]
    spec002["hooks"].append({"type": "post_accumulate_grad", "tensor": "x"})
    assert _errors(spec002) == [
        ("invalid_spec", "/inputs/x/value", None),
        ("program_syntax", "/modules/f1/forward/0", 1),
    ]


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (
            {"/forward/0": "x1 = f0(x).summ()"},
            "tensor method .summ() is not in the whitelist; did you mean 'sum'?",
        ),
        (
            {"/forward/2": "loss = tanhh(y)"},
            "'tanhh' is not a module of this program or a whitelisted function; did you mean 'tanh'?",
        ),
        ({"/forward/1": "y = F1(x1)"}, "did you mean 'f1'?"),
        ({"/hooks/0/module": "f1.ff"}, "no module 'f1.ff'; did you mean 'f1.f'?"),
        ({"/modules/f0/type": "linear"}, "unknown 'type' 'linear'; did you mean 'Linear'?"),
    ],
)
def test_unknown_names_get_the_nearest_valid_one(spec002, change, fragment):
    for where, value in change.items():
        keys = where.strip("/").split("/")
        node = spec002
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(keys[-1]) if isinstance(node, list) else keys[-1]] = value
    with pytest.raises(SpecError) as info:
        parse_spec(spec002)
    assert any(fragment in e.message for e in info.value.errors), [e.message for e in info.value.errors]
