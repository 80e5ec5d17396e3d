"""The engine: the only package of gradtrace that imports torch.

``run_spec`` traces a validated ModelSpec (the service calls it in a worker process);
``trace_module`` traces a user's own nn.Module (the Python library).
"""

from gradtrace.engine.errors import TraceError
from gradtrace.engine.run import trace_module
from gradtrace.engine.run_spec import run_spec

__all__ = ["TraceError", "run_spec", "trace_module"]
