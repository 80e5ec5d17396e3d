"""Every error path of the spec: exact code, JSON Pointer, line/column and message."""

import pytest
from design_specs import seed_002

from gradtrace.spec import SpecError, parse_spec

DEL = object()
DEEP = {"type": "ReLU"}
for _ in range(17):
    DEEP = {"type": "Sequential", "layers": [DEEP]}


def _set(doc, path, value):
    parts = path.strip("/").split("/")
    cur = doc
    for part in parts[:-1]:
        cur = cur[int(part)] if isinstance(cur, list) else cur[part]
    last = parts[-1]
    if value is DEL:
        del cur[last]
    elif isinstance(cur, list):
        cur[int(last)] = value
    else:
        cur[last] = value


CASES = [
    (
        "tensor_named_like_function",
        {"/forward/2": "tanh = (y - 1) ** 2"},
        "name_conflict",
        "/forward/2",
        3,
        1,
        "forward line 3: 'tanh' is already the function tanh(); pick another name",
    ),
    (
        "input_named_like_module",
        {"/inputs/f0": {"value": 1.0}},
        "name_conflict",
        "/inputs/f0",
        None,
        None,
        "name 'f0' is used twice: the input f0 (/inputs/f0) and the module f0 (/modules/f0)",
    ),
    (
        "input_named_like_function",
        {"/inputs/relu": {"value": 1.0}},
        "name_conflict",
        "/inputs/relu",
        None,
        None,
        "name 'relu' is used twice: the input relu (/inputs/relu) and the function relu()",
    ),
    (
        "module_named_like_function",
        {"/modules/exp": {"type": "ReLU"}},
        "name_conflict",
        "/modules/exp",
        None,
        None,
        "name 'exp' is used twice: the module exp (/modules/exp) and the function exp()",
    ),
    (
        "assign_to_input",
        {"/forward/0": "x = f0(x)"},
        "name_conflict",
        "/forward/0",
        1,
        1,
        "forward line 1: 'x' is already the input x (/inputs/x); pick another name",
    ),
    (
        "assign_twice",
        {"/forward/2": "x1 = (y - 1) ** 2"},
        "name_conflict",
        "/forward/2",
        3,
        1,
        "forward line 3: 'x1' is already assigned on forward line 1; pick another name",
    ),
    (
        "undefined_name",
        {"/forward/0": "x1 = f0(z)"},
        "undefined_name",
        "/forward/0",
        1,
        9,
        "forward line 1, column 9: name 'z' is not defined",
    ),
    (
        "use_before_assignment",
        {"/forward/0": "x1 = f0(y)"},
        "use_before_assignment",
        "/forward/0",
        1,
        9,
        "forward line 1, column 9: 'y' is used before it is assigned (on line 2)",
    ),
    (
        "module_as_value",
        {"/forward/2": "loss = f0 + y"},
        "not_a_tensor",
        "/forward/2",
        3,
        8,
        "forward line 3, column 8: 'f0' is the module f0 (/modules/f0), not a tensor; call it, e.g. f0(x)",
    ),
    (
        "return_top_level",
        {"/forward/2": "return (y - 1) ** 2"},
        "return_not_allowed",
        "/forward/2",
        3,
        1,
        "forward line 3, column 1: `return` is not allowed in the top-level program (it has no caller); assign instead",
    ),
    (
        "module_without_return",
        {"/modules/f1/forward": ["s = f(x)", "t = s ** 2"]},
        "missing_return",
        "/modules/f1/forward/1",
        2,
        None,
        "module f1, forward line 2: a Module program must end with `return <expr>`",
    ),
    (
        "return_not_last",
        {"/modules/f1/forward": ["return f(x)", "t = x ** 2"]},
        "return_not_last",
        "/modules/f1/forward/0",
        1,
        1,
        "module f1, forward line 1, column 1: `return` must be the last line",
    ),
    (
        "unused_module_arg",
        {"/modules/f1/args": ["x", "extra"]},
        "unused_argument",
        "/modules/f1/args",
        None,
        None,
        "module f1: argument 'extra' is never used by its forward",
    ),
    (
        "attribute_access",
        {"/forward/1": "y = f1(x1).data"},
        "program_syntax",
        "/forward/1",
        2,
        5,
        "forward line 2, column 5: attribute access `.data` is not allowed (only calls of whitelisted tensor methods, e.g. `.sum()`)",
    ),
    (
        "lambda",
        {"/forward/1": "y = (lambda a: a)(x1)"},
        "program_syntax",
        "/forward/1",
        2,
        6,
        "forward line 2, column 6: calling a lambda is not allowed: only named modules, whitelisted functions and tensor methods can be called",
    ),
    (
        "comprehension",
        {"/forward/1": "y = stack([a for a in x1])"},
        "program_syntax",
        "/forward/1",
        2,
        11,
        "forward line 2, column 11: a comprehension is not allowed",
    ),
    (
        "import",
        {"/forward/1": "import os"},
        "program_syntax",
        "/forward/1",
        2,
        1,
        "forward line 2, column 1: a statement must be an assignment `name = expr`, not an import",
    ),
    (
        "string_constant",
        {"/forward/1": "y = f1(x1) + 'a'"},
        "program_syntax",
        "/forward/1",
        2,
        14,
        "forward line 2, column 14: constant of type str is not allowed here (only numbers)",
    ),
    (
        "unknown_function",
        {"/forward/1": "y = eval(x1)"},
        "unknown_function",
        "/forward/1",
        2,
        5,
        "forward line 2, column 5: 'eval' is not a module of this program or a whitelisted function",
    ),
    (
        "unknown_method",
        {"/forward/1": "y = x1.numpy()"},
        "unknown_function",
        "/forward/1",
        2,
        5,
        "forward line 2, column 5: tensor method .numpy() is not in the whitelist",
    ),
    (
        "dunder_method",
        {"/forward/1": "y = x1.__class__()"},
        "unknown_function",
        "/forward/1",
        2,
        5,
        "forward line 2, column 5: tensor method .__class__() is not in the whitelist",
    ),
    (
        "bad_kwarg",
        {"/forward/2": "loss = mse_loss(y, x1, weight=2)"},
        "program_syntax",
        "/forward/2",
        3,
        24,
        "forward line 3, column 24: mse_loss() takes no keyword argument 'weight' (accepted: reduction)",
    ),
    (
        "bad_string_kwarg",
        {"/forward/2": "loss = mse_loss(y, x1, reduction='max')"},
        "program_syntax",
        "/forward/2",
        3,
        34,
        "forward line 3, column 34: reduction= does not take this string: one of mean, none, sum",
    ),
    (
        "wrong_arity_module",
        {"/forward/0": "x1 = f0(x, x)"},
        "program_syntax",
        "/forward/0",
        1,
        6,
        "forward line 1, column 6: module f0 (Linear) takes 1 positional argument(s), got 2",
    ),
    (
        "wrong_arity_function",
        {"/forward/2": "loss = relu(y, y)"},
        "program_syntax",
        "/forward/2",
        3,
        8,
        "forward line 3, column 8: relu() takes 1 positional argument(s), got 2",
    ),
    (
        "syntax_error",
        {"/forward/1": "y = f1(x1"},
        "program_syntax",
        "/forward/1",
        2,
        7,
        "forward line 2, column 7: invalid syntax ('(' was never closed)",
    ),
    (
        "two_statements",
        {"/forward/1": "y = f1(x1); z = y"},
        "program_syntax",
        "/forward/1",
        2,
        13,
        "forward line 2, column 13: one statement per line",
    ),
    (
        "aug_assign",
        {"/forward/1": "x1 += 1"},
        "program_syntax",
        "/forward/1",
        2,
        1,
        "forward line 2, column 1: a statement must be an assignment `name = expr`, not an augmented assignment (write `x = x + 1` as a new name, e.g. `x2 = x + 1`)",
    ),
    (
        "comparison",
        {"/forward/1": "y = x1 > 0"},
        "program_syntax",
        "/forward/1",
        2,
        5,
        "forward line 2, column 5: a comparison is not allowed",
    ),
    (
        "subscript_with_name",
        {"/forward/1": "y = f1(x1)[x]"},
        "program_syntax",
        "/forward/1",
        2,
        12,
        "forward line 2, column 12: subscripts must be int constants or slices of them, e.g. out[0] or h[:, -1]",
    ),
    (
        "unpack_single",
        {"/forward/1": "a, b = f1(x1)"},
        "program_syntax",
        "/forward/1",
        2,
        1,
        "forward line 2, column 1: cannot unpack one tensor into 2 names",
    ),
    (
        "nan_input",
        {"/inputs/x/value": [float("nan")]},
        "invalid_spec",
        "/inputs/x/value",
        None,
        None,
        "/inputs/x/value: non-finite numbers (NaN, Infinity) are not allowed",
    ),
    (
        "inf_init",
        {"/modules/f0/init/bias": [float("inf")]},
        "invalid_spec",
        "/modules/f0/init/bias",
        None,
        None,
        "/modules/f0/init/bias: non-finite numbers (NaN, Infinity) are not allowed",
    ),
    (
        "nan_hook_by",
        {"/hooks/0/action/by": float("nan")},
        "invalid_spec",
        "/hooks/0/action/by",
        None,
        None,
        "/hooks/0/action/by: Input should be a finite number",
    ),
    (
        "nan_int_field",
        {"/modules/f0/in_features": float("nan")},
        "invalid_spec",
        "/modules/f0/in_features",
        None,
        None,
        "/modules/f0/in_features: Input should be a valid integer",
    ),
    (
        "bool_int_field",
        {"/modules/f0/in_features": True},
        "invalid_spec",
        "/modules/f0/in_features",
        None,
        None,
        "/modules/f0/in_features: Input should be a valid integer",
    ),
    (
        "float_seed",
        {"/seed": 1.5},
        "invalid_spec",
        "/seed",
        None,
        None,
        "/seed: Input should be a valid integer",
    ),
    (
        "bad_init_shape",
        {"/modules/f0/init/weight": [[0.3, 0.1]]},
        "invalid_spec",
        "/modules/f0",
        None,
        None,
        "/modules/f0: init: weight has shape [1, 2], expected [1, 1]",
    ),
    (
        "unknown_init_param",
        {"/modules/f0/init/gamma": [0.3]},
        "invalid_spec",
        "/modules/f0",
        None,
        None,
        "/modules/f0: init: Linear has no parameter 'gamma' (parameters: weight, bias)",
    ),
    (
        "ragged_value",
        {"/inputs/x/value": [[1.0, 2.0], [3.0]]},
        "invalid_spec",
        "/inputs/x/value",
        None,
        None,
        "/inputs/x/value: is not rectangular: expected a list of length 2 at depth 1",
    ),
    (
        "unknown_module_type",
        {"/modules/f0/type": "Conv9d"},
        "invalid_spec",
        "/modules/f0",
        None,
        None,
        "/modules/f0: unknown 'type' 'Conv9d'; did you mean 'Conv2d'? Expected one of 'Linear', 'Conv1d', 'Conv2d', 'Embedding', 'LayerNorm', 'BatchNorm1d', 'Dropout', 'ReLU', 'GELU', 'Tanh', 'Sigmoid', 'Softmax', 'LogSoftmax', 'Identity', 'Flatten', 'MultiheadAttention', 'Sequential', 'Module'",
    ),
    (
        "missing_field",
        {"/modules/f0/in_features": DEL},
        "invalid_spec",
        "/modules/f0/in_features",
        None,
        None,
        "/modules/f0/in_features: Field required",
    ),
    (
        "extra_field",
        {"/modules/f0/colour": "red"},
        "invalid_spec",
        "/modules/f0/colour",
        None,
        None,
        "/modules/f0/colour: unknown field",
    ),
    (
        "bad_name",
        {"/inputs/2x": {"value": 1.0}},
        "invalid_spec",
        "/inputs/2x",
        None,
        None,
        "/inputs/2x: must be an identifier: letters, digits and _, not starting with a digit",
    ),
    (
        "keyword_name",
        {"/inputs/lambda": {"value": 1.0}},
        "invalid_spec",
        "/inputs/lambda",
        None,
        None,
        "/inputs/lambda: 'lambda' is a Python keyword and cannot be a name",
    ),
    (
        "long_name",
        {"/inputs/" + "a" * 65: {"value": 1.0}},
        "invalid_spec",
        "/inputs/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        None,
        None,
        "/inputs/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa: String should have at most 64 characters",
    ),
    (
        "value_and_shape",
        {"/inputs/x/shape": [1]},
        "invalid_spec",
        "/inputs/x",
        None,
        None,
        "/inputs/x: give exactly one of `value` or `shape`",
    ),
    (
        "int_requires_grad",
        {"/inputs/t": {"value": [1], "dtype": "int64", "requires_grad": True}},
        "invalid_spec",
        "/inputs/t",
        None,
        None,
        "/inputs/t: an int64 tensor cannot require grad (only floating point tensors can)",
    ),
    (
        "hook_wrong_target",
        {"/hooks/0/action/target": "output"},
        "invalid_spec",
        "/hooks/0",
        None,
        None,
        "/hooks/0: a full_backward hook's action can change 'grad_input', not 'output'",
    ),
    (
        "hook_scale_without_by",
        {"/hooks/0/action": {"op": "scale"}},
        "invalid_spec",
        "/hooks/0/action",
        None,
        None,
        "/hooks/0/action: op scale needs `by`",
    ),
    (
        "hook_clamp_min_gt_max",
        {"/hooks/0/action": {"op": "clamp", "min": 2, "max": 1}},
        "invalid_spec",
        "/hooks/0/action",
        None,
        None,
        "/hooks/0/action: op clamp needs min <= max",
    ),
    (
        "hook_unknown_module",
        {"/hooks/0/module": "f2"},
        "undefined_module",
        "/hooks/0/module",
        None,
        None,
        "hook 0 (full_backward): no module 'f2' (modules: f0, f1, f1.f)",
    ),
    (
        "hook_unknown_tensor",
        {"/hooks/0": {"type": "tensor", "tensor": "nope"}},
        "undefined_name",
        "/hooks/0/tensor",
        None,
        None,
        "hook 0 (tensor): 'nope' is not a tensor of this spec",
    ),
    (
        "hook_post_acc_nonleaf",
        {"/hooks/0": {"type": "post_accumulate_grad", "tensor": "y"}},
        "hook_not_on_leaf",
        "/hooks/0/tensor",
        None,
        None,
        "hook 0 (post_accumulate_grad): 'y' is not a leaf that requires grad (an input with requires_grad or a parameter)",
    ),
    (
        "step_unknown_of",
        {"/steps/0/of": "nope"},
        "undefined_name",
        "/steps/0/of",
        None,
        None,
        "step 0 (backward): 'nope' is not a tensor of this spec",
    ),
    (
        "grad_as_length",
        {"/steps/0": {"do": "grad", "of": "loss", "inputs": ["x"], "as": ["a", "b"]}},
        "invalid_spec",
        "/steps/0",
        None,
        None,
        "/steps/0: `as` names 2 result(s) but `inputs` has 1",
    ),
    (
        "grad_as_conflict",
        {"/steps/0": {"do": "grad", "of": "loss", "inputs": ["x"], "as": ["y"]}},
        "name_conflict",
        "/steps/0/as/0",
        None,
        None,
        "name 'y' is used twice: step 0 (grad) `as` (/steps/0/as/0) and assigned on forward line 2",
    ),
    (
        "grad_unknown_param",
        {"/steps/0": {"do": "grad", "of": "loss", "inputs": ["f0.gamma"], "as": ["g"]}},
        "undefined_name",
        "/steps/0/inputs/0",
        None,
        None,
        "step 0 (grad) inputs: 'f0.gamma' is not a tensor of this spec (parameters: f0.weight, f0.bias, f1.f.weight, f1.f.bias)",
    ),
    (
        "unknown_step",
        {"/steps/0": {"do": "jump"}},
        "invalid_spec",
        "/steps/0",
        None,
        None,
        "/steps/0: unknown 'do' 'jump'; expected one of 'backward', 'grad', 'forward', 'zero_grad', 'sgd_step'",
    ),
    (
        "retain_grad_unknown",
        {"/retain_grad": ["zz"]},
        "undefined_name",
        "/retain_grad/0",
        None,
        None,
        "retain_grad: 'zz' is not a tensor of this spec",
    ),
    (
        "sgd_negative_lr",
        {"/steps/0": {"do": "sgd_step", "lr": -1}},
        "invalid_spec",
        "/steps/0/lr",
        None,
        None,
        "/steps/0/lr: Input should be greater than 0",
    ),
    (
        "spec_version_2",
        {"/spec_version": 2},
        "invalid_spec",
        "/spec_version",
        None,
        None,
        "/spec_version: Input should be 1",
    ),
    (
        "nested_module_program_error",
        {"/modules/f1/forward": ["s = f(q)", "return s ** 2"]},
        "undefined_name",
        "/modules/f1/forward/0",
        1,
        7,
        "module f1, forward line 1, column 7: name 'q' is not defined",
    ),
    (
        "step_program_error",
        {
            "/steps": [
                {"do": "backward", "of": "loss", "retain_graph": True},
                {"do": "forward", "program": ["z = y.shape"]},
            ]
        },
        "program_syntax",
        "/steps/1/program/0",
        1,
        5,
        "step 1 (forward) line 1, column 5: attribute access `.shape` is not allowed (only calls of whitelisted tensor methods, e.g. `.sum()`)",
    ),
    (
        "hook_on_input_without_grad",
        {"/inputs/c": {"value": 1.0}, "/hooks/0": {"type": "tensor", "tensor": "c"}},
        "hook_on_no_grad",
        "/hooks/0/tensor",
        None,
        None,
        "hook 0 (tensor): input 'c' does not require grad, so no gradient reaches it; set requires_grad",
    ),
    (
        "int_input_randn",
        {"/inputs/t": {"shape": [2], "dtype": "int64"}},
        "invalid_spec",
        "/inputs/t",
        None,
        None,
        "/inputs/t: `init: randn` draws floats; an int64 input takes zeros, ones, arange or randint",
    ),
    (
        "randint_without_high",
        {"/inputs/t": {"shape": [2], "init": "randint", "dtype": "int64"}},
        "invalid_spec",
        "/inputs/t",
        None,
        None,
        "/inputs/t: `init: randint` needs `high` (values are drawn from [0, high)), and only it takes `high`",
    ),
    (
        "randint_on_float",
        {"/inputs/t": {"shape": [2], "init": "randint", "high": 3}},
        "invalid_spec",
        "/inputs/t",
        None,
        None,
        "/inputs/t: `init: randint` is for int64 inputs (set `dtype: int64`)",
    ),
    (
        "int_value_not_whole",
        {"/inputs/t": {"value": [1.5], "dtype": "int64"}},
        "invalid_spec",
        "/inputs/t",
        None,
        None,
        "/inputs/t: an int64 input's value must hold whole numbers",
    ),
    (
        "value_with_init",
        {"/inputs/x/init": "zeros"},
        "invalid_spec",
        "/inputs/x",
        None,
        None,
        "/inputs/x: `init` and `high` go with `shape`, not with `value`",
    ),
    (
        "clamp_with_by",
        {"/hooks/0/action": {"op": "clamp", "by": 1, "target": "grad_input"}},
        "invalid_spec",
        "/hooks/0/action",
        None,
        None,
        "/hooks/0/action: op clamp takes `min` and/or `max`, not `by`",
    ),
    (
        "clamp_without_bounds",
        {"/hooks/0/action": {"op": "clamp"}},
        "invalid_spec",
        "/hooks/0/action",
        None,
        None,
        "/hooks/0/action: op clamp needs `min` and/or `max`",
    ),
    (
        "zero_with_by",
        {"/hooks/0/action": {"op": "zero", "by": 1}},
        "invalid_spec",
        "/hooks/0/action",
        None,
        None,
        "/hooks/0/action: op zero takes no `by`, `min` or `max`",
    ),
    (
        "scale_with_min",
        {"/hooks/0/action": {"op": "scale", "by": 2, "min": 0}},
        "invalid_spec",
        "/hooks/0/action",
        None,
        None,
        "/hooks/0/action: op scale takes `by`, not `min`/`max`",
    ),
    (
        "conv_kernel_list_length",
        {"/modules/c": {"type": "Conv1d", "in_channels": 1, "out_channels": 1, "kernel_size": [2, 2]}},
        "invalid_spec",
        "/modules/c",
        None,
        None,
        "/modules/c: kernel_size must be an int or a list of 1 int",
    ),
    (
        "mha_heads",
        {"/modules/a": {"type": "MultiheadAttention", "embed_dim": 5, "num_heads": 2}},
        "invalid_spec",
        "/modules/a",
        None,
        None,
        "/modules/a: embed_dim (5) must be divisible by num_heads (2)",
    ),
    (
        "module_too_deep",
        {"/modules/deep": DEEP},
        "too_deep",
        "/modules/deep/layers/0/layers/0/layers/0/layers/0/layers/0/layers/0/layers/0/layers/0/layers/0/layers/0/layers/0/layers/0/layers/0/layers/0/layers/0/layers/0",
        None,
        None,
        "module deep.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0 is nested 17 levels deep (at most 16)",
    ),
    (
        "empty_forward",
        {"/forward": []},
        "invalid_spec",
        "/forward",
        None,
        None,
        "/forward: List should have at least 1 item after validation, not 0",
    ),
    (
        "module_call_kwarg",
        {"/forward/0": "x1 = f0(x, need_weights=False)"},
        "program_syntax",
        "/forward/0",
        1,
        12,
        "forward line 1, column 12: f0() takes no keyword argument 'need_weights' (accepted: none)",
    ),
    (
        "grad_of_unknown",
        {"/steps/0": {"do": "grad", "of": ["loss", "zz"], "inputs": ["x"], "as": ["g"]}},
        "undefined_name",
        "/steps/0/of/1",
        None,
        None,
        "step 0 (grad): 'zz' is not a tensor of this spec",
    ),
    (
        "backward_inputs_unknown",
        {"/steps/0": {"do": "backward", "of": "loss", "inputs": ["nope.weight"]}},
        "undefined_name",
        "/steps/0/inputs/0",
        None,
        None,
        "step 0 (backward) inputs: 'nope.weight' is not a tensor of this spec (parameters: f0.weight, f0.bias, f1.f.weight, f1.f.bias)",
    ),
    (
        "step_forward_reassigns",
        {
            "/steps": [
                {"do": "backward", "of": "loss", "retain_graph": True},
                {"do": "forward", "program": ["y = x1 * 2"]},
            ]
        },
        "name_conflict",
        "/steps/1/program/0",
        1,
        1,
        "step 1 (forward) line 1: 'y' is already assigned on forward line 2; pick another name",
    ),
    (
        "hook_module_path_syntax",
        {"/hooks/0/module": "f1..f"},
        "invalid_spec",
        "/hooks/0/module",
        None,
        None,
        "/hooks/0/module: must be a name or a dotted path such as f1.f.weight",
    ),
    (
        "dropout_p",
        {"/modules/d": {"type": "Dropout", "p": 1.5}},
        "invalid_spec",
        "/modules/d/p",
        None,
        None,
        "/modules/d/p: Input should be less than or equal to 1",
    ),
    (
        "unknown_top_field",
        {"/colour": "red"},
        "invalid_spec",
        "/colour",
        None,
        None,
        "/colour: unknown field",
    ),
    (
        "missing_forward",
        {"/forward": DEL},
        "invalid_spec",
        "/forward",
        None,
        None,
        "/forward: Field required",
    ),
]


