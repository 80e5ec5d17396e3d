"""Run PyTorch sources in a fresh interpreter and read named gradients back (the tests' oracle).

The sources run in one subprocess with plain torch (no gradtrace on its path), one after the
other, each as its own ``__main__`` with the default dtype reset between them; each requested
name is a top-level variable or a dotted parameter path ("model.fc1.weight", "seq.0.bias"), and
its ``.grad`` comes back as float64 numbers (exact for float32 and float64) or None. A source
that raises reports the exception's class name instead.
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
import json, runpy, sys, torch
results = []
for job in json.load(open(sys.argv[1])):
    torch.set_default_dtype(torch.float32)
    try:
        g = runpy.run_path(job["path"], run_name="__main__")
    except Exception as exc:
        results.append({"error": type(exc).__name__})
        continue
    out = {}
    for key in job["names"]:
        parts = key.split(".")
        obj = g.get(parts[0])
        if obj is None:
            out[key] = "missing"
            continue
        for p in parts[1:]:
            obj = obj[int(p)] if p.isdigit() else getattr(obj, p)
        grad = obj.grad
        out[key] = None if grad is None else {"shape": list(grad.shape), "data": grad.detach().double().flatten().tolist()}
    results.append({"grads": out})
json.dump(results, open(sys.argv[2], "w"))
"""


def run_sources(jobs: list[tuple[str, list[str]]], tmp: Path) -> list[dict[str, Any]]:
    """For each (source, names): {"grads": {name: array | None}} or {"error": "RuntimeError"}."""
    listed = []
    for k, (source, names) in enumerate(jobs):
        path = tmp / f"program_{k}.py"
        path.write_text(source, encoding="utf-8")
        listed.append({"path": str(path), "names": names})
    (tmp / "jobs.json").write_text(json.dumps(listed))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # plain torch: no gradtrace
    done = subprocess.run(
        [sys.executable, "-c", _READER, str(tmp / "jobs.json"), str(tmp / "out.json")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp / "out.json").read_text())
    for result in results:
        for key, value in result.get("grads", {}).items():
            assert value != "missing", f"{key} is not a variable of the program"
            result["grads"][key] = (
                None if value is None else np.array(value["data"], dtype=np.float64).reshape(value["shape"])
            )
    return results


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
