"""The gallery: every example parses, passes declared limits, validates against the JSON Schema."""

import json
import subprocess
import sys

import jsonschema
import pytest

from gradtrace.examples import GALLERY_ORDER, example_ids, get_example, list_examples
from gradtrace.spec import SpecLimits, check_declared, parse_spec, spec_json_schema

IDS = example_ids()
VALIDATOR = jsonschema.Draft202012Validator(spec_json_schema())
REQUIRED = {
    "two-layer-linear",
    "mlp-hooks-reconstruction",
    "retain-graph-accumulation",
    "freed-graph-error",
    "tensor-vs-post-accumulate-hooks",
    "two-losses",
    "higher-order-grad",
    "full-backward-hook",
    "full-backward-hook-x2",
    "deprecated-backward-hook",
    "forward-hook-modifies-output",
    "forward-hook-capture",
    "tensor-hook-scales-grad",
    "inplace-after-hook",
}


def test_gallery_has_every_seed_example_in_order():
    assert REQUIRED <= set(IDS)
    assert IDS[: len(GALLERY_ORDER)] == list(GALLERY_ORDER)


def test_list_examples_shape():
    items = list_examples()
    assert [i["id"] for i in items] == IDS
    for item in items:
        assert set(item) == {"id", "title", "description", "compare_with"}
        assert item["title"] and len(item["description"]) > 80  # one teaching paragraph
        assert item["compare_with"] is None or item["compare_with"] in IDS


def test_get_example_unknown_raises_keyerror_and_returns_copies():
    with pytest.raises(KeyError):
        get_example("no-such-example")
    first = get_example("two-layer-linear")
    first["title"] = "changed"
    assert get_example("two-layer-linear")["title"] != "changed"


@pytest.mark.parametrize("example_id", IDS)
def test_example_parses_and_passes_declared_limits(example_id):
    spec = parse_spec(get_example(example_id))
    check_declared(spec, SpecLimits())
    assert not [w for w in spec.warnings if w.code != "unused" or "weights" not in w.message]


@pytest.mark.parametrize("example_id", IDS)
def test_example_validates_against_the_json_schema(example_id):
    VALIDATOR.validate(get_example(example_id))


@pytest.mark.parametrize("example_id", IDS)
def test_normalized_is_a_fixed_point(example_id):
    once = parse_spec(get_example(example_id)).normalized()
    twice = parse_spec(json.loads(json.dumps(once))).normalized()
    assert once == twice
    assert json.dumps(once) == json.dumps(twice)  # key order too: it is hashed
    VALIDATOR.validate(once)


def test_normalized_fills_defaults():
    norm = parse_spec(get_example("retain-graph-accumulation")).normalized()
    assert (
        norm["seed"] == 0 and norm["dtype"] == "float32" and norm["hooks"] == [] and norm["retain_grad"] == []
    )
    assert norm["inputs"]["x"] == {"value": 1.0, "requires_grad": True, "dtype": "float32"}
    assert norm["steps"][0] == {"do": "backward", "of": "y", "retain_graph": True, "create_graph": False}
    doc = get_example("retain-graph-accumulation")
    del doc["steps"]
    assert parse_spec(doc).normalized()["steps"] == [
        {"do": "backward", "of": "y", "retain_graph": False, "create_graph": False}
    ]


def test_normalized_puts_type_first_and_fills_hook_targets():
    norm = parse_spec(get_example("full-backward-hook-x2")).normalized()
    assert list(norm["modules"]["f0"])[0] == "type"
    assert list(norm["modules"]["f1"]["modules"]["f"])[0] == "type"
    doc = get_example("full-backward-hook-x2")
    del doc["hooks"][0]["action"]["target"]
    assert parse_spec(doc).normalized()["hooks"][0]["action"] == {
        "op": "scale",
        "target": "grad_input",
        "by": 2.0,
    }


def test_ints_and_floats_normalise_alike():
    a = get_example("two-layer-linear")
    b = get_example("two-layer-linear")
    b["inputs"]["x"]["value"] = [[1, 2]]
    assert parse_spec(a).normalized() == parse_spec(b).normalized()


def test_schema_rejects_what_the_parser_rejects():
    doc = get_example("two-layer-linear")
    doc["modules"]["W0"]["type"] = "Conv9d"
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate(doc)


def test_spec_package_does_not_import_torch():
    code = (
        "import sys, gradtrace.spec, gradtrace.examples;"
        "from gradtrace.spec import parse_spec; from gradtrace.examples import get_example;"
        "parse_spec(get_example('tiny-attention')); assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
