"""A corpus of hostile and broken requests, each with the answer the contract promises.

Every case names the status, the envelope's ``code`` and the ``path`` (JSON Pointer) the
answer must carry — the field the client has to fix. ``HTTP_CASES`` go through an HTTP client;
``RAW_CASES`` are bytes written to a socket (framing no client library would send).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from design_specs import seed_002

JSON_TYPE = {"content-type": "application/json"}
TRACE = "/api/v1/trace"
SPECS = "/api/v1/specs"
ANY = object()  # the path is not checked (named in the message instead)


@dataclass(frozen=True)
class Case:
    id: str
    status: int
    code: str | None  # None: a success or an answer without an envelope (204, 200)
    path: Any = None  # the envelope's "path"; ANY to skip
    method: str = "POST"
    url: str = TRACE
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON_TYPE))
    line: int | None = None  # the envelope's "line" when the case pins it
    errors: int | None = None  # how many entries "errors" must list
    allow: str | None = None  # the Allow header a 405/204 must carry


def _spec(**changes: Any) -> dict[str, Any]:
    doc = seed_002()
    doc.update(changes)
    return doc


def _body(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def _edit(path: str, value: Any) -> bytes:
    """seed 002 with one field replaced (path like /modules/f0/in_features); DEL removes it."""
    doc = seed_002()
    parts = path.strip("/").split("/")
    node = doc
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    key: Any = int(last) if isinstance(node, list) else last
    if value is DEL:
        del node[key]
    else:
        node[key] = value
    return _body(doc)


DEL = object()


def _renamed_module(name: str) -> bytes:
    doc = seed_002()
    doc["modules"][name] = doc["modules"].pop("f0")
    doc["forward"][0] = f"x1 = {name}(x)"
    return _body(doc)


def _renamed_input(name: str) -> bytes:
    doc = seed_002()
    doc["inputs"][name] = doc["inputs"].pop("x")
    doc["forward"][0] = f"x1 = f0({name})"
    return _body(doc)


def _renamed_tensor(name: str) -> bytes:
    doc = seed_002()
    doc["forward"] = ["x1 = f0(x)", f"{name} = f1(x1)", f"loss = ({name} - 1) ** 2"]
    return _body(doc)


def _renamed_child(name: str) -> bytes:
    doc = seed_002()
    f1 = doc["modules"]["f1"]
    f1["modules"][name] = f1["modules"].pop("f")
    f1["forward"][0] = f"s = {name}(x)"
    return _body(doc)


def _renamed_arg(name: str) -> bytes:
    doc = seed_002()
    f1 = doc["modules"]["f1"]
    f1["args"] = [name]
    f1["forward"][0] = f"s = f({name})"
    return _body(doc)


def _spliced(template: str, token: str) -> bytes:
    """seed 002 as JSON text with ``"@"`` replaced by a raw token (NaN, a huge number)."""
    return _body(seed_002()).replace(template.encode(), token.encode(), 1)


def _nested(depth: int) -> dict[str, Any]:
    module: dict[str, Any] = {"type": "ReLU"}
    for _ in range(depth):
        module = {"type": "Sequential", "layers": [module]}
    return module


HUGE_INT = "7" * 5000
SEED_002_JSON = _body(seed_002())
TITLE_LESS = copy.deepcopy(seed_002())
del TITLE_LESS["title"]

HTTP_CASES: list[Case] = [
    # ---- the body is not a JSON document we can read: 400 / 413 / 415 ---------------------------
    Case("empty-body", 400, "invalid_json", None, body=b""),
    Case("whitespace-body", 400, "invalid_json", None, body=b"  \n\t "),
    Case("truncated-json", 400, "invalid_json", None, body=SEED_002_JSON[:-7]),
    Case("trailing-garbage", 400, "invalid_json", None, body=SEED_002_JSON + b"}"),
    Case("single-quotes", 400, "invalid_json", None, body=b"{'spec_version': 1}"),
    Case("utf8-bom", 400, "invalid_json", None, body=b"\xef\xbb\xbf" + SEED_002_JSON),
    Case("not-utf8", 400, "invalid_json", None, body=b'{"title": "\xff\xfe"}'),
    Case("nan-seed", 400, "non_finite_number", "/seed", body=_spliced('"seed": 0', '"seed": NaN')),
    Case(
        "infinity-in-value",
        400,
        "non_finite_number",
        "/inputs/x/value/0",
        body=_spliced('"value": [0.3]', '"value": [Infinity]'),
    ),
    Case(
        "minus-infinity-in-init",
        400,
        "non_finite_number",
        "/modules/f0/init/weight/0/0",
        body=_spliced('"weight": [[0.3]]', '"weight": [[-Infinity]]'),
    ),
    Case(
        "overflowing-float",
        400,
        "non_finite_number",
        "/modules/f0/init/bias/0",
        body=_spliced('"bias": [0.1]', '"bias": [1e999]'),
    ),
    Case("huge-int-seed", 400, "number_too_long", "/seed", body=_spliced('"seed": 0', f'"seed": {HUGE_INT}')),
    Case(
        "huge-negative-int-in-value",
        400,
        "number_too_long",
        "/inputs/x/value/0",
        body=_spliced('"value": [0.3]', f'"value": [-{HUGE_INT}]'),
    ),
    Case(
        "huge-int-in-unknown-field",
        400,
        "number_too_long",
        "/extra/0/n",
        body=_spliced('"seed": 0', f'"extra": [{{"n": {HUGE_INT}}}], "seed": 0'),
    ),
    Case("nested-100k-deep", 413, "too_deep", None, body=b"[" * 100_000 + b"]" * 100_000),
    Case(
        "text-plain",
        415,
        "unsupported_media_type",
        None,
        body=SEED_002_JSON,
        headers={"content-type": "text/plain"},
    ),
    Case("no-content-type", 415, "unsupported_media_type", None, body=SEED_002_JSON, headers={}),
    Case(
        "xml",
        415,
        "unsupported_media_type",
        None,
        body=b"<spec/>",
        headers={"content-type": "application/xml"},
    ),
    Case(
        "form-encoded",
        415,
        "unsupported_media_type",
        None,
        body=b"spec_version=1",
        headers={"content-type": "application/x-www-form-urlencoded"},
    ),
    Case("body-over-cap", 413, "payload_too_large", None, body=b'{"title": "' + b"x" * 300_000 + b'"}'),
    Case(
        "permalink-body-over-cap",
        413,
        "payload_too_large",
        None,
        url=SPECS,
        body=b"[" + b"0," * 150_000 + b"0]",
    ),
    # ---- JSON, but not a spec: 422 naming the field ----------------------------------------------
    Case("top-level-array", 422, "invalid_spec", None, body=b"[1, 2]"),
    Case("top-level-string", 422, "invalid_spec", None, body=b'"spec"'),
    Case("top-level-null", 422, "invalid_spec", None, body=b"null"),
    Case("missing-spec-version", 422, "invalid_spec", "/spec_version", body=_edit("/spec_version", DEL)),
    Case("spec-version-2", 422, "invalid_spec", "/spec_version", body=_edit("/spec_version", 2)),
    Case("missing-forward", 422, "invalid_spec", "/forward", body=_edit("/forward", DEL)),
    Case("empty-forward", 422, "invalid_spec", "/forward", body=_edit("/forward", [])),
    Case(
        "forward-line-not-a-string", 422, "invalid_spec", "/forward/1", body=_edit("/forward/1", 42), line=2
    ),
    Case("unknown-field", 422, "invalid_spec", "/bogus", body=_body(_spec(bogus=1))),
    Case("title-empty", 422, "invalid_spec", "/title", body=_edit("/title", "")),
    Case("title-too-long", 422, "invalid_spec", "/title", body=_edit("/title", "t" * 201)),
    Case("seed-as-string", 422, "invalid_spec", "/seed", body=_edit("/seed", "0")),
    Case("seed-negative", 422, "invalid_spec", "/seed", body=_edit("/seed", -1)),
    Case("seed-float", 422, "invalid_spec", "/seed", body=_edit("/seed", 0.5)),
    Case("dtype-float16", 422, "invalid_spec", "/dtype", body=_edit("/dtype", "float16")),
    Case("unknown-module-type", 422, "invalid_spec", "/modules/f0", body=_edit("/modules/f0/type", "Conv9d")),
    Case(
        "zero-in-features",
        422,
        "invalid_spec",
        "/modules/f0/in_features",
        body=_edit("/modules/f0/in_features", 0),
    ),
    Case(
        "bool-out-features",
        422,
        "invalid_spec",
        "/modules/f0/out_features",
        body=_edit("/modules/f0/out_features", True),
    ),
    Case(
        "ragged-value",
        422,
        "invalid_spec",
        "/inputs/x/value",
        body=_edit("/inputs/x/value", [[1.0], [1.0, 2.0]]),
    ),
    Case("value-and-shape", 422, "invalid_spec", "/inputs/x", body=_edit("/inputs/x/shape", [1])),
    Case(
        "randint-without-high",
        422,
        "invalid_spec",
        "/inputs/x",
        body=_edit("/inputs/x", {"shape": [2], "init": "randint", "dtype": "int64"}),
    ),
    Case("name-with-dash", 422, "invalid_spec", ANY, body=_renamed_input("a-b")),
    Case("name-is-keyword", 422, "invalid_spec", "/inputs/lambda", body=_renamed_input("lambda")),
    Case("name-65-chars", 422, "invalid_spec", ANY, body=_renamed_input("n" * 65)),
    Case("name-with-nul", 422, "invalid_spec", ANY, body=_renamed_input("a\u0000b")),
    Case("name-100k-chars", 422, "invalid_spec", ANY, body=_renamed_input("k" * 100_000)),
    # ---- the program language: 422 with the line ----------------------------------------------------
    Case("syntax-error", 422, "program_syntax", "/forward/1", body=_edit("/forward/1", "y = f1(x1"), line=2),
    Case("bare-expression", 422, "program_syntax", "/forward/0", body=_edit("/forward/0", "f0(x)"), line=1),
    Case(
        "dunder-import",
        422,
        "unknown_function",
        "/forward/0",
        body=_edit("/forward/0", "x1 = __import__('os')"),
        line=1,
    ),
    Case(
        "attribute-escape",
        422,
        "program_syntax",
        "/forward/0",
        body=_edit("/forward/0", "x1 = x.__class__"),
        line=1,
    ),
    Case(
        "lambda-in-program",
        422,
        "program_syntax",
        "/forward/0",
        body=_edit("/forward/0", "x1 = (lambda: 1)()"),
        line=1,
    ),
    Case(
        "undefined-name", 422, "undefined_name", "/forward/0", body=_edit("/forward/0", "x1 = f0(z)"), line=1
    ),
    Case(
        "tensor-named-like-function", 422, "name_conflict", "/forward/1", body=_renamed_tensor("tanh"), line=2
    ),
    Case(
        "module-return-at-top-level",
        422,
        "return_not_allowed",
        "/forward/2",
        body=_edit("/forward/2", "return y"),
        line=3,
    ),
    Case(
        "steps-backward-of-undefined", 422, "undefined_name", "/steps/0/of", body=_edit("/steps/0/of", "nope")
    ),
    Case(
        "retain-grad-undefined",
        422,
        "undefined_name",
        "/retain_grad/0",
        body=_body(_spec(retain_grad=["ghost"])),
    ),
    Case(
        "hook-on-undefined-module",
        422,
        "undefined_module",
        "/hooks/0/module",
        body=_edit("/hooks/0/module", "nope"),
    ),
    Case(
        "two-hooks-two-errors",
        422,
        "undefined_module",
        "/hooks/0/module",
        body=_body(_spec(hooks=[{"module": "a", "type": "forward"}, {"module": "b", "type": "forward"}])),
        errors=2,
    ),
    # ---- names that would shadow an nn.Module attribute: refused at validation ---------------------
    Case(
        "module-named-training", 422, "reserved_name", "/modules/training", body=_renamed_module("training")
    ),
    Case("module-named-forward", 422, "reserved_name", "/modules/forward", body=_renamed_module("forward")),
    Case("module-named-cuda", 422, "reserved_name", "/modules/cuda", body=_renamed_module("cuda")),
    Case(
        "module-named-_modules", 422, "reserved_name", "/modules/_modules", body=_renamed_module("_modules")
    ),
    Case(
        "module-named-state_dict",
        422,
        "reserved_name",
        "/modules/state_dict",
        body=_renamed_module("state_dict"),
    ),
    Case(
        "child-named-parameters",
        422,
        "reserved_name",
        "/modules/f1/modules/parameters",
        body=_renamed_child("parameters"),
    ),
    Case("input-named-training", 422, "reserved_name", "/inputs/training", body=_renamed_input("training")),
    Case("input-named-_buffers", 422, "reserved_name", "/inputs/_buffers", body=_renamed_input("_buffers")),
    Case("tensor-named-eval", 422, "reserved_name", "/forward/1", body=_renamed_tensor("eval"), line=2),
    Case("argument-named-half", 422, "reserved_name", "/modules/f1/args/0", body=_renamed_arg("half")),
    # ---- limits: 413 naming what is too big --------------------------------------------------------
    Case(
        "huge-input-shape",
        413,
        "limit_exceeded",
        "/inputs/x",
        body=_edit("/inputs/x", {"shape": [100_000, 100_000]}),
    ),
    Case(
        "huge-linear",
        413,
        "limit_exceeded",
        "/modules/f0",
        body=_edit("/modules/f0", {"type": "Linear", "in_features": 1, "out_features": 2**30}),
    ),
    Case(
        "modules-nested-17-deep",
        413,
        "too_deep",
        "/modules/deep" + "/layers/0" * 16,
        body=_body(_spec(modules={**seed_002()["modules"], "deep": _nested(17)})),
    ),
    # ---- the engine's verdict, from a worker: 422 with the line ------------------------------------
    Case(
        "shape-mismatch-in-forward",
        422,
        "forward_error",
        "/forward/0",
        body=_edit("/inputs/x/value", [0.3, 0.4]),
        line=1,
    ),
    # ---- valid after all: the title is optional ----------------------------------------------------
    Case("title-less-spec-is-traced", 200, None, body=_body(TITLE_LESS)),
    Case("title-less-spec-is-stored", 201, None, url=SPECS, body=_body({**TITLE_LESS, "seed": 7})),
    # ---- routes and methods --------------------------------------------------------------------------
    Case("get-on-post-route", 405, "method_not_allowed", None, method="GET", url=TRACE, allow="POST"),
    Case("delete-permalinks", 405, "method_not_allowed", None, method="DELETE", url=SPECS, allow="POST"),
    Case("unknown-api-path", 404, "not_found", None, method="GET", url="/api/v1/nope"),
    Case("unknown-api-version", 404, "not_found", None, method="GET", url="/api/v2/trace"),
    Case("unknown-example", 404, "example_not_found", "/id", method="GET", url="/api/v1/examples/nope"),
    Case(
        "permalink-id-escaping-the-route",
        404,
        "not_found",
        None,
        method="GET",
        url="/api/v1/specs/..%2f..%2fetc",
    ),
    Case(
        "malformed-permalink-id",
        404,
        "permalink_not_found",
        "/id",
        method="GET",
        url="/api/v1/specs/NOT-AN-ID!",
    ),
    Case(
        "missing-permalink", 404, "permalink_not_found", "/id", method="GET", url="/api/v1/specs/" + "a" * 12
    ),
    Case(
        "missing-permalink-trace",
        404,
        "permalink_not_found",
        "/id",
        method="GET",
        url="/api/v1/specs/" + "b" * 12 + "/trace",
    ),
    Case("options-on-trace", 204, None, method="OPTIONS", url=TRACE, headers={}, allow="POST, OPTIONS"),
    Case(
        "options-on-examples",
        204,
        None,
        method="OPTIONS",
        url="/api/v1/examples",
        headers={},
        allow="GET, OPTIONS",
    ),
    Case("options-on-unknown", 404, "not_found", None, method="OPTIONS", url="/api/v1/nope", headers={}),
    Case(
        "preflight-refused-method",
        400,
        "cors_refused",
        None,
        method="OPTIONS",
        url=TRACE,
        headers={"origin": "https://example.org", "access-control-request-method": "DELETE"},
    ),
    Case(
        "headers-over-16k",
        431,
        "headers_too_large",
        None,
        method="GET",
        url="/api/v1/examples",
        headers={f"x-pad-{i}": "p" * 1000 for i in range(20)},
    ),
]


@dataclass(frozen=True)
class RawCase:
    id: str
    request: bytes  # written to the socket as it is
    status: int
    code: str


_HOST = b"Host: 127.0.0.1\r\n"
RAW_CASES: list[RawCase] = [
    RawCase("garbage-request-line", b"THIS IS NOT HTTP\r\n\r\n", 400, "malformed_request"),
    RawCase(
        "space-in-header-name",
        b"GET /healthz HTTP/1.1\r\n" + _HOST + b"Bad Header: x\r\n\r\n",
        400,
        "malformed_request",
    ),
    RawCase(
        "bad-chunk-size",
        b"POST /api/v1/trace HTTP/1.1\r\n" + _HOST + b"Content-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n",
        400,
        "malformed_request",
    ),
    RawCase(
        "two-content-lengths",
        b"POST /api/v1/trace HTTP/1.1\r\n" + _HOST + b"Content-Type: application/json\r\n"
        b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        400,
        "malformed_request",
    ),
    RawCase(
        "non-numeric-content-length",
        b"POST /api/v1/trace HTTP/1.1\r\n"
        + _HOST
        + b"Content-Type: application/json\r\nContent-Length: ten\r\n\r\n",
        400,
        "malformed_request",
    ),
    RawCase("http-0.9", b"GET /\r\n\r\n", 400, "malformed_request"),
]

# ---- Python for POST /api/v1/translate: read, never run; 4xx at the line, never 5xx ------------
TRANSLATE = "/api/v1/translate"
# A file each payload would create if any of it ran (test_hostile checks it never appears).
EXECUTION_MARKER = "/tmp/gradtrace-hostile-translate-ran"
_PY_HEAD = "import torch\nfrom torch import nn\nimport torch.nn.functional as F\n"


def _py(source: str, head: bool = True) -> bytes:
    return _body({"python": (_PY_HEAD if head else "") + source})


_M = EXECUTION_MARKER
PYTHON_CASES: list[Case] = [
    Case(
        "py-import-os",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py(f"import os\nos.system('touch {_M}')"),
        line=4,
    ),
    Case(
        "py-from-import",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py("from os import system"),
        line=4,
    ),
    Case(
        "py-dunder-import",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py(f"x = __import__('os').system('touch {_M}')"),
        line=4,
    ),
    Case(
        "py-dunder-attribute",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py("x = torch.randn(2)\ny = x.__class__.__bases__"),
        line=5,
    ),
    Case(
        "py-dunder-subclasses",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py("x = ().__class__.__base__.__subclasses__()"),
        line=4,
    ),
    Case(
        "py-exec",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py(f"exec(\"open('{_M}', 'w')\")"),
        line=4,
    ),
    Case(
        "py-eval",
        422,
        "unknown_function",
        "/python",
        url=TRANSLATE,
        body=_py(f"x = torch.randn(2)\ny = eval(\"open('{_M}', 'w')\")"),
        line=5,
    ),
    Case(
        "py-open",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py(f"open('{_M}', 'w').write('x')"),
        line=4,
    ),
    Case(
        "py-getattr",
        422,
        "unknown_function",
        "/python",
        url=TRANSLATE,
        body=_py("x = torch.randn(2)\ny = getattr(x, 'sum')()"),
        line=5,
    ),
    Case(
        "py-decorator",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py(f"@print\ndef hook(g):\n    open('{_M}', 'w')"),
        line=4,
    ),
    Case(
        "py-class-decorator",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py("@dataclass\nclass Net(nn.Module):\n    pass"),
        line=4,
    ),
    Case(
        "py-comprehension",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py("x = torch.randn(2)\ny = [open('f') for _ in range(3)]"),
        line=5,
    ),
    Case(
        "py-lambda-outside-hook",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py("x = torch.randn(2)\nf = lambda: open('f')"),
        line=5,
    ),
    Case(
        "py-hook-body-side-effect",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py(
            f"def hook(g):\n    open('{_M}', 'w')\n    return g\nw = torch.randn(2, requires_grad=True)\nw.register_hook(hook)"
        ),
        line=6,
    ),
    Case(
        "py-while",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py("while True:\n    pass"),
        line=4,
    ),
    Case(
        "py-power-loop",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py("for _ in range(10**9):\n    pass"),
        line=4,
    ),
    Case(
        "py-huge-loop",
        413,
        "limit_exceeded",
        "/python",
        url=TRANSLATE,
        body=_py("for _ in range(1000000000):\n    pass"),
        line=4,
    ),
    Case(
        "py-huge-literal",
        413,
        "limit_exceeded",
        "/python",
        url=TRANSLATE,
        body=_py("x = torch.tensor([" + "1," * 60000 + "])"),
    ),
    Case(
        "py-huge-int",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py("l = nn.Linear(10**100, 2)"),
    ),
    Case(
        "py-deep-parens",
        413,
        "limit_exceeded",
        "/python",
        url=TRANSLATE,
        body=_py("x = " + "[" * 180 + "1" + "]" * 180),
    ),
    Case(
        "py-deep-unary", 413, "limit_exceeded", "/python", url=TRANSLATE, body=_py("x = " + "-" * 20000 + "1")
    ),
    Case("py-syntax-error", 422, "python_syntax", "/python", url=TRANSLATE, body=_py("x = = 1"), line=4),
    Case("py-null-byte", 422, "python_syntax", "/python", url=TRANSLATE, body=_py("x = 1\x00")),
    Case("py-not-a-string", 422, "invalid_request", "/python", url=TRANSLATE, body=_body({"python": 12})),
    Case(
        "py-both-fields", 422, "invalid_request", None, url=TRANSLATE, body=_body({"python": "", "spec": {}})
    ),
    Case("py-empty", 422, "unsupported_python", "/python", url=TRANSLATE, body=_py("", head=False)),
    Case("py-global", 422, "unsupported_python", "/python", url=TRANSLATE, body=_py("global torch"), line=4),
    Case(
        "py-with-open",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py(f"with open('{_M}', 'w') as f:\n    pass"),
        line=4,
    ),
    Case(
        "py-walrus",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py("x = torch.randn(2)\ny = (z := x)"),
        line=5,
    ),
    Case(
        "py-fstring",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py("x = torch.randn(2)\ny = f'{x}'"),
        line=5,
    ),
    Case(
        "py-subclass-other-base",
        422,
        "unsupported_python",
        "/python",
        url=TRANSLATE,
        body=_py("class Evil(object):\n    pass"),
        line=4,
    ),
    Case("spec-invalid", 422, "invalid_spec", ANY, url=TRANSLATE, body=_body({"spec": {"spec_version": 2}})),
    Case("spec-ok", 200, None, url=TRANSLATE, body=_body({"spec": seed_002()})),
]
HTTP_CASES += PYTHON_CASES
