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

import functools
import os
import sys
import warnings
from types import FrameType, ModuleType

import torch.nn.modules.module
import torch.overrides

_GRADTRACE = os.path.dirname(os.path.dirname(__file__)) + os.sep  # (the gradtrace package, as imported)
# frames that are not the caller's: gradtrace's, and torch's handle_torch_function (through
# which a Python-level torch function reaches gradtrace's discovery mode)
_OVERRIDES = torch.overrides.__file__
_NOT_THE_CALLERS = (_GRADTRACE, _OVERRIDES)


def record_all_but_errors(log: list[warnings.WarningMessage]) -> None:
    """Inside ``warnings.catch_warnings(record=True)`` (``log``: the list it returned): the
    filters made to record every warning, each where it would be shown or dropped, and to
    raise where they raise.

    A warning placed in gradtrace's own code is recorded at the caller's line instead: the
    model's line that made the call gradtrace relayed (a warning PyTorch's C++ code raises in
    an op is placed by Python at the innermost Python frame, the discovery mode's, where a
    plain run places it at the model's line), or, for a backward gradtrace ran (e.g. PyTorch's
    warning about a full backward hook), the line that called ``gradtrace.trace``."""
    warnings.filters[:] = [  # type: ignore[index]  # (typeshed: a Sequence; CPython: a list)
        (action if action == "error" else "always", *rest) for action, *rest in warnings.filters
    ]
    # (the fallback where no filter matches, in place of warnings.defaultaction; it also
    # tells the warnings machinery that its filters changed)
    warnings.simplefilter("always", append=True)
    if getattr(warnings, "_showwarnmsg_impl", None) == log.append:  # (CPython's machinery)
        warnings._showwarnmsg_impl = functools.partial(_record, log)  # type: ignore[attr-defined]


# torch's warning that a compiled module is called while process-wide module hooks exist:
# gradtrace's own (record() finds a program's modules through them) make it, a plain run does not
_COMPILED_WITH_GLOBAL_HOOKS = "Using `torch.compile(module)` when there are global hooks on modules"
# torch.nn.modules.module's process-wide hook dicts (register_module_forward_hook, …)
GLOBAL_HOOK_DICTS = (
    "_global_forward_pre_hooks",
    "_global_forward_hooks",
    "_global_backward_pre_hooks",
    "_global_backward_hooks",
)


def _of_gradtrace(hook: object) -> bool:
    function = getattr(hook, "func", hook)  # (a functools.partial: the function it calls)
    return (getattr(function, "__module__", None) or "").startswith("gradtrace.")


def _gradtraces_doing(message: warnings.WarningMessage) -> bool:
    """A warning only gradtrace's recording makes torch raise (see above): not the program's."""
    if not str(message.message).startswith(_COMPILED_WITH_GLOBAL_HOOKS):
        return False
    hooks = [h for name in GLOBAL_HOOK_DICTS for h in getattr(torch.nn.modules.module, name, {}).values()]
    return all(_of_gradtrace(h) for h in hooks)


def _record(log: list[warnings.WarningMessage], message: warnings.WarningMessage) -> None:
    if _gradtraces_doing(message):
        return
    if message.filename.startswith(_GRADTRACE):
        frame: FrameType | None = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename != message.filename:
            frame = frame.f_back  # (out of the warnings machinery, to the frame it named)
        relayed = False
        while frame is not None and (relayed or frame.f_code.co_filename.startswith(_NOT_THE_CALLERS)):
            # (past handle_torch_function: the Python-level torch function the discovery mode
            # relayed and gradtrace ran again, an engine run such as ``loss.backward()``; a
            # warning its stacklevel placed in gradtrace's frames is, in a plain run, at the
            # line that called that function, so its frame is not the caller's either)
            relayed = frame.f_code.co_filename == _OVERRIDES
            frame = frame.f_back
        if frame is not None:
            message.filename, message.lineno = frame.f_code.co_filename, frame.f_lineno
            message.source = None
    log.append(message)


def _module_of(filename: str, modules: dict[str, ModuleType]) -> ModuleType | None:
    """The module whose source file is ``filename`` (the name and registry a plain warning
    from its code is filtered with). Code that is in no file (``python -c``, a script read
    from standard input, an interactive session: ``<string>``, ``<stdin>``) is the main
    program's."""
    if not modules:
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str):
                modules.setdefault(path, module)
    found = modules.get(filename)
    if found is None and filename.startswith("<"):
        found = sys.modules.get("__main__")
    return found


# the registries of warnings whose code is in no known module (warn_explicit shows nothing
# without one), by file name: "once" and "default" act across traces as in a plain run
_REGISTRIES: dict[str, dict] = {}


def reissue(records: list[warnings.WarningMessage]) -> None:
    """Issue the recorded warnings again, through the caller's filters (see the module's
    docstring). Called once the recording is over. Re-issuing never raises but where the
    caller's filters say so (an "error" filter)."""
    modules: dict[str, ModuleType] = {}  # (filled on first need: the traced model rarely warns)
    for record in records:
        module = _module_of(record.filename, modules)
        namespace = None if module is None else vars(module)
        registry = (
            _REGISTRIES.setdefault(record.filename, {})
            if namespace is None
            else namespace.setdefault("__warningregistry__", {})
        )
        issue = functools.partial(
            warnings.warn_explicit,
            record.message,
            record.category,
            record.filename,
            record.lineno,
            module=None if module is None else module.__name__,
            registry=registry,
            source=record.source,
        )
        try:
            # (module_globals: where the warning's source line is read from, through the
            # module's loader)
            issue(module_globals=namespace)
        except (ImportError, OSError):  # a loader that has no source (``python - < script.py``)
            issue(module_globals=None)
