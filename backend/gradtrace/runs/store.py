"""A watched run on disk: one SQLite database in WAL mode, written while training runs.

``RUN_DIR/run.sqlite`` (rank ``r`` > 0 of a distributed run: ``run-rank{r}.sqlite``). Each
logged step is one transaction, committed when the step is written: a process killed at any
moment loses at most the step in flight, and readers (``load_run``, ``gradtrace view``) see
every committed step while training goes on (WAL: readers never block the writer).

Schema (version 1)::

    meta(key TEXT PRIMARY KEY, value TEXT)          format, every, model, torch, started
    nodes(id INTEGER PRIMARY KEY, key TEXT UNIQUE,  one row per grad_fn node ever seen; key =
          module TEXT, op TEXT, ordinal TEXT,         "module/op#ordinal", e.g.
          param TEXT, first_step INTEGER)             "layers.3/AddmmBackward0#0"; param: the
                                                      parameter of an AccumulateGrad node
    parameters(id INTEGER PRIMARY KEY, name TEXT UNIQUE, shape TEXT, numel INTEGER)
    steps(step INTEGER PRIMARY KEY, loss REAL,      one row per logged step; loss NULL: no
          seconds REAL, stepped INTEGER,              loss seen, the text 'NaN': a NaN loss
                                                      (SQLite stores a NaN REAL as NULL);
                                                      seconds since the run began;
          node_ids BLOB, grad_in BLOB,                stepped: an optimizer stepped after it
          grad_out BLOB, zero_frac BLOB,
          nan BLOB, inf BLOB,
          param_ids BLOB, param_grad BLOB,
          param_norm BLOB, update_ratio BLOB,
          param_nan BLOB, param_inf BLOB)
    flags(id INTEGER PRIMARY KEY, kind TEXT, step INTEGER, node TEXT, message TEXT)
    edges(src INTEGER, dst INTEGER)                 the graph: node src passes a gradient to dst
                                                      (ids of ``nodes``; every edge ever seen)
    traces(step INTEGER PRIMARY KEY, reason TEXT,   full gradtrace traces (TraceDoc JSON, as
           trace BLOB)                                 ``gradtrace.Trace.save`` writes it)

The blobs are little-endian arrays, one element per node (per parameter), 4 bytes each:
``node_ids``/``param_ids`` uint32 ids (nodes in the engine's order of that step: the order
of the backward itself; parameters that had a gradient), ``nan``/``inf``/``param_nan``/
``param_inf`` int32, every other one float32: ``grad_in`` the norm of the gradients flowing
into the node (w.r.t. its forward outputs; an undefined one counts as zero), ``grad_out`` of
those it passes on (an AccumulateGrad node: the gradient it accumulates), ``zero_frac`` the
fraction of zeros a ReLU-like node passes back (NaN for other nodes), ``param_grad`` the
norm of ``p.grad`` (as ``p.grad.norm()``), ``param_norm`` of the weight before the
optimizer's step, ``update_ratio`` ‖Δw‖/‖w‖ (NaN: no optimizer step). ``nan``/``inf``: how
many of the node's outgoing gradients hold a NaN / an inf, read from their norms (a NaN
norm: a NaN; an infinite one: an inf, or values whose norm overflows); ``param_nan``/
``param_inf`` the same of ``p.grad`` (0 or 1). Element counts are in the full trace the
``nonfinite`` flag arms. A logged step costs 4 bytes per quantity.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gradtrace.runs.flags import Flag

FORMAT = "gradtrace-run/1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, module TEXT NOT NULL, op TEXT NOT NULL,
    ordinal TEXT NOT NULL, param TEXT, first_step INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS parameters (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, shape TEXT NOT NULL, numel INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS steps (
    step INTEGER PRIMARY KEY, loss REAL, seconds REAL NOT NULL, stepped INTEGER NOT NULL,
    node_ids BLOB NOT NULL, grad_in BLOB NOT NULL, grad_out BLOB NOT NULL, zero_frac BLOB NOT NULL,
    nan BLOB NOT NULL, inf BLOB NOT NULL, param_ids BLOB NOT NULL, param_grad BLOB NOT NULL,
    param_norm BLOB NOT NULL, update_ratio BLOB NOT NULL, param_nan BLOB NOT NULL,
    param_inf BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS flags (
    id INTEGER PRIMARY KEY, kind TEXT NOT NULL, step INTEGER NOT NULL, node TEXT, message TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS traces (step INTEGER PRIMARY KEY, reason TEXT NOT NULL, trace BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS edges (src INTEGER NOT NULL, dst INTEGER NOT NULL, PRIMARY KEY (src, dst)) WITHOUT ROWID;
"""

