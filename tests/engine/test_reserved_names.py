"""The spec's static list of nn.Module attribute names (torch-free) matches the torch in use.

torch's own names are read in a fresh interpreter: a library loaded earlier in the test session
may add its own to nn.Module (transformers adds ``smart_apply`` when it builds a model), and
those are not torch's.
"""

import json
import subprocess
import sys

from gradtrace.spec.reserved import NN_MODULE_ATTRIBUTES, module_attribute_clash

_TORCH_NAMES = "import json, torch.nn as nn; print(json.dumps(dir(nn.Module())))"


def _nn_module_attributes() -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _TORCH_NAMES], capture_output=True, text=True, check=True, timeout=300
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_static_list_is_exactly_nn_modules_public_attributes():
    public = {name for name in _nn_module_attributes() if not name.startswith("_")}
    assert NN_MODULE_ATTRIBUTES == public


def test_every_attribute_of_nn_module_is_refused():
    for name in _nn_module_attributes():
        assert module_attribute_clash(name) is not None, name
