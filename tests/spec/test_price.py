"""The price of a spec before it runs (spec/price.py): bombs refused naming the line or step,
every gallery example far under the limits, number arithmetic bounded, numbers a dtype cannot
hold refused naming the field, and library error texts without internals."""

from __future__ import annotations

import time

import pytest
from cost_bombs import BOMBS
from design_specs import seed_002

from gradtrace.examples import example_ids, get_example
from gradtrace.problem import public_text
from gradtrace.spec import SpecError, SpecLimits, check_declared, check_price, parse_spec


def _refusal(doc: dict) -> SpecError:
    with pytest.raises(SpecError) as info:
        spec = parse_spec(doc)
        check_declared(spec, SpecLimits())
        check_price(spec, SpecLimits())
    return info.value


@pytest.mark.parametrize("name", list(BOMBS))
def test_bombs_are_refused_naming_the_line_or_step(name: str) -> None:
    doc, code, path, line = BOMBS[name]
    started = time.perf_counter()
    err = _refusal(doc)
    elapsed = time.perf_counter() - started
    assert (err.code, err.status, err.path, err.line) == (code, 413, path, line), err
    assert elapsed < 10  # the bound under test is the count, not the clock (parsing included)


def test_the_integer_power_names_its_column_and_size() -> None:
    err = _refusal(BOMBS["integer_power"][0])
    assert err.column == 9
    assert err.message == (
        "forward line 1, column 9: this integer arithmetic would produce a number of up to "
        "369,693,100 digits; numbers in a program have at most 4,300"
    )


def test_the_backward_bomb_names_the_step_and_the_limit() -> None:
    err = _refusal(BOMBS["backward_steps"][0])
    assert err.message.startswith("step 1 (backward): the run would make about ")
    assert err.message.endswith("tensor operations; the limit max_ops is 10,000, more than a trace may take")


def test_a_composite_that_calls_identity_thousands_of_times_is_counted_per_call() -> None:
    err = _refusal(BOMBS["identity_calls"][0])
    assert "11,941 calls" in err.message and "max_calls is 10,000" in err.message


@pytest.mark.parametrize("example_id", example_ids())
def test_every_example_is_far_under_the_price(example_id: str) -> None:
    price = check_price(parse_spec(get_example(example_id)), SpecLimits())
    assert 0 < price.ops <= SpecLimits().max_ops / 20
    assert 0 < price.calls <= SpecLimits().max_calls / 20


def test_small_number_arithmetic_is_allowed_and_runs_as_written() -> None:
    doc = seed_002()
    doc["forward"][2] = "loss = (y - 2 ** 10 / 1024 + 9 ** 9 * 0 + -(3 ** 3) * 0) ** 2"
    spec = parse_spec(doc)
    assert check_price(spec, SpecLimits()).ops < 100


def test_float_overflow_in_constants_is_left_to_the_run() -> None:
    doc = seed_002()
    doc["forward"][2] = "loss = (y - 10.0 ** 400) ** 2"  # OverflowError at run time, on its line
    parse_spec(doc)


def test_the_price_counts_each_forward_run_and_each_walk() -> None:
    doc = seed_002()
    one = check_price(parse_spec(doc), SpecLimits())
    doc["steps"] = [
        {"do": "backward", "of": "loss", "retain_graph": True},
        {"do": "backward", "of": "loss"},
    ]
    two = check_price(parse_spec(doc), SpecLimits())
    assert two.ops > one.ops and two.calls > one.calls
    with pytest.raises(SpecError) as info:
        check_price(parse_spec(doc), SpecLimits(max_ops=one.ops + 1))
    assert info.value.path == "/steps/1"


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("by", 1e39, "/hooks/0/action/by"),
        ("min", -1e39, "/hooks/0/action/min"),
        ("max", 4e38, "/hooks/0/action/max"),
    ],
)
def test_hook_numbers_beyond_float32_name_their_field(field: str, value: float, path: str) -> None:
    doc = seed_002()
    op = "scale" if field == "by" else "clamp"
    doc["hooks"][0]["action"] = {"op": op, "target": "grad_input", field: value}
    err = _refusal(doc)
    assert (err.code, err.status, err.path) == ("out_of_range", 422, path)
    assert "beyond float32" in err.message and "inf" in err.message


def test_values_and_init_beyond_float32_name_the_element() -> None:
    doc = seed_002()
    doc["inputs"]["x"]["value"] = [3.5e38]
    assert _refusal(doc).path == "/inputs/x/value/0"
    doc = seed_002()
    doc["modules"]["f0"]["init"]["weight"] = [[-1e39]]
    assert _refusal(doc).path == "/modules/f0/init/weight/0/0"
    doc = seed_002()
    doc["dtype"] = "float64"
    doc["inputs"]["x"]["value"] = [3.5e38]  # float64 holds it
    parse_spec(doc)


def test_whole_run_limit_refusals_carry_a_path() -> None:
    doc = seed_002()
    for name in "abcdef":  # each under max_tensor_elements, together over max_total_elements
        doc["inputs"][name] = {"shape": [1000, 900]}
    doc["forward"][2] = "loss = (y - 1) ** 2 + (a + b + c + d + e + f).sum()"
    err = _refusal(doc)
    assert (err.status, err.path) == (413, "/inputs")
    assert "max_total_elements" in err.message


LEAK = (
    "view(): argument 'size' failed to unpack the object at pos 1 with error \"Overflow when unpacking long long\n"
    "Exception raised from THPUtils_unpackLong at /__w/pytorch/pytorch/torch/csrc/utils/python_numbers.h:79 "
    "(most recent call first):\nframe #0: c10::Error::Error(c10::SourceLocation) + 0x9d "
    "(0x7fd3b5151b8d in /opt/venv/lib/python3.11/site-packages/torch/lib/libc10.so)\n"
)


def test_public_text_keeps_the_first_line_without_internals() -> None:
    assert public_text(LEAK) == (
        "view(): argument 'size' failed to unpack the object at pos 1 with error \"Overflow when unpacking long long"
    )
    assert public_text("at 0x7fd3b5151b8d in /usr/lib/libc.so.6 (1/2)") == "at <address> in <path> (1/2)"
    assert public_text("mat1 and mat2 shapes cannot be multiplied (1x2 and 3x4)") == (
        "mat1 and mat2 shapes cannot be multiplied (1x2 and 3x4)"
    )
    assert public_text("\n", "RuntimeError") == "RuntimeError"
