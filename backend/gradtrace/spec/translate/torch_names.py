"""What the spec's names are called in PyTorch: layer constructor arguments, function homes, hooks.

Shared by both directions of the translation so the Python one writes is the Python one reads.
"""

from __future__ import annotations

from ..vocabulary import FUNCTIONS

# Positional constructor arguments, in torch's order, that the spec's layer fields take.
LAYER_POSITIONAL: dict[str, tuple[str, ...]] = {
    "Linear": ("in_features", "out_features", "bias"),
    "Conv1d": ("in_channels", "out_channels", "kernel_size", "stride", "padding"),
    "Conv2d": ("in_channels", "out_channels", "kernel_size", "stride", "padding"),
    "Embedding": ("num_embeddings", "embedding_dim"),
    "LayerNorm": ("normalized_shape", "eps", "elementwise_affine", "bias"),
    "BatchNorm1d": ("num_features", "eps", "momentum", "affine"),
    "Dropout": ("p",),
    "ReLU": (),
    "GELU": (),
    "Tanh": (),
    "Sigmoid": (),
    "Softmax": ("dim",),
    "LogSoftmax": ("dim",),
    "Identity": (),
    "Flatten": ("start_dim", "end_dim"),
    "MultiheadAttention": ("embed_dim", "num_heads"),
}
# Layers that draw from the RNG when constructed (so the order of construction matters).
DRAWING_LAYERS = frozenset({"Linear", "Conv1d", "Conv2d", "Embedding", "MultiheadAttention"})

# Where PyTorch keeps each function (the vocabulary's ``homes``): F is torch.nn.functional.
F_ONLY = frozenset(name for name, sig in FUNCTIONS.items() if sig.homes == ("F",))
F_NAMES = frozenset(name for name, sig in FUNCTIONS.items() if "F" in sig.homes)
TORCH_NAMES = frozenset(name for name, sig in FUNCTIONS.items() if "torch" in sig.homes)
# Where spec_to_python writes each function: the callable the engine itself runs.
F_PREFERRED = frozenset(name for name, sig in FUNCTIONS.items() if sig.homes[0] == "F")

# Positional arguments PyTorch takes that the spec's vocabulary writes as keywords.
FUNCTION_KEYWORDS: dict[str, tuple[str, ...]] = {
    "flatten": ("start_dim", "end_dim"),
    "clamp": ("min", "max"),
    "dropout": ("p", "training"),
    "gelu": (),
    "leaky_relu": ("negative_slope",),
}
METHOD_KEYWORDS: dict[str, tuple[str, ...]] = {"clamp": ("min", "max"), "clamp_": ("min", "max")}

# Module hooks: the registering method and the parameters its callable takes.
MODULE_HOOK_METHODS: dict[str, str] = {
    "register_forward_pre_hook": "forward_pre",
    "register_forward_hook": "forward",
    "register_full_backward_pre_hook": "full_backward_pre",
    "register_full_backward_hook": "full_backward",
    "register_backward_hook": "backward",
}
TENSOR_HOOK_METHODS: dict[str, str] = {
    "register_hook": "tensor",
    "register_post_accumulate_grad_hook": "post_accumulate_grad",
}
HOOK_METHOD_OF = {kind: method for method, kind in {**MODULE_HOOK_METHODS, **TENSOR_HOOK_METHODS}.items()}
# Parameters of the hook callable, and which one the spec's action changes (by index).
HOOK_PARAMS: dict[str, tuple[tuple[str, ...], int]] = {
    "forward_pre": (("module", "args"), 1),
    "forward": (("module", "args", "output"), 2),
    "full_backward_pre": (("module", "grad_output"), 1),
    "full_backward": (("module", "grad_input", "grad_output"), 1),
    "backward": (("module", "grad_input", "grad_output"), 1),
    "tensor": (("grad",), 0),
    "post_accumulate_grad": (("param",), 0),
}

DTYPES = {
    "float32": "float32",
    "float": "float32",
    "float64": "float64",
    "double": "float64",
    "int64": "int64",
    "long": "int64",
}
