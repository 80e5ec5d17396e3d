"""``POST /api/v1/translate``: PyTorch source -> spec, or spec -> PyTorch source.

The Python is parsed, never run (gradtrace.spec.translate); what it cannot read is a 422
(413 past a size limit) naming the line and column in the source.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from gradtrace.api.body import read_json
from gradtrace.api.cpu import lane
from gradtrace.api.docs import SPEC_REF, error_responses
from gradtrace.api.errors import ApiError
from gradtrace.spec import SpecError
from gradtrace.spec.translate import LIMITS

router = APIRouter(tags=["translate"])

_LIMITS_TEXT = (
    f"Limits: source at most {LIMITS.max_source_bytes:,} bytes, {LIMITS.max_nodes:,} syntax nodes, "
    f"nesting {LIMITS.max_depth} deep, {LIMITS.max_literal_elements:,} numbers in tensor literals, "
    f"loops of at most {LIMITS.max_loop} iterations and {LIMITS.max_statements:,} statements unrolled."
)
_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {
                            "type": "object",
                            "required": ["python"],
                            "additionalProperties": False,
                            "properties": {
                                "python": {"type": "string", "maxLength": LIMITS.max_source_bytes}
                            },
                        },
                        {
                            "type": "object",
                            "required": ["spec"],
                            "additionalProperties": False,
                            "properties": {"spec": SPEC_REF},
                        },
                    ]
                },
                "examples": {
                    "python": {
                        "value": {
                            "python": "import torch\nfrom torch import nn\n\ntorch.manual_seed(0)\n"
                            "x = torch.randn(2, 3)\nlayer = nn.Linear(3, 1)\nloss = layer(x).sum()\n"
                            "loss.backward()\n"
                        }
                    }
                },
            }
        },
    }
}
_RESPONSE = {
    "description": "`{spec}` for a `python` body, `{python}` for a `spec` body",
    "content": {
        "application/json": {
            "schema": {
                "oneOf": [
                    {"type": "object", "required": ["spec"], "properties": {"spec": SPEC_REF}},
                    {"type": "object", "required": ["python"], "properties": {"python": {"type": "string"}}},
                ]
            }
        }
    },
}


def _translate(doc: Any) -> dict[str, Any]:
    from gradtrace.spec.translate import python_to_spec, spec_to_python

    if not isinstance(doc, dict) or len(doc) != 1 or not ({"python", "spec"} & set(doc)):
        raise ApiError(422, "invalid_request", 'send {"python": "<source>"} or {"spec": {…}}', "")
    if "python" in doc:
        if not isinstance(doc["python"], str):
            raise ApiError(422, "invalid_request", "python must be a string of source code", "/python")
        return {"spec": python_to_spec(doc["python"])}
    try:
        return {"python": spec_to_python(doc["spec"])}
    except SpecError as exc:
        exc.path = "/spec" + (exc.path or "")
        raise


@router.post(
    "/translate",
    summary="Translate PyTorch source to a spec, or a spec to PyTorch source",
    description='`{"python": source}` answers `{"spec": …}`: the source is read with Python\'s '
    "`ast` and never executed; it must be the supported subset (a `class …(nn.Module)` with layers "
    "of the spec and literal arguments, inputs from `torch.tensor`/`torch.randn` under "
    "`torch.manual_seed`, hooks returning nothing or one of the spec's actions, "
    "`backward`/`torch.autograd.grad`/SGD steps). Anything else is a 422 whose `line` and "
    "`column` point into the source and whose message says what is supported instead. "
    '`{"spec": …}` answers `{"python": source}`: the plain PyTorch program computing the '
    "same gradients. " + _LIMITS_TEXT,
    openapi_extra=_BODY,
    responses={200: _RESPONSE, **error_responses(400, 413, 415, 422, 503)},
    response_class=JSONResponse,
)
async def translate(request: Request) -> JSONResponse:
    doc = await read_json(request)
    return JSONResponse(await lane().run(_translate, doc))
