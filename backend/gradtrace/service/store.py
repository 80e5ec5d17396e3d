"""Permalinks: durable storage of specs by short content id, on SQLite or PostgreSQL.

One code path for both: portable SQL (``INSERT … ON CONFLICT DO NOTHING`` exists in SQLite
≥ 3.24 and PostgreSQL ≥ 9.5), ``?`` placeholders translated for psycopg, TEXT columns. The
connection is opened lazily and reopened once after a failure (a restarted database).
Storing is idempotent: the id is derived from the normalised spec, so the same spec stored
twice is one row.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS permalinks (
    id TEXT PRIMARY KEY,
    spec_hash TEXT NOT NULL,
    spec TEXT NOT NULL,
    created_at TEXT NOT NULL
)
"""
# Specs whose trace ran past the deadline, by trace key (the spec's hash salted with the
# engine's versions): every replica refuses them at once afterwards, permalinks included.
_COSTLY_SCHEMA = """
CREATE TABLE IF NOT EXISTS costly_traces (
    trace_key TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    created_at TEXT NOT NULL
)
"""


# Who stored what, for the storage quotas: one row per stored permalink (the client that
# created it and the bytes of its spec). Rows are never removed: nothing stored is deleted to
# make room; a client over its quota is refused until its day's window moves on.
_OWNERS_SCHEMA = """
CREATE TABLE IF NOT EXISTS permalink_bytes (
    id TEXT PRIMARY KEY,
    client TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    created_at TEXT NOT NULL
)
"""
QUOTA_WINDOW = timedelta(days=1)


class QuotaExceeded(Exception):
    """Storing this spec would pass a storage quota: ``quota`` is "client" or "total"."""

    def __init__(self, quota: str, limit: int) -> None:
        super().__init__(quota)
        self.quota = quota
        self.limit = limit


@dataclass(frozen=True)
class Quotas:
    """Bytes of stored specs: per client in any day (0: no bound), and in total (0: no bound)."""

    client_bytes_per_day: int = 0
    total_bytes: int = 0


class StoreUnavailable(Exception):
    """The database cannot be reached: the API answers 503, the data is not lost."""


class SpecStore:
    def __init__(self, database_url: str | None, sqlite_path: Path) -> None:
        self._url = database_url
        self._sqlite_path = sqlite_path
        self._lock = threading.Lock()
        self._conn: Any = None
        self.backend = "postgresql" if database_url else "sqlite"

    # -- connection ---------------------------------------------------------------------------
    def _connect(self) -> Any:
        if self._url:
            import psycopg

            conn: Any = psycopg.connect(self._url, autocommit=True, connect_timeout=5)
        else:
            self._sqlite_path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self._sqlite_path, timeout=10, check_same_thread=False, isolation_level=None
            )
            conn.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(_SCHEMA)
        conn.execute(_COSTLY_SCHEMA)
        conn.execute(_OWNERS_SCHEMA)
        return conn

    def _sql(self, query: str) -> str:
        return query.replace("?", "%s") if self._url else query

    def _run(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            for attempt in (1, 2):
                try:
                    if self._conn is None:
                        self._conn = self._connect()
                    cur = self._conn.execute(self._sql(query), params)
                    return list(cur.fetchall()) if cur.description else []
                except Exception as exc:
                    self._drop()
                    if attempt == 2 or not _is_connection_error(exc):
                        log.warning("permalink store error: %s", exc)
                        raise StoreUnavailable(str(exc)) from exc
            raise AssertionError("unreachable")

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None

    # -- operations ------------------------------------------------------------------------------
    def put(
        self,
        spec_id: str,
        spec_hash: str,
        spec: dict[str, Any],
        client: str = "",
        quotas: Quotas = Quotas(),
    ) -> bool:
        """Store a spec; True if this call created the row, False if it existed already.

        A spec already stored costs nothing again; a new one over a quota raises QuotaExceeded.
        (Replicas check and insert apart, so concurrent writes may pass a quota by a few specs.)
        """
        text = json.dumps(spec, sort_keys=True, separators=(",", ":"), allow_nan=False)
        now = datetime.now(UTC)
        created = now.isoformat(timespec="seconds")
        existing = self._run("SELECT spec_hash FROM permalinks WHERE id = ?", (spec_id,))
        if existing:
            if existing[0][0] != spec_hash:  # a 60-bit prefix collision: never overwrite user data
                raise StoreUnavailable("permalink id collision")
            return False
        size = len(text.encode())
        if quotas.client_bytes_per_day:
            since = (now - QUOTA_WINDOW).isoformat(timespec="seconds")
            used = self._run(
                "SELECT COALESCE(SUM(bytes), 0) FROM permalink_bytes WHERE client = ? AND created_at > ?",
                (client, since),
            )[0][0]
            if int(used) + size > quotas.client_bytes_per_day:
                raise QuotaExceeded("client", quotas.client_bytes_per_day)
        if quotas.total_bytes:
            if self.stored_bytes() + size > quotas.total_bytes:
                raise QuotaExceeded("total", quotas.total_bytes)
        self._run(
            "INSERT INTO permalink_bytes (id, client, bytes, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (spec_id, client, size, created),
        )
        self._run(
            "INSERT INTO permalinks (id, spec_hash, spec, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (spec_id, spec_hash, text, created),
        )
        return True

    def stored_bytes(self) -> int:
        """Bytes of all stored specs (their JSON is ASCII: characters are bytes)."""
        return int(self._run("SELECT COALESCE(SUM(LENGTH(spec)), 0) FROM permalinks")[0][0])

    def get(self, spec_id: str) -> dict[str, Any] | None:
        rows = self._run("SELECT spec FROM permalinks WHERE id = ?", (spec_id,))
        return json.loads(rows[0][0]) if rows else None

    def mark_costly(self, trace_key: str, reason: str) -> None:
        """Remember that this trace ran past the deadline (idempotent)."""
        created = datetime.now(UTC).isoformat(timespec="seconds")
        self._run(
            "INSERT INTO costly_traces (trace_key, reason, created_at) VALUES (?, ?, ?) ON CONFLICT (trace_key) DO NOTHING",
            (trace_key, reason, created),
        )

    def costly(self, trace_key: str) -> tuple[str, str] | None:
        """(reason, when) if this trace ran past the deadline before; None otherwise."""
        rows = self._run("SELECT reason, created_at FROM costly_traces WHERE trace_key = ?", (trace_key,))
        return (rows[0][0], rows[0][1]) if rows else None

    def ping(self) -> bool:
        try:
            self._run("SELECT 1")
            return True
        except StoreUnavailable:
            return False

    def close(self) -> None:
        with self._lock:
            self._drop()


def _is_connection_error(exc: Exception) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return "locked" not in str(exc)
    try:
        import psycopg

        return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
    except ImportError:  # pragma: no cover
        return False
