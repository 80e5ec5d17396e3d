"""Property tests: whatever the document, parse_spec returns a spec or raises SpecError, fast."""

import json

from design_specs import seed_002
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradtrace.spec import SpecError, parse_spec

FAST = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
# Program-ish text: the language's own tokens, recombined at random.
TOKENS = [
    "x",
    "x1",
    "y",
    "f0",
    "f1",
    "(",
    ")",
    "[",
    "]",
    ",",
    ".",
    "sum",
    "relu",
    "=",
    "+",
    "-",
    "*",
    "**",
    "@",
    "1",
    "-1",
    "0.5",
    "dim",
    ":",
    "return",
    "lambda",
    "'s'",
    " ",
    "a",
    "b",
    "view",
    "import",
    ";",
]
program_lines = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=15).map("".join)


def _parse(doc):
    try:
        parse_spec(doc)
    except SpecError as err:
        assert err.code and isinstance(err.message, str) and len(err.message) < 2500
        assert err.path == "" or err.path.startswith("/")
        json.dumps(err.to_dict())  # always encodable (no NaN echoed back)


@FAST
@given(
    st.sampled_from(["/forward/1", "/forward/2", "/modules/f1/forward/0", "/modules/f1/forward/1"]),
    program_lines,
)
def test_random_program_lines(where, line):
    doc = seed_002()
    parts = where.strip("/").split("/")
    target = doc
    for part in parts[:-1]:
        target = target[part]
    target[int(parts[-1])] = line
    _parse(doc)


FIELDS = [
    "/seed",
    "/dtype",
    "/title",
    "/modules/f0",
    "/modules/f0/in_features",
    "/modules/f0/init",
    "/modules/f1/args",
    "/inputs/x",
    "/inputs/x/value",
    "/hooks/0",
    "/hooks/0/action",
    "/steps/0",
    "/steps",
    "/retain_grad",
    "/forward",
    "/modules/f1/modules",
]


@FAST
@given(st.sampled_from(FIELDS), json_values)
def test_random_values_anywhere(where, value):
    doc = seed_002()
    parts = where.strip("/").split("/")
    target = doc
    for part in parts[:-1]:
        target = target[int(part)] if isinstance(target, list) else target[part]
    last = parts[-1]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    _parse(doc)


@FAST
@given(json_values)
def test_random_documents(doc):
    _parse(doc)
