"""PyTorch source <-> model spec, both ways, torch-free.

``python_to_spec`` reads a restricted, common subset of PyTorch (a ``class …(nn.Module)``, layers
with literal arguments, inputs made by ``torch.tensor``/``torch.randn``, hooks with the spec's
actions, backward/grad/optimizer steps) by parsing it with ``ast``; nothing of it ever runs.
What it cannot read is refused with every refused line listed at once. ``spec_to_python``
writes any spec as the plain PyTorch program that computes the same thing.
"""

from .from_python import python_to_spec
from .source import LIMITS, TranslateLimits
from .to_python import spec_to_python

__all__ = ["LIMITS", "TranslateLimits", "python_to_spec", "spec_to_python"]
