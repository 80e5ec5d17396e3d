"""Showing a trace in a notebook cell at once, wherever the call is in the cell.

The output is ``page.notebook_html``: the player in an isolated iframe, gzipped, with at most
``NOTEBOOK_VALUE_BUDGET`` tensor numbers (every tensor keeps its statistics), so a cell stays
small: the layout is computed at export time, and the player's code travels once per notebook.
"""

from __future__ import annotations

from typing import Any

from gradtrace.render.node_tool import RenderUnavailable
from gradtrace.render.page import NOTEBOOK_VALUE_BUDGET

__all__ = ["NOTEBOOK_VALUE_BUDGET", "display_trace"]


def display_trace(trace: Any) -> None:
    """Display the trace's player now, through IPython's ``display`` (the cell's output)."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError as exc:
        raise RenderUnavailable(
            "gradtrace.show displays in Jupyter or IPython, which is not installed here: "
            "save the trace instead, e.g. trace.save('trace.html')"
        ) from exc
    if get_ipython() is None:
        raise RenderUnavailable(
            "gradtrace.show displays in a notebook, and this is not one: "
            "save the trace instead, e.g. trace.save('trace.html')"
        )
    display(trace)  # the Trace's _repr_html_ (the player) and its repr for plain-text front ends
