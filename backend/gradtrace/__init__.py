"""gradtrace: see what PyTorch's autograd really does.

Importing this package does not import torch (the service's API process must stay
torch-free); the tracing functions import the engine when first called.
"""
