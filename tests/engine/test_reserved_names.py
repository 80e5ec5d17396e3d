"""The spec's static list of nn.Module attribute names (torch-free) matches the torch in use."""

import torch.nn as nn

from gradtrace.spec.reserved import NN_MODULE_ATTRIBUTES, module_attribute_clash


def test_static_list_is_exactly_nn_modules_public_attributes():
    public = {name for name in dir(nn.Module()) if not name.startswith("_")}
    assert NN_MODULE_ATTRIBUTES == public


def test_every_attribute_of_nn_module_is_refused():
    module = nn.Module()
    for name in dir(module):
        assert hasattr(module, name) and module_attribute_clash(name) is not None, name