_F32 = np.dtype("<f4")
_I32 = np.dtype("<i4")
_U32 = np.dtype("<u4")
_BLOBS = {
    "node_ids": _U32, "grad_in": _F32, "grad_out": _F32, "zero_frac": _F32, "nan": _I32,
    "inf": _I32, "param_ids": _U32, "param_grad": _F32, "param_norm": _F32,
    "update_ratio": _F32, "param_nan": _I32, "param_inf": _I32,
}  # fmt: skip


# The runs this process started writing while ``collect_runs`` is open (None: not collecting).
_started_runs: list[Path] | None = None


@contextmanager
def collect_runs() -> Iterator[list[Path]]:
    """A list that fills with the directory of each run started inside the block, in order
    (the service's jail: the runs a pasted program wrote, wherever it put them)."""
    global _started_runs
    outer, _started_runs = _started_runs, []
    try:
        yield _started_runs
    finally:
        _started_runs = outer


def database_path(run_dir: str | Path, rank: int = 0) -> Path:
    return Path(run_dir) / ("run.sqlite" if rank == 0 else f"run-rank{rank}.sqlite")


@dataclass(frozen=True)
class NodeInfo:
    """A grad_fn node of the run: ``key`` ("module/op#ordinal", the same at every step),
    the ``module`` path that made it ("(model)" the watched model's own forward, "(loss)"
    after it), its ``op`` (``AddmmBackward0``) and, for an AccumulateGrad node, ``param``."""

    key: str
    module: str
    op: str
    ordinal: str
    param: str | None = None


Numbers = Sequence[float] | Sequence[int] | np.ndarray  # (lists, or the arrays the engine read)


@dataclass
class StepRecord:
    """One logged step as the engine read it: per node in the engine's order and per
    parameter that had a gradient (see the schema for each quantity)."""

    step: int
    loss: float | None
    stepped: bool
    nodes: list[NodeInfo]
    grad_in: Numbers
    grad_out: Numbers
    zero_frac: list[float | None]
    nan: Numbers
    inf: Numbers
    params: list[str]
    param_grad: Numbers
    param_norm: Numbers
    update_ratio: list[float | None]
    param_nan: Numbers
    param_inf: Numbers
    edges: list[tuple[str, str]] = field(default_factory=list)