@pytest.mark.parametrize(
    ("name", "changes", "code", "path", "line", "column", "message"), CASES, ids=[c[0] for c in CASES]
)
def test_error(name, changes, code, path, line, column, message):
    doc = seed_002()
    for where, value in changes.items():
        _set(doc, where, value)
    with pytest.raises(SpecError) as info:
        parse_spec(doc)
    err = info.value
    assert (err.code, err.path, err.line, err.column) == (code, path, line, column)
    assert err.message == message
    assert str(err) == message


def test_base_spec_is_valid():
    spec = parse_spec(seed_002())
    assert spec.title.startswith("Full backward hook")


def test_not_an_object():
    with pytest.raises(SpecError) as info:
        parse_spec([1, 2])
    assert (info.value.code, info.value.path, info.value.message) == (
        "invalid_spec",
        "",
        "the spec must be a JSON object",
    )


def test_errors_list_every_structural_error():
    doc = seed_002()
    doc["modules"]["f0"]["in_features"] = 0
    doc["seed"] = -1
    with pytest.raises(SpecError) as info:
        parse_spec(doc)
    paths = [e.path for e in info.value.errors]
    assert paths == ["/seed", "/modules/f0/in_features"]
    assert info.value.path == "/seed"  # the first error stays the error itself


def test_huge_key_is_not_echoed_whole():
    doc = seed_002()
    doc["inputs"]["a" * 100_000] = {"value": 1.0}
    with pytest.raises(SpecError) as info:
        parse_spec(doc)
    assert len(info.value.message) < 400
    assert len(info.value.path) < 200


def test_spec_error_survives_pickling_across_processes():
    import pickle

    doc = seed_002()
    doc["forward"][0] = "x1 = f0(z)"
    with pytest.raises(SpecError) as info:
        parse_spec(doc)
    back = pickle.loads(pickle.dumps(info.value))
    assert (back.code, back.message, back.path, back.line, back.column) == (
        "undefined_name",
        "forward line 1, column 9: name 'z' is not defined",
        "/forward/0",
        1,
        9,
    )
    assert str(back) == back.message and back.to_dict() == info.value.to_dict()
