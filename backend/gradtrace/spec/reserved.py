"""Names a spec may not give a module or a tensor: the public attributes of ``torch.nn.Module``.

The engine builds each spec module as an ``nn.Module`` and registers children, parameters
and inputs by name, so a module called ``training`` or a tensor called ``forward`` would
shadow (or be shadowed by) the attribute PyTorch itself reads. The spec is torch-free, so
the list is kept here by hand; ``tests/engine/test_reserved_names.py`` checks it against
``dir(nn.Module())`` of the torch in use. Names starting with ``_`` are PyTorch's private
attributes (``_modules``, ``_parameters``) and are refused as a class.
"""

from __future__ import annotations

NN_MODULE_ATTRIBUTES = frozenset(
    {
        "T_destination",
        "add_module",
        "apply",
        "bfloat16",
        "buffers",
        "call_super_init",
        "children",
        "compile",
        "cpu",
        "cuda",
        "double",
        "dump_patches",
        "eval",
        "extra_repr",
        "float",
        "forward",
        "get_buffer",
        "get_extra_state",
        "get_parameter",
        "get_submodule",
        "half",
        "ipu",
        "load_state_dict",
        "modules",
        "mtia",
        "named_buffers",
        "named_children",
        "named_modules",
        "named_parameters",
        "parameters",
        "register_backward_hook",
        "register_buffer",
        "register_forward_hook",
        "register_forward_pre_hook",
        "register_full_backward_hook",
        "register_full_backward_pre_hook",
        "register_load_state_dict_post_hook",
        "register_load_state_dict_pre_hook",
        "register_module",
        "register_parameter",
        "register_state_dict_post_hook",
        "register_state_dict_pre_hook",
        "requires_grad_",
        "set_extra_state",
        "set_submodule",
        "share_memory",
        "state_dict",
        "to",
        "to_empty",
        "train",
        "training",
        "type",
        "xpu",
        "zero_grad",
    }
)


def module_attribute_clash(name: str) -> str | None:
    """Why `name` cannot name a module or tensor, or None when it can."""
    if name.startswith("_"):
        return f"{name!r} starts with '_', which is reserved for PyTorch's private nn.Module attributes"
    if name in NN_MODULE_ATTRIBUTES:
        return f"{name!r} is an attribute of torch.nn.Module; pick another name"
    return None
