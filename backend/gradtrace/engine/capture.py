"""The one capture: ``record()``, ``trace()`` and a spec run are each a block of code run
inside a ``Capture``, the same entry, the same ending, the same assembly.

* ``start``: one capture at a time in a thread (``one_capture``), Python's GC paused (see
  gc_paused), the session made (its hooks on) and its block begun (``record()``'s
  session: the discovery mode on for the whole block).
* the block: the program as written (``record()``, the passes found as it runs: session.py);
  ``trace()``'s forward and backward (run.py); a spec's program and steps (spec_capture.py),
  each a program the same session runs (its forward declared, as ``trace()``'s is; its
  ``backward`` and ``grad`` steps found as a program's engine runs).
* ``finish``: the block's end (``TraceSession.end_block``: passes left open ended, names
  read), then the one assembly (assemble.py) and the final gradients.

The caller's own code (``trace()``, ``record()``) gets PyTorch's exception unchanged, with the
trace recorded up to it attached (``attach_partial``), and its warnings issued again after
the trace. A spec run's errors are the spec's (SpecError, raised as they are) and its warnings
stay in its diagnostics.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

from gradtrace.engine.assemble import assemble_trace, final_grad_arrays
from gradtrace.engine.caller_warnings import reissue
from gradtrace.engine.errors import TraceError, UnreadableTensor
from gradtrace.engine.graph_walk import release_newest_first
from gradtrace.engine.session import TraceSession
from gradtrace.trace_schema import TraceDoc

Source = Literal["spec", "module", "program"]
Session = TypeVar("Session", bound=TraceSession)


def with_partial(exc: BaseException) -> bool:
    """An exception that comes with the trace recorded up to it (an ``error`` event where it
    broke): the model's or PyTorch's, or gradtrace's refusal of a tensor it cannot read
    (not a limit: a limit's partial trace would be as big as what it refused)."""
    return not isinstance(exc, TraceError) or isinstance(exc, UnreadableTensor)


def attach_partial(
    exc: Exception, session: TraceSession, source: Source, title: str, want_grads: bool
) -> None:
    """What was recorded up to the exception, as ``exc.gradtrace_partial``: (the trace, its
    final gradients or None), for the library to attach as ``exc.gradtrace_trace``.
    The exception itself stays exactly PyTorch's (or the model's): same object, type and
    message. The warnings recorded until then are issued first, as a plain run showed them."""
    try:
        doc, final_grads, _warnings = assemble_trace(session, source=source, spec=None, title=title)
        grads = final_grad_arrays(final_grads, in_trace=doc.grads) if want_grads else None
    except Exception as failure:  # noqa: BLE001 - the model's exception is what is raised
        exc.add_note(f"gradtrace could not assemble the partial trace: {type(failure).__name__}: {failure}")
    else:
        exc.gradtrace_partial = (doc, grads)  # type: ignore[attr-defined]
    session.reissue_warnings()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic GC off for a whole trace, the user's setting restored exactly after.

    A trace allocates several containers per node: with the GC on, its allocations keep
    triggering collections, and the older generations' collections rescan everything the
    capture built so far (they grow with the trace and can cost more than the capture
    itself). Nothing a
    trace builds is cyclic garbage (tests/engine/test_gc.py), so the session and everything
    it held are freed by reference counting: drop them inside the pause, and the first
    collection after it sees only the trace that is kept, not the session's objects too.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_capturing = threading.local()  # .what: the capture running in this thread (see one_capture)


def refuse_inside_capture(what: str) -> None:
    """RuntimeError, naming both, when a capture runs in this thread (see one_capture): for
    ``what`` to say before it does anything (a spec run's dry run would otherwise run under
    the outer capture's hooks)."""
    running = getattr(_capturing, "what", None)
    if running is not None:
        raise RuntimeError(
            f"{what} cannot start inside {running}: gradtrace records one program at a time "
            "(end the outer one first, or record the whole program once)"
        )


@contextmanager
def one_capture(what: str) -> Iterator[None]:
    """A capture runs inside this block: ``trace()``, ``record()`` or a spec run started
    inside it (in the same thread) raises RuntimeError, naming both. gradtrace records one
    program at a time: a capture inside another would hook the same nodes and modules twice."""
    refuse_inside_capture(what)
    _capturing.what = what
    try:
        yield
    finally:
        _capturing.what = None


class Capture:
    """One block's capture: ``start(make_session)`` as it begins, ``finish(exc)`` as it ends
    (or ``run(make_session, block)`` for a block that is a function of the session)."""

    def __init__(
        self,
        what: str,
        source: Source,
        title: str,
        *,
        spec: dict[str, Any] | None = None,
        want_grads: bool = True,
        callers_code: bool = True,
    ) -> None:
        """``what``: the entry, as an error naming it says (``gradtrace.trace()``).
        ``want_grads``: the final gradients as numpy arrays too. ``callers_code``: the block
        is the caller's own code (see the module's docstring)."""
        self.what = what
        self.source = source
        self.title = title
        self.spec = spec
        self.want_grads = want_grads
        self.callers_code = callers_code
        self.session: TraceSession | None = None
        self._held: Any = None
        self._gc_was_enabled = False

    def start(self, make_session: Callable[[], Session]) -> Session:
        """The capture is on: the session made, its block begun."""
        held = one_capture(self.what)
        held.__enter__()
        self._held = held
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            session = make_session()
            self.session = session
            session.begin_block()
        except BaseException:
            if self.session is not None:
                self.session.close()
                self.session = None
            self._release()
            raise
        return session

    def finish(self, exc: BaseException | None) -> tuple[TraceDoc, dict[str, Any] | None] | None:
        """The block ended (``exc``: how, None when it ran to its end): the capture comes off.
        Returns the trace and its final gradients (None unless ``want_grads``); with ``exc``,
        None (the partial trace attached to the caller's exception, see attach_partial)."""
        session = self.session
        assert session is not None
        # the graph, held here until the session is gone, then let go newest node first (see
        # graph_walk.release_newest_first: the session's dicts would free it oldest first)
        graph = session.recorder.autograd_nodes()
        partial = self.callers_code and isinstance(exc, Exception) and with_partial(exc)
        try:
            session.end_block(exc if partial else None)
            if exc is not None:
                session.close()  # (nothing of gradtrace's stays on the model; assembling closes it too)
                if partial:
                    assert isinstance(exc, Exception)
                    attach_partial(exc, session, self.source, self.title, self.want_grads)
                return None
            doc, final_grads, block_warnings = assemble_trace(
                session, source=self.source, spec=self.spec, title=self.title
            )
            # (the session's last reference: what it held for its records, every intermediate
            # tensor it summarised, hundreds of MB on a big model, is freed here by reference
            # counting, before the gradients are copied, not held at once with those copies)
            self.session = None
            del session
            release_newest_first(graph)
            grads = (
                final_grad_arrays(final_grads, in_trace=doc.grads if self.callers_code else None)
                if self.want_grads
                else None
            )
            if self.callers_code:
                reissue(block_warnings)
            return doc, grads
        finally:
            if self.session is not None:
                self.session.close()
                self.session = None
            session = None  # noqa: F841 - this frame's reference too: `graph` is the graph's last holder
            release_newest_first(graph)
            self._release()

    def run(
        self, make_session: Callable[[], Session], block: Callable[[Session], Any]
    ) -> tuple[TraceDoc, dict[str, Any] | None]:
        """``block(session)`` captured from start to finish: the trace and its gradients."""
        session = self.start(make_session)
        try:
            block(session)
        except BaseException as exc:
            self.finish(exc)
            raise
        del session
        result = self.finish(None)
        assert result is not None
        return result

    def _release(self) -> None:
        """The GC pause and the one-capture hold end."""
        held, self._held = self._held, None
        if held is not None:
            held.__exit__(None, None, None)
        if self._gc_was_enabled:
            gc.enable()
