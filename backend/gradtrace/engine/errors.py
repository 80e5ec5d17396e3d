"""Errors the engine raises for limits it enforces: Problems, answered 413 as they are."""

from __future__ import annotations

from gradtrace.problem import Problem


class TraceError(Problem):
    """A trace refused by a limit, e.g. code "too_many_nodes"; ``message`` names the limit."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)
