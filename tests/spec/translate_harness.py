"""Run PyTorch source in a fresh interpreter and read named gradients back (the tests' oracle).

The source runs in a subprocess with plain torch (no gradtrace); each requested name is a
top-level variable or a dotted parameter path ("model.fc1.weight", "seq.0.bias"), and its
``.grad`` comes back as float64 numbers (exact for float32 and float64) or None.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

_READER = r"""
import json, runpy, sys
g = runpy.run_path(sys.argv[1], run_name="__main__")
out = {}
for key in json.loads(sys.argv[2]):
    parts = key.split(".")
    obj = g.get(parts[0])
    if obj is None:
        out[key] = "missing"
        continue
    for p in parts[1:]:
        obj = obj[int(p)] if p.isdigit() else getattr(obj, p)
    grad = obj.grad
    out[key] = None if grad is None else {"shape": list(grad.shape), "data": grad.detach().double().flatten().tolist()}
print(json.dumps(out))
"""


def run_source_grads(source: str, names: list[str], tmp: Path) -> dict[str, Any]:
    """Each name's .grad after running ``source`` as a script (numpy float64 arrays, or None)."""
    path = tmp / "model_under_test.py"
    path.write_text(source, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # plain torch: no gradtrace
    done = subprocess.run(
        [sys.executable, "-c", _READER, str(path), json.dumps(names)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    out: dict[str, Any] = {}
    for key, value in raw.items():
        assert value != "missing", f"{key} is not a variable of the program"
        out[key] = (
            None if value is None else np.array(value["data"], dtype=np.float64).reshape(value["shape"])
        )
    return out


def assert_same_grads(traced: dict[str, Any], plain: dict[str, Any]) -> None:
    """Bit-equal: the spec runs the same torch ops in the same order as the source."""
    assert traced.keys() == plain.keys()
    for key, grad in traced.items():
        if grad is None or plain[key] is None:
            assert grad is None and plain[key] is None, key
            continue
        ours = np.asarray(grad, dtype=np.float64)
        assert ours.shape == plain[key].shape, key
        assert np.array_equal(ours, plain[key]), (key, ours, plain[key])
