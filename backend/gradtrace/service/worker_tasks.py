"""What runs inside a worker process. Importing this module does not import torch.

The worker's forkserver preloads ``gradtrace.engine`` (torch), so the imports below are
instant there; in the API process this module is only referenced by name for pickling.

Every task returns its result (bytes) or the ``Problem`` refusing it instead of raising: a
Problem pickles with every field (``gradtrace.problem``), and nothing else crosses the process
boundary (another exception that failed to unpickle would look like a crash).
"""

from __future__ import annotations

import logging
import os
import resource
import time
from typing import TYPE_CHECKING, NoReturn

from gradtrace.problem import Problem
from gradtrace.service import worker_warmup

if TYPE_CHECKING:
    from gradtrace.spec import ModelSpec

log = logging.getLogger(__name__)

# A worker that ran out of memory exits with this code instead of answering: its heap may
# be fragmented past the cap (later small traces would fail too), so it is replaced, and the
# API tells the client the trace needed too much memory (413).
EXIT_OUT_OF_MEMORY = 75

# Set by the initializer: extra CPU seconds each task may use, and a debug delay (tests only).
_task_cpu_s: int = 0
_task_memory_mb: int = 0
_debug_delay_s: float = 0.0


def init_worker(memory_mb: int, cpu_s: int, debug_delay_s: float = 0.0) -> None:
    """Worker start: one torch thread, a warm engine, then the per-task budgets."""
    global _task_cpu_s, _task_memory_mb, _debug_delay_s
    try:
        import torch  # noqa: TID251 - worker process only; preloaded by the forkserver

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover - engine missing: tasks will report it
        log.warning("torch not importable in worker")
    # Before any budget is armed, so the memory cap measures traces, not torch's set-up.
    worker_warmup.warm_up(run_trace)
    _task_cpu_s = cpu_s
    _task_memory_mb = memory_mb
    _debug_delay_s = debug_delay_s


def _vm_size_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _arm_memory_budget() -> None:
    """Each task may map ``_task_memory_mb`` more than the worker holds when it starts.

    Measured per task, not once at start-up: what a worker keeps mapped grows a little with
    the tasks it has run (malloc arenas, caches), and a cap fixed at start-up would then
    starve small traces too. Workers are recycled every few hundred tasks, which bounds it.
    Only the soft limit moves; the hard one stays where it was so it can move again.
    """
    if _task_memory_mb <= 0:
        return
    limit = _vm_size_bytes() + _task_memory_mb * 1024 * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _lift_memory_budget() -> None:
    """Lift the cap for serialising a finished trace.

    The cap guards the computation; the JSON's size is bounded by the engine's value budget.
    Encoding it (msgspec, ``Trace.to_json_bytes``) past the cap would throw a finished trace
    away for a MemoryError that says nothing about the spec.
    """
    if _task_memory_mb <= 0:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (hard, hard))


def _arm_cpu_budget() -> None:
    """RLIMIT_CPU counts the process's whole life: re-arm it at used + budget per task."""
    if _task_cpu_s <= 0:
        return
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    soft = used + _task_cpu_s
    # Only the soft limit moves (SIGXCPU ends the worker): an unprivileged process may lower
    # its hard limit but never raise it again, and workers run many tasks.
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def ping() -> int:
    """Readiness probe: a worker answered, and here is its pid."""
    return os.getpid()


def _exit_out_of_memory() -> NoReturn:
    log.warning("worker out of memory: exiting to be replaced")
    os._exit(EXIT_OUT_OF_MEMORY)


def _begin_task() -> None:
    """Every task runs under the CPU and memory budgets (and the tests' delay, when set)."""
    _arm_cpu_budget()
    _arm_memory_budget()
    if _debug_delay_s:
        time.sleep(_debug_delay_s)


def run_trace(spec: ModelSpec) -> bytes | Problem:
    """Trace a spec the API process parsed and priced (``api/body.py``): it arrives as the
    ModelSpec itself, pickled across the pipe, and is not parsed or validated again here.

    What runs here is what needs torch, which the API process never imports: ``run_spec``'s
    dry run on the meta device (shapes, nodes, memory), then the trace. ``run_spec`` also
    repeats the price check (cheap), kept on purpose: it is the engine's own guard for
    every caller, and this process, not the API's, is the one a costly spec would hold.

    Returns the trace's JSON bytes or the Problem refusing the spec (the engine's own, pickled
    back as it is). Exits with EXIT_OUT_OF_MEMORY instead of answering when memory ran out.
    """
    _begin_task()
    from gradtrace.engine import run_spec
    from gradtrace.spec import SpecLimits
    from gradtrace.trace import Trace

    limits = SpecLimits()
    try:
        doc = run_spec(spec, limits)  # limits first (declared shapes, meta dry run), then the trace
        _lift_memory_budget()
        return Trace(doc).to_json_bytes()  # the engine's TraceDoc, encoded once
    except Problem as exc:
        if exc.exception == "MemoryError":  # the engine wraps forward errors
            _exit_out_of_memory()
        return exc
    except MemoryError:
        _exit_out_of_memory()
    except RecursionError:
        return Problem("too_deep", "the model is nested too deeply to trace")
    except Exception as exc:  # an engine failure the spec checks did not foresee: a bug of ours
        log.exception("trace failed")
        message = f"the trace failed inside gradtrace ({type(exc).__name__}); the spec may be fine"
        return Problem("trace_failed", message)


def run_compare(trace_a: bytes, trace_b: bytes, permalinks: dict[str, str]) -> bytes | Problem:
    """Compare two traces (JSON bytes; ``a`` the baseline): the CompareDoc's JSON bytes or the
    Problem saying why not. ``permalinks``: the permalink id of each side given as one ("a"/"b").

    Under the same CPU and memory budgets as a trace; the traces were made by the engine, so
    anything raised here is a bug of ours, answered as an envelope, not a crash.
    """
    _begin_task()
    from gradtrace.comparison import compare
    from gradtrace.trace import Trace

    try:
        diff = compare(Trace.from_json(trace_a), Trace.from_json(trace_b))
        for side, spec_id in permalinks.items():
            getattr(diff, side).permalink = spec_id
        _lift_memory_budget()
        return diff.model_dump_json().encode()
    except MemoryError:
        _exit_out_of_memory()
    except Exception as exc:
        log.exception("compare failed")
        message = f"the comparison failed inside gradtrace ({type(exc).__name__})"
        return Problem("compare_failed", message)
