"""DrawOptions: one record of how to draw, checked once, whatever the way in."""

from __future__ import annotations

import re

import pytest

from gradtrace.render import DrawOptions
from gradtrace.render.options import draw_options


def test_keyword_arguments_and_the_record_are_the_same_options() -> None:
    record = DrawOptions(animated=True, phase="backward", theme="dark", depth=2, direction="right")
    assert draw_options(animated=True, phase="backward", theme="dark", depth=2, direction="right") == record
    assert draw_options(record) is record
    assert draw_options(record, theme="light") == DrawOptions(
        animated=True, phase="backward", theme="light", depth=2, direction="right"
    )


def test_a_picture_is_light_with_chips_on_or_off() -> None:
    assert DrawOptions(theme=None, values="all").picture() == DrawOptions(theme="light", values=True)
    assert DrawOptions(values=False).svg_args() == [
        "--format", "svg", "--phase", "both", "--theme", "light", "--direction", "down", "--no-values",
    ]  # fmt: skip
    assert DrawOptions(animated=True, depth=3).svg_args()[-3:] == ["--depth", "3", "--animated"]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"phase": "sideways"}, "phase must be one of forward, backward, both, not 'sideways'"),
        ({"theme": "blue"}, "theme must be one of light, dark or None, not 'blue'"),
        ({"direction": "up"}, "direction must be one of down, right, not 'up'"),
        ({"animated": "yes"}, "animated must be true or false, not 'yes'"),
        ({"values": "some"}, "values must be true, false or \"all\", not 'some'"),
        ({"depth": 0}, "depth must be a whole number from 1 to 999 or None, not 0"),
        ({"depth": True}, "depth must be a whole number from 1 to 999 or None, not True"),
    ],
)
def test_a_wrong_option_is_named(given: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        draw_options(**given)


def test_an_unknown_option_lists_the_known_ones() -> None:
    with pytest.raises(TypeError, match="unknown drawing option.s. colour: use animated, phase, theme"):
        draw_options(colour="red")
