"""The warnings a traced model raises: recorded for the trace, and the caller's as in a plain run.

While a trace runs, every warning is recorded (the trace lists each distinct one as a
diagnostic), except where the caller's filters turn it into an error: then it raises right
there, inside the model, as it would without gradtrace (``warnings.simplefilter("error")``
stops the model at the same line, with the same exception). After the trace the recorded
warnings are issued again, in order, through the caller's filters, as coming from the line
that warned: the caller sees what a plain run shows ("ignore", "once", "default" and module
filters apply as they would), only later, once the trace is done.
"""

from __future__ import annotations

import sys
import warnings
from types import ModuleType


def record_all_but_errors() -> None:
    """Inside ``warnings.catch_warnings(record=True)``: the filters made to record every
    warning, each where it would be shown or dropped, and to raise where they raise."""
    warnings.filters[:] = [(action if action == "error" else "always", *rest) for action, *rest in warnings.filters]
    # (the fallback where no filter matches, in place of warnings.defaultaction; it also
    # tells the warnings machinery that its filters changed)
    warnings.simplefilter("always", append=True)


def _module_of(filename: str, modules: dict[str, ModuleType]) -> ModuleType | None:
    """The module whose source file is ``filename`` (the name and registry a plain warning
    from its code is filtered with)."""
    if not modules:
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str):
                modules.setdefault(path, module)
    return modules.get(filename)


def reissue(records: list[warnings.WarningMessage]) -> None:
    """Issue the recorded warnings again, through the caller's filters (see the module's
    docstring). Called once the recording is over."""
    modules: dict[str, ModuleType] = {}  # (filled on first need: the traced model rarely warns)
    for record in records:
        module = _module_of(record.filename, modules)
        namespace = None if module is None else vars(module)
        warnings.warn_explicit(
            record.message,
            record.category,
            record.filename,
            record.lineno,
            module=None if module is None else module.__name__,
            registry=None if namespace is None else namespace.setdefault("__warningregistry__", {}),
            module_globals=namespace,
            source=record.source,
        )
