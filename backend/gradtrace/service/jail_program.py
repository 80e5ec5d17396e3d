"""The pasted program itself, run in a confined process (``service/jail_template.py``).

It runs as ``__main__`` (so ``if __name__ == "__main__":`` blocks run) from a module of its
own, under ``gradtrace.record()``, and what comes out is one JSON document written to the
template's result pipe: the recorded trace and the program's exception, if it raised —
its type, its message as a client may see it (``public_text``: no paths, no addresses) and
the line in the posted source where it was raised, never a frame of gradtrace or torch.
"""

from __future__ import annotations

import json
import sys
import time
import types
import warnings
from typing import Any

from gradtrace.problem import public_text

PROGRAM_FILENAME = "<program>"
RECORDED_FILENAME = "<gradtrace>"  # the ``with`` around the program (see _RECORDED)


def _user_line(tb: types.TracebackType | None) -> int | None:
    """The line of the innermost frame of the program itself (not of a library it called)."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == PROGRAM_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def exception_of(exc: BaseException) -> dict[str, Any]:
    line = _user_line(exc.__traceback__)
    if line is None and isinstance(exc, SyntaxError) and exc.filename == PROGRAM_FILENAME:
        line = exc.lineno
    return {
        "type": type(exc).__name__,
        "message": public_text(str(exc), fallback=""),
        "line": line,
    }


# The ``with`` runs in the program's own module frame (its variables name what the trace
# shows); the pair it needs is taken out of the module's namespace before the program's first line.
_RECORDED = compile(
    "with __gradtrace__[0]:\n    exec(globals().pop('__gradtrace__')[1], globals())\n",
    RECORDED_FILENAME,
    "exec",
)
_format_warning = warnings.formatwarning


def _warning_text(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    """A warning as Python prints it, but one raised at the ``with`` around the program (what
    ``record()`` says of the whole run as it ends) is the program's, at no line: the wrapper's
    ``<gradtrace>:1`` is no line a user wrote."""
    if filename == RECORDED_FILENAME:
        return f"{PROGRAM_FILENAME}: {category.__name__}: {message}\n"
    return _format_warning(message, category, filename, lineno, line)


def _recorder() -> Any:
    """``gradtrace.record()`` with the service's node budget."""
    import gradtrace
    from gradtrace.spec import SpecLimits

    return gradtrace.record(max_nodes=SpecLimits().max_nodes)


def _trace_of(recorder: Any) -> Any:
    try:
        trace = recorder.trace
    except (AttributeError, RuntimeError):  # nothing recorded (e.g. an exception before the block ended)
        return None
    return json.loads(trace.to_json_bytes())


def run_program(source: str, watch_limits: dict[str, int]) -> dict[str, Any]:
    """Run ``source`` to its end (or its exception); the result document. A program that
    calls ``gradtrace.watch`` runs without ``record()``; its run comes back (``jail_watch``,
    within ``watch_limits``: its ``steps``, ``numbers`` and ``trace_bytes``)."""
    from gradtrace.problem import Problem
    from gradtrace.runs.store import collect_runs
    from gradtrace.service import jail_watch

    started = time.monotonic()
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = module
    sys.argv = ["program.py"]
    warnings.formatwarning = _warning_text  # (this process runs this one program)
    exception: dict[str, Any] | None = None
    problem: dict[str, Any] | None = None
    memory = False
    memory_line: int | None = None
    watch_lines = jail_watch.watch_calls(source)
    recorder = None if watch_lines else _recorder()
    runs: list[Any] = []
    try:
        code = compile(source, PROGRAM_FILENAME, "exec")
        with collect_runs() as runs:
            if recorder is None:
                exec(code, module.__dict__)
            else:
                module.__dict__["__gradtrace__"] = (recorder, code)
                exec(_RECORDED, module.__dict__)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            exception = {
                "type": "SystemExit",
                "message": public_text(str(exc.code), fallback=""),
                "line": None,
            }
    except MemoryError as exc:
        memory = True
        memory_line = _user_line(exc.__traceback__)
    except Problem as exc:
        if exc.status == 413:  # a budget of the recorder (nodes, values): the service's limit
            problem = {"code": exc.code, "message": exc.message}
        exception = exception_of(exc)
    except BaseException as exc:
        exception = exception_of(exc)
    watch = None
    if memory or problem:
        trace = None
    elif recorder is not None:
        trace = _trace_of(recorder)
    else:
        found = jail_watch.watch_result(watch_lines[0], runs, raised=exception is not None, **watch_limits)
        trace, watch, problem = found["trace"], found["watch"], found["problem"]
    return {
        "trace": trace,
        "watch": watch,
        "exception": exception,
        "problem": problem,
        "memory_error": memory,
        "memory_line": memory_line,  # the program's line it ran out at (None: not in its code)
        "program_seconds": time.monotonic() - started,
    }
