"""The program language compiles to the IR it says; analysis reports what it says."""

import pytest
from design_specs import seed_002

from gradtrace.spec import SpecError, parse_spec
from gradtrace.spec.program import (
    ELLIPSIS,
    BinOp,
    Call,
    CalleeInfo,
    Const,
    Index,
    IntTuple,
    MethodCall,
    Name,
    Neg,
    Slice,
    TensorList,
    parse_program,
)

MODULES = {"lin": CalleeInfo("Linear", 1), "attn": CalleeInfo("MultiheadAttention", 3, 2)}


def _expr(line):
    return parse_program([line], "/forward", MODULES).statements[0].value


def test_ir_of_each_construct():
    assert _expr("y = -x ** 2") == Neg(BinOp("**", Name("x"), Const(2)))
    assert _expr("y = x @ w - -1.5") == BinOp("-", BinOp("@", Name("x"), Name("w")), Const(-1.5))
    assert _expr("y = lin(x)") == Call("module", "lin", (Name("x"),))
    assert _expr("y = softmax(x, dim=-1)") == Call("function", "softmax", (Name("x"),), (("dim", Const(-1)),))
    assert _expr("y = x.view(2, -1)") == MethodCall(Name("x"), "view", (Const(2), Const(-1)))
    assert _expr("y = x.reshape((2, 3))") == MethodCall(Name("x"), "reshape", (IntTuple((2, 3)),))
    assert _expr("y = cat([a, b], dim=0)") == Call(
        "function", "cat", (TensorList((Name("a"), Name("b"))),), (("dim", Const(0)),)
    )
    assert _expr("y = x[0, 1:-1, ::2, None, ...]") == Index(
        Name("x"), (0, Slice(1, -1, None), Slice(None, None, 2), None, ELLIPSIS)
    )
    assert _expr("y = x.sum(dim=1, keepdim=True)") == MethodCall(
        Name("x"), "sum", (), (("dim", Const(1)), ("keepdim", Const(True)))
    )
    assert _expr("y = mse_loss(a, b, reduction='sum')") == Call(
        "function", "mse_loss", (Name("a"), Name("b")), (("reduction", Const("sum")),)
    )


def test_statement_metadata():
    program = parse_program(["out, w = attn(q, k, q)", "y = out.sum()"], "/forward", MODULES)
    first, second = program.statements
    assert first.targets == ("out", "w") and first.uses == ("q", "k") and first.use_columns == (15, 18)
    assert second.source == "y = out.sum()" and second.index == 1 and not second.is_return
    assert program.assigned == ("out", "w", "y")


def test_module_program_returns_count():
    program = parse_program(["return a, b"], "/modules/m/forward", {}, owner="m", args=("a", "b"))
    assert program.returns == 2 and program.statements[-1].is_return


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "y = x.add_(1, alpha=2, beta=3)",
            "line 1, column 24: .add_() takes no keyword argument 'beta' (accepted: alpha)",
        ),
        (
            "y = attn(x)",
            "line 1, column 5: module attn (MultiheadAttention) takes 3 positional argument(s), got 1",
        ),
        ("a, b, c = attn(x, x, x)", "line 1, column 1: attn returns 2 values, not 3"),
        ("y = x.view(*s)", "line 1, column 12: `*args` is not allowed"),
        ("y = f(**k)", "line 1, column 5: 'f' is not a module of this program or a whitelisted function"),
        (
            "y = x[1.5]",
            "line 1, column 7: subscripts must be int constants or slices of them, e.g. out[0] or h[:, -1]",
        ),
        ("y = x * 1e999", "line 1, column 9: non-finite number constant"),
        (
            "x[0] = 1",
            "line 1, column 1: the left of `=` must be a name or names `a, b` (no subscripts, attributes or starred)",
        ),
        ("a, a = attn(x, x, x)", "line 1, column 1: the same name twice on the left of `=`"),
        (
            "y = [x, x]",
            "line 1, column 5: a list or tuple here must hold int constants (a shape); lists of tensors only as the first argument of cat/stack",
        ),
        ("y = x if x else x", "line 1, column 5: a conditional expression is not allowed"),
        ("y = not x", "line 1, column 5: unary operator Not is not allowed"),
        ("y = x // 2", "line 1, column 5: operator FloorDiv is not allowed (use + - * / ** @)"),
        ("y = x.sum(dim=x)", "line 1, column 15: keyword argument dim= must be a constant"),
        ("", "line 1: one statement per line"),
    ],
)
def test_rejections(line, message):
    with pytest.raises(SpecError) as info:
        parse_program([line], "/forward", MODULES)
    assert info.value.message == f"forward {message}"
    assert info.value.path == "/forward/0"


def test_expression_size_is_bounded():
    with pytest.raises(SpecError) as info:
        parse_program(["y = " + " + ".join(["x"] * 150)], "/forward", MODULES)
    assert "expression too large" in info.value.message
    with pytest.raises(SpecError) as info:
        parse_program(["y = " + "(" * 300 + "x" + ")" * 300], "/forward", MODULES)
    assert info.value.code == "program_syntax"


def test_analysis_reports_longest_path_fan_in_and_unused():
    doc = seed_002()
    doc["forward"] = [
        "x1 = f0(x)",
        "a = x1 * 2",
        "b = x1 * 3",
        "unused = x1 * 4",
        "y = f1(a + b)",
        "loss = (y - 1) ** 2",
    ]
    doc["steps"] = [{"do": "backward", "of": "loss"}]
    spec = parse_spec(doc)
    assert spec.analysis.longest_path == 4  # x -> x1 -> a -> y -> loss
    assert spec.analysis.max_fan_in == 2 and spec.analysis.max_fan_out == 3
    assert [(w.code, w.message, w.path) for w in spec.warnings] == [
        ("unused", "tensor 'unused' is never used", "/forward")
    ]


def test_names_read_by_steps_hooks_and_retain_grad_are_not_unused():
    doc = seed_002()
    doc["forward"] = ["x1 = f0(x)", "y = f1(x1)", "loss = (y - 1) ** 2", "other = y * 2"]
    doc["retain_grad"] = ["x1"]
    doc["hooks"] = [{"type": "tensor", "tensor": "other"}]
    assert parse_spec(doc).warnings == []


def test_retain_grad_on_an_input_is_a_warning():
    doc = seed_002()
    doc["retain_grad"] = ["x"]
    assert [w.code for w in parse_spec(doc).warnings] == ["retain_grad_on_leaf"]


def test_default_steps_backward_the_last_assigned_tensor():
    doc = seed_002()
    del doc["steps"]
    steps = parse_spec(doc).effective_steps()
    assert [(s.do, s.of) for s in steps] == [("backward", "loss")]
