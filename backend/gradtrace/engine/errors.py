"""Errors the engine raises for limits it enforces (the caller turns them into 4xx)."""

from __future__ import annotations


class TraceError(Exception):
    """A trace refused by a limit, e.g. code "too_many_nodes"; ``message`` names the limit."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
