"""``DrawOptions``: how a trace is drawn, one record checked once.

Every way in takes these same options (``Trace.save``, ``render.save``/``render_bytes``/
``diagram_svg``, ``gradtrace render``, ``/specs/{id}/diagram.svg``, the Sphinx and MkDocs
plugins): a ``DrawOptions``, or its fields as keyword arguments (``draw_options``; the
functions users call show them in their signatures: ``takes_draw_options``).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, ParamSpec, TypeVar, get_args

Phase = Literal["forward", "backward", "both"]
Theme = Literal["light", "dark"]
Direction = Literal["down", "right"]
PHASES: tuple[str, ...] = get_args(Phase)
THEMES: tuple[str, ...] = get_args(Theme)
DIRECTIONS: tuple[str, ...] = get_args(Direction)
MAX_DEPTH = 999


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class DrawOptions:
    """How to draw a trace. A wrong value raises ValueError naming the option.

    ``animated``: (SVG) CSS keyframes replay the forward build and the backward flow, looping.
    ``phase``: which passes to show or play. ``theme``: colours; None (an HTML player) follows
    the reader's colour scheme, a picture is then light. ``values``: the pictures' value and
    gradient chips (True, False); a ``.json`` or ``.html`` file keeps a budget of tensor
    numbers unless it is ``"all"`` (``source.file_doc``). ``depth`` (still pictures): every
    module that deep (1: the model's children) drawn as one box with its type, output shape and
    size, the gradients' norms on the edges between boxes; None: the viewer's rule (a big graph
    folds, then collapses as deep as fits). ``direction`` (still pictures): "down" (the
    viewer's) or "right" (left to right).
    """

    animated: bool = False
    phase: Phase = "both"
    theme: Theme | None = "light"
    values: bool | Literal["all"] = True
    depth: int | None = None
    direction: Direction = "down"

    def __post_init__(self) -> None:
        for name, allowed in (("phase", PHASES), ("direction", DIRECTIONS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {getattr(self, name)!r}")
        if self.theme is not None and self.theme not in THEMES:
            raise ValueError(f"theme must be one of {', '.join(THEMES)} or None, not {self.theme!r}")
        if not isinstance(self.animated, bool):
            raise ValueError(f"animated must be true or false, not {self.animated!r}")
        if not isinstance(self.values, bool) and self.values != "all":
            raise ValueError(f'values must be true, false or "all", not {self.values!r}')
        if self.depth is not None and not (_whole(self.depth) and 1 <= self.depth <= MAX_DEPTH):
            raise ValueError(
                f"depth must be a whole number from 1 to {MAX_DEPTH} or None, not {self.depth!r}"
            )

    def picture(self) -> DrawOptions:
        """As a still or animated picture reads them: a theme (light when None) and chips on or off."""
        return dataclasses.replace(self, theme=self.theme or "light", values=self.values is not False)

    def svg_args(self) -> list[str]:
        """The Node renderer's command line for this picture."""
        drawn = self.picture()
        args = [
            "--format",
            "svg",
            "--phase",
            drawn.phase,
            "--theme",
            str(drawn.theme),
            "--direction",
            drawn.direction,
        ]
        if drawn.depth is not None:
            args += ["--depth", str(drawn.depth)]
        if drawn.animated:
            args.append("--animated")
        if not drawn.values:
            args.append("--no-values")
        return args


FIELDS = tuple(field.name for field in dataclasses.fields(DrawOptions))

P = ParamSpec("P")
R = TypeVar("R")


def takes_draw_options(function: Callable[P, R]) -> Callable[P, R]:
    """For a function taking ``options=None, **changes``: its signature shows each of
    ``DrawOptions``' fields as a keyword-only parameter (``help()``, a notebook's tooltip and
    completion read it), and a misspelt one is Python's own TypeError naming the function
    (``Trace.save() got an unexpected keyword argument 'animate'``)."""
    signature = inspect.signature(function)
    kept = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    defaults = DrawOptions()
    shown = [
        inspect.Parameter(
            field.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=getattr(defaults, field.name),
            annotation=field.type,
        )
        for field in dataclasses.fields(DrawOptions)
    ]

    named = frozenset(signature.parameters) | frozenset(FIELDS)

    @functools.wraps(function)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        for name in kwargs:
            if name not in named:
                raise TypeError(f"{function.__qualname__}() got an unexpected keyword argument {name!r}")
        return function(*args, **kwargs)

    checked.__signature__ = signature.replace(parameters=kept + shown)  # type: ignore[attr-defined]
    return checked


def draw_options(options: DrawOptions | None = None, **changes: Any) -> DrawOptions:
    """``options`` (default: ``DrawOptions()``) with the fields named in ``changes`` replaced,
    checked. An unknown name is a TypeError listing the known ones."""
    unknown = sorted(set(changes) - set(FIELDS))
    if unknown:
        raise TypeError(f"unknown drawing option(s) {', '.join(unknown)}: use {', '.join(FIELDS)}")
    if options is None:
        return DrawOptions(**changes)
    return dataclasses.replace(options, **changes) if changes else options
