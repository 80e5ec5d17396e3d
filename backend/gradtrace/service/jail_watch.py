"""A pasted program that calls ``gradtrace.watch``: its run, as the run view reads it.

Such a program is run as written without ``gradtrace.record()`` around it (recording every op
of a training loop op by op is what the watch exists to avoid, and the watch's own full traces
cannot start inside a recording). Its run is written where the program says, under the jail's
private ``/tmp``, and comes back as the run view's JSON document (``runs/view_data.py``)
within the service's budget (settings ``run_watch_steps``, ``run_watch_numbers`` and
``run_watch_trace_bytes``, ``GRADTRACE_RUN_WATCH_*``): at most that many logged steps and
norms (sampled evenly past them, the document's ``cut`` saying so) and bytes of the full
traces the watch saved. The answer's ``trace`` is the first of those traces, so the player
draws the first logged step's backward as it draws any program's.

``watch_calls(source)`` decides from the source alone (``import gradtrace`` then
``gradtrace.watch``, any alias, or ``from gradtrace import watch``), before anything runs.
A program that calls it but logs no step is refused with a sentence saying why, at the
line of the call; so is one whose run cannot be read back (the program rewrote its files).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import msgspec


def watch_calls(source: str) -> list[int]:
    """The lines where ``source`` calls ``gradtrace.watch`` (empty: it does not)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    modules: set[str] = set()
    functions: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == "gradtrace"}
        elif isinstance(node, ast.ImportFrom) and node.module == "gradtrace":
            functions |= {a.asname or a.name for a in node.names if a.name == "watch"}
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (
            isinstance(f, ast.Attribute)
            and f.attr == "watch"
            and isinstance(f.value, ast.Name)
            and f.value.id in modules
        ) or (isinstance(f, ast.Name) and f.id in functions):
            lines.append(node.lineno)
    return sorted(lines)


def watch_result(
    line: int, runs: list[Path], raised: bool, *, steps: int, numbers: int, trace_bytes: int
) -> dict[str, Any]:
    """``{"watch": view doc or None, "trace": the first full trace or None, "problem": …}``
    for the runs the program started (``line``: its first call of the watch, where a problem
    points; ``raised``: it ended with an exception, which is then the answer's news: no problem
    is added for an empty run), the document within ``steps``, ``numbers`` and
    ``trace_bytes`` (see the module's docstring)."""
    from gradtrace.runs.store import Run
    from gradtrace.runs.view_data import run_view

    if not runs:
        if raised:
            return {"watch": None, "trace": None, "problem": None}
        return _problem(
            f"line {line}: gradtrace.watch was called but never entered: use it around the training loop, "
            "`with gradtrace.watch(model, 'runs/name') as w:`",
            line,
        )
    try:
        with Run(runs[0]) as run:
            if not run.steps:
                if raised:
                    return {"watch": None, "trace": None, "problem": None}
                return _problem(
                    f"line {line}: gradtrace.watch logged no step: a step is one forward of the watched model "
                    "with gradients enabled, then its backward, inside the `with` block (was the model called "
                    "under torch.no_grad(), or another model trained?)",
                    line,
                )
            view = run_view(run, steps, numbers, trace_bytes)
    except Exception as exc:  # the run's files are the program's: it may have changed them since
        return _problem(
            f"line {line}: the run gradtrace.watch wrote in {runs[0]} could not be read back "
            f"({type(exc).__name__}: {exc}); did the program change its files?",
            line,
            "watch_unreadable",
        )
    if len(runs) > 1:
        view.cut.append(f"the program wrote {len(runs)} runs: the first, {runs[0]}, is shown")
    doc = json.loads(msgspec.json.encode(view))
    first = min(doc["full_traces"], key=int, default=None)
    return {"watch": doc, "trace": doc["full_traces"][first] if first is not None else None, "problem": None}


def _problem(message: str, line: int, code: str = "watch_empty") -> dict[str, Any]:
    return {
        "watch": None,
        "trace": None,
        "problem": {"code": code, "message": message, "line": line},
    }
