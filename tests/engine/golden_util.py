"""Golden trace files: structure compared exactly, floats approximately.

Regenerate with ``GRADTRACE_UPDATE_GOLDEN=1 .venv/bin/pytest tests/engine/test_golden.py``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from gradtrace.trace import tensor_array

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("GRADTRACE_UPDATE_GOLDEN") == "1"


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6)


def assert_same(actual: Any, expected: Any, path: str = "$") -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict), path
        assert sorted(actual) == sorted(expected), f"{path}: keys {sorted(actual)} != {sorted(expected)}"
        for k in expected:
            if k == "data" and isinstance(expected[k], str) and isinstance(actual[k], str):
                # base64 of the tensor's own dtype (a block of tensor_data, put in place by
                # inlined): decoded as that dtype
                assert actual["dtype"] == expected["dtype"], f"{path}.dtype"
                a = tensor_array({"dtype": actual["dtype"], "shape": [-1], "data": 0}, [actual[k]])
                e = tensor_array({"dtype": expected["dtype"], "shape": [-1], "data": 0}, [expected[k]])
                close = (
                    np.allclose(a, e, rtol=1e-5, atol=1e-6) if e.dtype.kind == "f" else np.array_equal(a, e)
                )
                assert a.shape == e.shape and close, f"{path}.data"
            elif k == "torch_version":
                continue
            else:
                assert_same(actual[k], expected[k], f"{path}.{k}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{path}: length"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, f"{path}[{i}]")
    elif isinstance(expected, float) and not isinstance(expected, bool):
        assert isinstance(actual, int | float) and _close(actual, expected), f"{path}: {actual} != {expected}"
    else:
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def inlined(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with each ``data`` index replaced by its block of ``tensor_data`` (compared as
    numbers, wherever the block sits in the list)."""
    blocks = doc.get("tensor_data", [])

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        out = {k: walk(v) for k, v in node.items() if k != "tensor_data"}
        if isinstance(node.get("data"), int) and "stats" in node:
            out["data"] = blocks[node["data"]]
        return out

    return walk(doc)


def check_golden(name: str, trace_dict: dict[str, Any]) -> None:
    path = GOLDEN / f"{name}.json"
    if UPDATE or not path.exists():
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(trace_dict, indent=1, allow_nan=False) + "\n", encoding="utf-8")
        if not UPDATE:
            raise AssertionError(f"golden file {path.name} was missing: written, rerun the test")
        return
    assert_same(inlined(trace_dict), inlined(json.loads(path.read_text(encoding="utf-8"))))
