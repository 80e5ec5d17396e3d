"""Shared spec fixtures: the documented seed-002 spec (tests/design_specs.py), fresh per test."""

import pytest
from design_specs import seed_002


@pytest.fixture
def spec002() -> dict:
    return seed_002()
