"""Errors the engine raises for limits it enforces: Problems, answered 413 as they are."""

from __future__ import annotations

from gradtrace.problem import Problem


class TraceError(Problem):
    """A trace refused by a limit, e.g. code "too_many_nodes"; ``message`` names the limit."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)


class UnreadableTensor(TraceError):
    """A trace refused at a tensor whose numbers gradtrace cannot read (a nested tensor, a
    ``__torch_dispatch__`` wrapper subclass): ``message`` names it. Unlike a limit, it comes
    with what was recorded up to it (``gradtrace.trace`` attaches it as ``exc.gradtrace_trace``)."""