class RunWriter:
    """Writes a run: one transaction per logged step. Memory: the node and parameter ids
    (bounded by the model), never the steps."""

    def __init__(
        self, run_dir: str | Path, meta: dict[str, Any], params: Sequence[tuple[str, str, int]], rank: int = 0
    ) -> None:
        path = database_path(run_dir, rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            raise FileExistsError(f"{path} already holds a run: watch a new directory")
        self.path = path
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # WAL: a killed process loses no commit
        self._started = time.monotonic()
        self._db.executescript(_SCHEMA)  # (executescript commits on its own)
        with self._transaction():
            rows = {"format": FORMAT, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
            rows.update({k: json.dumps(v) if not isinstance(v, str) else v for k, v in meta.items()})
            self._db.executemany("INSERT INTO meta VALUES (?, ?)", rows.items())
            self._db.executemany("INSERT INTO parameters (name, shape, numel) VALUES (?, ?, ?)", params)
        self._param_ids = {name: i for i, name in self._db.execute("SELECT id, name FROM parameters")}
        self._node_ids: dict[str, int] = {}
        self._edges: set[tuple[int, int]] = set()
        self._last_nodes: tuple[list[NodeInfo], list[int]] = ([], [])
        if _started_runs is not None and rank == 0:
            _started_runs.append(Path(run_dir))

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)

    def write_step(self, record: StepRecord, flags: Sequence[Flag] = ()) -> None:
        with self._transaction():
            if record.nodes == self._last_nodes[0]:  # (the same nodes in the same order: most steps)
                ids = self._last_nodes[1]
            else:
                ids = []
                for node in record.nodes:
                    nid = self._node_ids.get(node.key)
                    if nid is None:
                        cur = self._db.execute(
                            "INSERT INTO nodes (key, module, op, ordinal, param, first_step) VALUES (?, ?, ?, ?, ?, ?)",
                            (node.key, node.module, node.op, node.ordinal, node.param, record.step),
                        )
                        nid = self._node_ids[node.key] = int(cur.lastrowid or 0)
                    ids.append(nid)
                self._last_nodes = (list(record.nodes), ids)
            nan = float("nan")
            blobs: dict[str, Any] = {
                "node_ids": ids, "grad_in": record.grad_in, "grad_out": record.grad_out,
                "zero_frac": [nan if z is None else z for z in record.zero_frac],
                "nan": record.nan, "inf": record.inf,
                "param_ids": [self._param_ids[p] for p in record.params],
                "param_grad": record.param_grad, "param_norm": record.param_norm,
                "update_ratio": [nan if r is None else r for r in record.update_ratio],
                "param_nan": record.param_nan, "param_inf": record.param_inf,
            }  # fmt: skip
            cols = list(_BLOBS)
            self._db.execute(
                f"INSERT INTO steps (step, loss, seconds, stepped, {', '.join(cols)}) "
                f"VALUES (?, ?, ?, ?, {', '.join('?' * len(cols))})",
                [record.step, _loss_cell(record.loss), time.monotonic() - self._started, int(record.stepped)]
                + [_pack(blobs[c], _BLOBS[c]) for c in cols],
            )
            new_edges = {(self._node_ids[a], self._node_ids[b]) for a, b in record.edges} - self._edges
            if new_edges:
                self._db.executemany("INSERT OR IGNORE INTO edges VALUES (?, ?)", sorted(new_edges))
                self._edges |= new_edges
            self._insert_flags(flags)

    def write_flags(self, flags: Sequence[Flag]) -> None:
        """Flags of their own (the watch's ``no_full_trace``), beside the steps'."""
        with self._transaction():
            self._insert_flags(flags)

    def _insert_flags(self, flags: Sequence[Flag]) -> None:
        self._db.executemany(
            "INSERT INTO flags (kind, step, node, message) VALUES (?, ?, ?, ?)",
            [(f.kind, f.step, f.node, f.message) for f in flags],
        )

    def write_trace(self, step: int, reason: str, trace: bytes) -> None:
        with self._transaction():
            self._db.execute("INSERT OR REPLACE INTO traces VALUES (?, ?, ?)", (step, reason, trace))

    def close(self) -> None:
        self._db.close()


def _pack(values: Sequence[Any], dtype: np.dtype) -> bytes:
    return np.asarray(values, dtype=dtype).tobytes()


def _unpack(blob: bytes, dtype: np.dtype) -> np.ndarray:
    return np.frombuffer(blob, dtype=dtype)


class Run:
    """A recorded run, read from ``RUN_DIR`` (while it is still being written, too: each call
    reads what is committed now).

    Series (``grad_norm``, ``node_grad_norm``, ``loss``, …) are lists aligned with ``steps``;
    ``None`` where the step had no gradient there (the node did not run, the parameter had
    no gradient)."""

    def __init__(self, run_dir: str | Path, rank: int = 0) -> None:
        path = database_path(run_dir, rank)
        self._rank = rank
        if not path.is_file():
            raise FileNotFoundError(f"no run at {run_dir} (no {path.name}): gradtrace.watch writes one")
        self.path = path
        self._db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self.meta = dict(self._db.execute("SELECT key, value FROM meta"))
        if self.meta.get("format") != FORMAT:
            raise ValueError(f"{path}: not a {FORMAT} file (format {self.meta.get('format')!r})")

    @property
    def ranks(self) -> list[int]:
        """The ranks of a distributed run that recorded here (``[0]`` for one process). Each
        rank records its own file after the gradients' all-reduce: the parameters' numbers
        are the same on every rank, and this Run (rank 0's) shows them; ``rank(r)`` reads
        rank r's (its own nodes' local gradients)."""
        found = [0] + sorted(
            int(p.stem.removeprefix("run-rank"))
            for p in self.path.parent.glob("run-rank*.sqlite")
            if p.stem[8:].isdigit()
        )
        return found

    def rank(self, r: int) -> Run:
        return self if r == self._rank else Run(self.path.parent, r)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    # ---- what the run holds ----------------------------------------------------------------
    @property
    def steps(self) -> list[int]:
        """The logged steps (0-based; a step is one backward pass through the model)."""
        return [s for (s,) in self._db.execute("SELECT step FROM steps ORDER BY step")]

    @property
    def loss(self) -> list[float | None]:
        return [_loss_of_cell(v) for (v,) in self._db.execute("SELECT loss FROM steps ORDER BY step")]

    @property
    def nodes(self) -> list[NodeInfo]:
        rows = self._db.execute("SELECT key, module, op, ordinal, param FROM nodes ORDER BY id")
        return [NodeInfo(*row) for row in rows]

    @property
    def parameters(self) -> list[str]:
        return [n for (n,) in self._db.execute("SELECT name FROM parameters ORDER BY id")]

    @property
    def flags(self) -> list[Flag]:
        rows = self._db.execute("SELECT kind, step, node, message FROM flags ORDER BY step, id")
        return [Flag(*row) for row in rows]

    @property
    def edges(self) -> list[tuple[str, str]]:
        """The graph: (node key, the key of a node it passes a gradient to), every edge seen."""
        rows = self._db.execute(
            "SELECT a.key, b.key FROM edges JOIN nodes a ON a.id = edges.src JOIN nodes b ON b.id = edges.dst "
            "ORDER BY edges.src, edges.dst"
        )
        return [(a, b) for a, b in rows]

    @property
    def trace_steps(self) -> dict[int, str]:
        """Steps with a full trace saved, and why ("first" logged step, "flag: <kind>")."""
        return dict(self._db.execute("SELECT step, reason FROM traces ORDER BY step"))

    def trace_bytes(self, step: int) -> bytes:
        """The full trace saved at ``step`` (TraceDoc JSON: ``gradtrace.Trace.load`` reads it
        from a file)."""
        row = self._db.execute("SELECT trace FROM traces WHERE step = ?", (step,)).fetchone()
        if row is None:
            raise KeyError(f"no full trace at step {step}: saved at {sorted(self.trace_steps)}")
        return bytes(row[0])

    # ---- series ----------------------------------------------------------------------------
    def grad_norm(self, param: str) -> list[float | None]:
        """The norm of ``param``'s gradient at each logged step (as ``p.grad.norm()``)."""
        return self._series(self._param_id(param), "param_ids", "param_grad")

    def param_norm(self, param: str) -> list[float | None]:
        return self._series(self._param_id(param), "param_ids", "param_norm")

    def update_ratio(self, param: str) -> list[float | None]:
        """‖Δw‖/‖w‖ after each logged step's optimizer step (None: no step)."""
        return self._series(self._param_id(param), "param_ids", "update_ratio")

    def node_grad_norm(self, node: str, which: str = "out") -> list[float | None]:
        """The norm of the gradient a node passes on (``which="out"``) or receives ("in") at
        each logged step; ``node``: its key (see ``nodes``)."""
        if which not in ("in", "out"):
            raise ValueError(f"which must be 'in' or 'out', got {which!r}")
        return self._series(self._node_id(node), "node_ids", "grad_" + which)

    def node_zero_fraction(self, node: str) -> list[float | None]:
        return self._series(self._node_id(node), "node_ids", "zero_frac")

    def node_nonfinite(self, node: str) -> list[int | None]:
        nan = self._series(self._node_id(node), "node_ids", "nan")
        inf = self._series(self._node_id(node), "node_ids", "inf")
        return [None if a is None or b is None else int(a + b) for a, b in zip(nan, inf, strict=True)]

    def step_values(self, step: int) -> dict[str, Any]:
        """Every number of one logged step: ``{"loss", "nodes": {key: {...}}, "params": {...}}``."""
        cols = list(_BLOBS)
        row = self._db.execute(
            f"SELECT loss, stepped, {', '.join(cols)} FROM steps WHERE step = ?", (step,)
        ).fetchone()
        if row is None:
            raise KeyError(f"step {step} was not logged")
        arrays = {c: _unpack(b, _BLOBS[c]) for c, b in zip(cols, row[2:], strict=True)}
        keys = dict(self._db.execute("SELECT id, key FROM nodes"))
        names = dict(self._db.execute("SELECT id, name FROM parameters"))
        nodes = {
            keys[int(i)]: {
                q: _number(arrays[q][k], q) for q in ("grad_in", "grad_out", "zero_frac", "nan", "inf")
            }
            for k, i in enumerate(arrays["node_ids"])
        }
        params = {
            names[int(i)]: {
                q: _number(arrays[q][k], q)
                for q in ("param_grad", "param_norm", "update_ratio", "param_nan", "param_inf")
            }
            for k, i in enumerate(arrays["param_ids"])
        }
        return {
            "step": step,
            "loss": _loss_of_cell(row[0]),
            "stepped": bool(row[1]),
            "nodes": nodes,
            "params": params,
        }

    def to_pandas(self) -> Any:
        """One row per (step, node or parameter): columns step, kind ("node"/"param"), name,
        grad_in, grad_out, zero_frac, nan, inf, grad_norm, param_norm, update_ratio, loss.
        Needs pandas (not a dependency of gradtrace: ``pip install gradtrace[watch]``)."""
        try:
            import pandas as pd
        except ImportError as exc:  # (an optional extra)
            raise ImportError("run.to_pandas needs the pandas package: pip install pandas") from exc

        rows: list[dict[str, Any]] = []
        for step in self.steps:
            v = self.step_values(step)
            for key, q in v["nodes"].items():
                rows.append({"step": step, "kind": "node", "name": key, **q, "loss": v["loss"]})
            for name, q in v["params"].items():
                rows.append({
                    "step": step, "kind": "param", "name": name, "grad_norm": q["param_grad"],
                    "param_norm": q["param_norm"], "update_ratio": q["update_ratio"],
                    "nan": q["param_nan"], "inf": q["param_inf"], "loss": v["loss"],
                })  # fmt: skip
        return pd.DataFrame(rows)

    def to_tensorboard(self, logdir: str | Path) -> Path:
        """TensorBoard event files of the run's scalars (see ``gradtrace.runs.export``)."""
        from gradtrace.runs.export import to_tensorboard

        return to_tensorboard(self, logdir)

    def to_wandb(self) -> list[dict[str, Any]]:
        """``wandb.log``-ready dicts, one per logged step (see ``gradtrace.runs.export``)."""
        from gradtrace.runs.export import to_wandb

        return to_wandb(self)

    # ---- helpers ---------------------------------------------------------------------------
    def _param_id(self, name: str) -> int:
        row = self._db.execute("SELECT id FROM parameters WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise KeyError(f"no parameter {name!r} in the run (see .parameters)")
        return int(row[0])

    def _node_id(self, key: str) -> int:
        row = self._db.execute("SELECT id FROM nodes WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise KeyError(f"no node {key!r} in the run (see .nodes)")
        return int(row[0])

    def _series(self, wanted: int, ids_col: str, col: str) -> list[Any]:
        out: list[Any] = []
        for ids, values in self._db.execute(f"SELECT {ids_col}, {col} FROM steps ORDER BY step"):
            where = np.flatnonzero(_unpack(ids, _U32) == wanted)
            out.append(None if where.size == 0 else _number(_unpack(values, _BLOBS[col])[where[0]], col))
        return out


_NAN_MEANS_NONE = ("zero_frac", "update_ratio")  # (a NaN norm elsewhere is a real NaN)


def _loss_cell(loss: float | None) -> float | str | None:
    """The loss as the steps table keeps it: SQLite would store a NaN REAL as NULL ("no loss
    seen"), so a NaN is written as the text 'NaN'."""
    return "NaN" if loss is not None and loss != loss else loss


def _loss_of_cell(value: Any) -> float | None:
    return float("nan") if value == "NaN" else value


def _number(x: Any, col: str) -> Any:
    """A blob's element as a Python number; None where ``col`` stores "none" as NaN."""
    value = x.item()
    if col in _NAN_MEANS_NONE and value != value:
        return None
    return value


def load_run(run_dir: str | Path) -> Run:
    """The run ``gradtrace.watch`` writes (or is writing) in ``run_dir``."""
    return Run(run_dir)


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on an exception). One class, not one made
    per step: a class is a reference cycle, freed only by the cyclic collector, so a class per
    step grew the writer's memory between collections."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: Any, *_: Any) -> None:
        self._db.execute("COMMIT" if kind is None else "ROLLBACK")
