"""PyTorch source <-> spec: tutorial-style models trace to the gradients plain PyTorch computes,
every gallery example round-trips spec -> PyTorch -> spec, and the PyTorch written for each
runs as is with the trace's gradients. Oracle: the same source run by plain torch in a subprocess."""

from __future__ import annotations

import ast
import itertools
import json
import re
from pathlib import Path

import pytest
from cost_bombs import big_literals, translate_bomb
from tutorial_programs import QUICKSTART

import gradtrace
from gradtrace.spec import SpecError, parse_spec
from gradtrace.spec.translate import python_to_spec, spec_to_python
from spec.translate_harness import assert_same_grads, run_sources

MODELS = sorted((Path(__file__).parent / "translate_models").glob("*.py"))
EXAMPLES = sorted((Path(gradtrace.__file__).parent / "examples").glob("*.json"))


@pytest.fixture(scope="module")
def traced_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, dict]]:
    """Each model: (grads traced from its translated spec, the same source's in plain PyTorch)."""
    traced, jobs = {}, []
    for path in MODELS:
        source = path.read_text(encoding="utf-8")
        traced[path.stem] = gradtrace.trace_spec(python_to_spec(source)).grads
        jobs.append((source, list(traced[path.stem])))
    plain = run_sources(jobs, tmp_path_factory.mktemp("models"))
    return {stem: (traced[stem], result) for stem, result in zip(traced, plain, strict=True)}


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_model_translates_and_matches_plain_pytorch(path: Path, traced_models: dict) -> None:
    grads, plain = traced_models[path.stem]
    assert grads and any(g is not None for g in grads.values())
    assert "grads" in plain, plain
    assert_same_grads(grads, plain["grads"])


def _comparable(spec: dict) -> dict:
    """Normalised, with program lines in ast.unparse's spelling and hooks on modules and leaves
    before hooks on intermediates (the PyTorch registers those after the line assigning them;
    hooks on different tensors do not interact, so the order between them changes nothing)."""
    out = json.loads(json.dumps(spec))

    def lines(program: list[str]) -> list[str]:
        return [ast.unparse(ast.parse(line)) for line in program]

    out["forward"] = lines(out["forward"])
    for step in out["steps"]:
        if step.get("program"):
            step["program"] = lines(step["program"])
    stack = list(out["modules"].values())
    while stack:
        mod = stack.pop()
        if mod["type"] == "Module":
            mod["forward"] = lines(mod["forward"])
            stack.extend(mod["modules"].values())
        stack.extend(mod.get("layers", []))
    leaves = set(out["inputs"]) | set(parse_spec(spec).parameter_shapes())
    out["hooks"] = sorted(
        out.get("hooks", []), key=lambda h: 0 if "module" in h or h.get("tensor") in leaves else 1
    )
    return out


@pytest.fixture(scope="module")
def gallery_programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, object, dict]]:
    """Each example: (its PyTorch program, its trace, what plain PyTorch did running the program)."""
    made = {}
    for path in EXAMPLES:
        doc = json.loads(path.read_text(encoding="utf-8"))
        made[path.stem] = (spec_to_python(doc), gradtrace.trace_spec(doc))
    jobs = [(source, list(trace.grads)) for source, trace in made.values()]
    plain = run_sources(jobs, tmp_path_factory.mktemp("gallery"))
    return {stem: (*made[stem], result) for stem, result in zip(made, plain, strict=True)}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_gallery_example_as_pytorch(path: Path, gallery_programs: dict) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    source, trace, plain = gallery_programs[path.stem]
    assert _comparable(python_to_spec(source)) == _comparable(parse_spec(doc).normalized())
    errors = [e for e in trace.events if e.kind == "error"]
    if errors:  # the example shows an error PyTorch raises: the program raises it too
        assert plain == {"error": errors[0].payload["exception"]}
        return
    assert "grads" in plain, plain
    assert_same_grads(trace.grads, plain["grads"])


def test_readme_first_example_is_its_pytorch() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    doc = json.loads(readme.split("```json\n", 1)[1].split("```", 1)[0])
    after = readme.split("```json\n", 1)[1]
    python = after.split("```python\n", 1)[1].split("```", 1)[0]
    assert _comparable(python_to_spec(python)) == _comparable(parse_spec(doc).normalized())


