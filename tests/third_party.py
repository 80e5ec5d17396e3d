"""Models nobody here wrote, loaded the way these tests and benchmarks can use them."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def torchvision_python_only(also_in: Path | None = None) -> ModuleType | None:
    """torchvision with its Python code only (None when it is not installed): the package's
    ``__init__`` loads its C++ operators, built for one torch release, which the model code
    never uses, so the package is made from its folder without running that ``__init__``.
    ``also_in``: a folder it may be installed in apart from the environment (``make bench``
    puts it there: installed beside this torch, transformers finds it and fails on those
    operators)."""
    if "torchvision" in sys.modules:
        return sys.modules["torchvision"]
    if also_in is not None and also_in.is_dir() and str(also_in) not in sys.path:
        sys.path.insert(0, str(also_in))
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return None
    bare = importlib.util.spec_from_file_location(
        "torchvision", spec.origin, submodule_search_locations=list(spec.submodule_search_locations or [])
    )
    assert bare is not None
    module = sys.modules["torchvision"] = importlib.util.module_from_spec(bare)
    return module
