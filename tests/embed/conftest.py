"""Fixtures for the diagram/export tests: real traces of the built-in examples (real torch)."""

from __future__ import annotations

import pytest
from svg_checks import example_trace

import gradtrace


@pytest.fixture(scope="session")
def two_layer() -> gradtrace.Trace:
    return example_trace("two-layer-linear")