def _error(source: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        python_to_spec(source)
    return info.value


HEAD = "import torch\nfrom torch import nn\nimport torch.nn.functional as F\n"


@pytest.mark.parametrize(
    ("body", "line", "column", "words"),
    [
        ("import os\n", 4, 1, "import of 'os' is not supported"),
        ("x = torch.randn(2)\ny = x.__class__\n", 5, 5, "dunder"),
        (
            "x = torch.randn(2, requires_grad=True)\ny = x.shape[0]\n",
            5,
            5,
            "sizes must be written as numbers",
        ),
        ("x = torch.randn(2)\ny = eval('x')\n", 5, 5, "calling 'eval' is not supported"),
        ("x = torch.randn(2)\ny = [v for v in x]\n", 5, 5, "a comprehension"),
        ("x = torch.randn(2)\nf = lambda v: v\n", 5, 5, "a lambda"),
        ("x = torch.randn(2)\ny = getattr(x, 'sum')()\n", 5, 5, "calling 'getattr'"),
        (
            "l = nn.Linear(2, 2)\ntorch.manual_seed(0)\nx = torch.randn(1, 2)\n",
            5,
            1,
            "torch.manual_seed is supported once",
        ),
        (
            "torch.manual_seed(0)\nl = nn.Linear(2, 2)\nx = torch.randn(1, 2)\n",
            6,
            1,
            "drawn after parameters",
        ),
        ("x = torch.randn(2)\ny = F.softplus(x)\n", 5, 5, "F.softplus is not supported"),
        ("x = torch.randn(2)\ny = x.cumsum(0)\n", 5, 7, "tensor method .cumsum() is not supported"),
        (
            "l = nn.Linear(2, 2)\nl.register_forward_hook(lambda m, i, o: o / 2)\n",
            5,
            41,
            "not one of the spec's actions",
        ),
        ("x = torch.randn(2)\ny = x.sum()\nprint(y)\n", None, None, "nothing runs backward"),
        ("x = torch.randn(2)\ny = zz + 1\ny.backward()\n", 5, 5, "'zz' is not defined"),
        ("@decorator\ndef f(m):\n    pass\n", 4, 2, "decorators"),
        ("x = torch.randn(2)\nexec('import os')\n", 5, 1, "cannot be called as a statement"),
        ("x = torch.randn(2, 3)\nl = nn.Linear(0, 2)\ny = l(x).sum()\ny.backward()\n", 5, 5, "in_features"),
    ],
)
def test_unsupported_python_names_line_and_column(
    body: str, line: int | None, column: int | None, words: str | None
) -> None:
    err = _error(HEAD + body)
    assert err.status in (413, 422)
    assert err.path == "/python"
    assert (err.line, err.column) == (line, column)
    if words:
        assert words in err.message


def test_spec_validator_errors_come_back_at_the_python_line() -> None:
    err = _error(HEAD + "x = torch.randn(2, 3)\ny = x.sum(\n  dim=5, keepdim=1, foo=2)\ny.backward()\n")
    assert err.line == 5 and "foo" in err.message


@pytest.mark.parametrize(
    "source",
    [
        "x = " + "(" * 300 + "1" + ")" * 300,
        "x = " + "-" * 5000 + "1",
        "x = torch.tensor([" + "1," * 60000 + "])",
        "y = 1\n" * 30000,
        "x = [" * 100 + "]" * 100,
    ],
)
def test_limits_refuse_oversized_and_deep_sources(source: str) -> None:
    err = _error("import torch\n" + source)
    assert err.status in (413, 422)


def test_nothing_of_the_source_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payloads = [
        f"open({str(marker)!r}, 'w').write('x')",
        f"x = open({str(marker)!r}, 'w')",
        f"import os\nos.system('touch {marker}')",
        f"class A(nn.Module):\n    def __init__(self):\n        open({str(marker)!r}, 'w')\n",
        f"def hook(g):\n    open({str(marker)!r}, 'w')\n    return g * 2\nw = torch.randn(2, requires_grad=True)\nw.register_hook(hook)\ny = w.sum()\ny.backward()",
        f"x = torch.randn(2)\ny = x.sum(__import__('os').system('touch {marker}'))",
    ]
    for payload in payloads:
        with pytest.raises(SpecError):
            python_to_spec(HEAD + payload)
    assert not marker.exists()


@pytest.mark.parametrize(("fan", "depth"), [(16, 6), (64, 2), (4, 8)])
def test_nested_instances_are_refused_from_their_count(fan: int, depth: int) -> None:
    # Issue 38: F instances per class, D deep would build F**D modules; the count refuses it first
    err = _error(translate_bomb(fan, depth))
    assert err.status == 413 and err.code == "limit_exceeded"
    assert "modules" in err.message and err.line is not None
    # counted, not built (the bomb took minutes): refused as soon as the count passed the
    # limit, far from the F**D modules the program would build (no wall-clock bound: the
    # count itself says where it stopped)
    found = re.search(r"builds ([\d,]+) modules so far .* the limit is ([\d,]+)", err.message)
    assert found is not None, err.message
    built, limit = (int(n.replace(",", "")) for n in found.groups())
    assert limit < built < 2 * limit <= fan**depth


def test_nested_instances_within_the_limit_translate() -> None:
    spec = python_to_spec(translate_bomb(4, 3))  # 4**3 Linear layers, each in its place
    model = spec["modules"]["model"]["modules"]
    for a, b, c in itertools.product([f"m{i}" for i in range(4)], repeat=3):
        assert model[a]["modules"][b]["modules"][c]["modules"]["l"]["type"] == "Linear"


@pytest.mark.parametrize(("source", "line", "column"), big_literals())
def test_huge_integer_literals_in_any_base_are_refused_at_their_place(
    source: str, line: int, column: int
) -> None:
    err = _error(source)
    assert err.status == 413 and err.code == "limit_exceeded"
    assert (err.line, err.column) == (line, column)
    assert "16,000 bits" in err.message or "bits" in err.message


def test_every_mistake_is_listed_at_its_line_in_one_answer() -> None:
    err = _error(
        HEAD
        + "x = torch.randn(2, 3, requires_grad=True)\n"
        + "y = x.cumsum(0)\n"  # line 5: a method the spec lacks
        + "z = F.softplus(y)\n"  # line 6: a function the spec lacks
        + "import os\n"  # line 7: an import
        + "loss = z.sum()\n"
        + "loss.backward()\n"
    )
    assert [(e.line, e.column) for e in err.errors] == [(5, 7), (6, 5), (7, 1)]
    assert (err.line, err.column) == (5, 7)  # the first is the error itself
    assert "cumsum" in err.errors[0].message and "softplus" in err.errors[1].message
    assert "import of 'os'" in err.errors[2].message
    assert all(e.path == "/python" and e.status == 422 for e in err.errors)


def test_a_refused_line_is_reported_once_not_again_where_its_names_are_used() -> None:
    """PyTorch's Quickstart as written: each of its six refused lines once, none of the lines
    that merely use what a refused line defined (model, loss_fn, X, y, optimizer)."""
    err = _error(QUICKSTART)
    assert [e.line for e in err.errors] == [4, 26, 29, 32, 33, 43]
    assert "a conditional expression is not supported here" in err.errors[0].message
    assert "device name" in err.errors[0].message  # a set-up value, not "in a forward"
    assert ".to()" in err.errors[1].message and "CrossEntropyLoss" in err.errors[2].message


def test_a_class_lists_each_refused_line_and_its_instances_add_none() -> None:
    source = HEAD + (
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.a = nn.Linear(2, 2)\n"
        "        self.pool = nn.MaxPool2d(2)\n"  # line 8
        "    def forward(self, x):\n"
        "        h = self.pool(self.a(x))\n"
        "        return h.cumsum(0)\n"  # line 11
        "net = Net()\n"
        "x = torch.randn(1, 2)\n"
        "loss = net(x).sum()\n"
        "loss.backward()\n"
    )
    err = _error(source)
    assert [(e.line, e.column) for e in err.errors] == [(8, 21), (11, 18)]


def test_control_characters_in_the_title_are_escaped_in_the_python() -> None:
    # Issue 38: a NUL in a spec's title made the PyTorch source unrunnable
    title = "nul\x00 escape\x1b[2J bell\x07 tab\t"
    doc = {
        "spec_version": 1,
        "title": title,
        "description": "line\x00two",
        "inputs": {"x": {"value": [1.0], "requires_grad": True}},
        "forward": ["loss = (x * x).sum()"],
    }
    source = spec_to_python(doc)
    assert "\x00" not in source and "\x1b" not in source and "\x07" not in source
    module = ast.parse(source)
    assert ast.get_docstring(module, clean=False) == f"{title}\n\nline\x00two"
