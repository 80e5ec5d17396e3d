"""Shared spec fixtures: the seed-002 spec of DESIGN.md (tests/design_specs.py), fresh per test."""

import pytest
from design_specs import seed_002


@pytest.fixture
def spec002() -> dict:
    return seed_002()
