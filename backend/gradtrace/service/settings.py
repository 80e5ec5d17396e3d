"""Service settings: one frozen dataclass, read from the environment once at start-up.

Every knob has a default that works on one machine with zero set-up (SQLite file, in-process
cache, one worker per core); the compose deployment changes only environment variables.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import platformdirs

from gradtrace import frontend_files


def default_sqlite_path() -> Path:
    """The permalink database in the user's data directory (never inside site-packages).

    ``$XDG_DATA_HOME/gradtrace/gradtrace.db`` or ``~/.local/share/gradtrace/gradtrace.db`` on
    Linux, the platform's equivalent elsewhere; ``GRADTRACE_DB`` chooses another file.
    """
    return platformdirs.user_data_path("gradtrace", appauthor=False) / "gradtrace.db"


def _disk_cache_dir(env: dict[str, str], sqlite_path: Path) -> Path | None:
    """``GRADTRACE_DISK_CACHE_DIR`` (``off``: no disk tier), else ``trace-cache`` beside the
    permalink database (the user data directory by default)."""
    configured = env.get("GRADTRACE_DISK_CACHE_DIR")
    if configured is None:
        return sqlite_path.parent / "trace-cache"
    return None if configured.strip().lower() in ("", "off") else Path(configured)


def _number(env: dict[str, str], name: str, default: float, kind: type = int) -> Any:
    """An int (or float) from the environment; a malformed value is an error naming it."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return kind(raw)
    except ValueError as exc:
        what = "an integer" if kind is int else "a number"
        raise ValueError(f"environment variable {name} must be {what}, got {raw!r}") from exc


def cpu_quota(cgroup_cpu_max: Path = Path("/sys/fs/cgroup/cpu.max")) -> int:
    """The CPUs this process may use: its affinity mask, capped by a cgroup v2 CPU quota.

    ``os.cpu_count()`` is the host's count: a 2-CPU container on a 32-core host would start
    32 torch workers. ``cpu.max`` is ``"<quota> <period>"`` (or ``"max <period>"``: no quota).
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = cgroup_cpu_max.read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):  # no cgroup v2 here, or an unreadable file: the affinity stands
        pass
    return max(1, cpus)


def _int(env: dict[str, str], name: str, default: int) -> int:
    return _number(env, name, default, int)


def _float(env: dict[str, str], name: str, default: float) -> float:
    return _number(env, name, default, float)


@dataclass(frozen=True)
class Settings:
    # Where permalinks live: DATABASE_URL (postgresql://…) wins over the SQLite file path.
    database_url: str | None = None
    sqlite_path: Path = field(default_factory=default_sqlite_path)
    # Shared cache and rate limits across replicas; None: in-process.
    redis_url: str | None = None
    frontend_dir: Path = field(default_factory=frontend_files.frontend_dir)
    # Workers: one per CPU of the quota; each trace bounded in wall-clock, CPU seconds and
    # address space. A request waits at most queue_timeout_s for a free worker (then 503).
    workers: int = field(default_factory=cpu_quota)
    trace_timeout_s: float = 20.0
    queue_timeout_s: float = 8.0
    worker_cpu_s: int = 30
    worker_memory_mb: int = 2048
    queue_limit: int = 8  # traces waiting beyond the busy workers before we shed load with 503
    # One client's share (with the rate limit on): tasks on the workers at once (0: half the
    # workers, at least one) and tasks waiting for its turn beyond them; past that, 429.
    client_tasks: int = 0
    client_waiting: int = 4
    # The jail for pasted programs (POST /run): templates (one run at a time each), and each
    # run's wall-clock deadline, CPU seconds, address space beyond the template's, processes
    # and threads, open files, largest file, private /tmp, and bounds on what comes back.
    runner_workers: int = 1
    run_timeout_s: float = 20.0
    run_cpu_s: int = 20
    run_memory_mb: int = 1024
    run_processes: int = 16
    run_open_files: int = 256
    run_file_mb: int = 16
    run_tmp_mb: int = 32
    run_output_bytes: int = 64 * 1024
    run_result_bytes: int = 32 * 1024 * 1024
    run_max_source_bytes: int = 64 * 1024
    # A run's gradtrace.watch document (a program that watches its training, see jail_watch):
    # logged steps and norms at most (sampled evenly past them, the document says what it cut),
    # and bytes of the full traces the watch saved.
    run_watch_steps: int = 500
    run_watch_numbers: int = 500_000
    run_watch_trace_bytes: int = 4 * 1024 * 1024
    # Helper processes of the API for translating, checking and pricing specs (api/cpu.py); 0:
    # one thread of the API process instead (the in-process tests of the HTTP contract).
    api_cpu_processes: int = 2
    # Request limits (before anything is parsed).
    max_body_bytes: int = 256 * 1024
    # Per-client rate limit on /api/v1: requests per one-minute window (0 disables it).
    rate_per_minute: int = 240
    # ... and seconds of worker time per client and minute (the trace deadline is charged for a
    # trace that ran past it), so a few costly requests cannot take the pool; 0: no bound.
    # Only with the rate limit on (rate_per_minute > 0).
    worker_seconds_per_minute: float = 45.0
    # Permalink storage: bytes of stored specs a client may add in a day, and in all (0: no
    # bound). Over either, POST /specs answers 413 naming the quota; nothing stored is deleted.
    store_client_bytes_per_day: int = 16 * 1024 * 1024
    store_total_bytes: int = 4 * 1024 * 1024 * 1024
    # The in-process trace cache is bounded in bytes (traces run from a few KB to a few MB);
    # Redis entries expire after cache_ttl_s and are not stored past cache_entry_max_bytes.
    cache_bytes: int = 64 * 1024 * 1024
    cache_entry_max_bytes: int = 8 * 1024 * 1024
    cache_ttl_s: int = 7 * 24 * 3600
    # Entries over cache_entry_max_bytes (big traces, up to tens of MB) go to a folder on disk
    # bounded at disk_cache_bytes, least recently used out first; None (or 0 bytes): not kept.
    disk_cache_dir: Path | None = field(default_factory=lambda: _disk_cache_dir({}, default_sqlite_path()))
    disk_cache_bytes: int = 1024 * 1024 * 1024
    cors_origins: tuple[str, ...] = ("*",)
    # Trust X-Forwarded-For from the proxy in front (compose); off when exposed directly.
    trust_proxy: bool = False
    start_workers: bool = True
    # Tests only: every trace sleeps this long in its worker first (to act on a request in flight).
    debug_trace_delay_s: float = 0.0
    # Absolute base of the permalink URLs (e.g. https://gradtrace.example); None: the request's.
    public_url: str | None = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if env is None else env)
        base = cls()
        sqlite_path = Path(env["GRADTRACE_DB"]) if env.get("GRADTRACE_DB") else base.sqlite_path
        origins = env.get("GRADTRACE_CORS_ORIGINS")
        return replace(
            base,
            database_url=env.get("DATABASE_URL") or None,
            sqlite_path=sqlite_path,
            redis_url=env.get("REDIS_URL") or None,
            frontend_dir=frontend_files.frontend_dir(env),
            workers=_int(env, "GRADTRACE_WORKERS", base.workers),
            trace_timeout_s=_float(env, "GRADTRACE_TRACE_TIMEOUT", base.trace_timeout_s),
            worker_cpu_s=_int(env, "GRADTRACE_WORKER_CPU_SECONDS", base.worker_cpu_s),
            worker_memory_mb=_int(env, "GRADTRACE_WORKER_MEMORY_MB", base.worker_memory_mb),
            queue_limit=_int(env, "GRADTRACE_QUEUE_LIMIT", base.queue_limit),
            client_tasks=_int(env, "GRADTRACE_CLIENT_TASKS", base.client_tasks),
            client_waiting=_int(env, "GRADTRACE_CLIENT_WAITING", base.client_waiting),
            runner_workers=_int(env, "GRADTRACE_RUNNER_WORKERS", base.runner_workers),
            run_timeout_s=_float(env, "GRADTRACE_RUN_TIMEOUT", base.run_timeout_s),
            run_cpu_s=_int(env, "GRADTRACE_RUN_CPU_SECONDS", base.run_cpu_s),
            run_memory_mb=_int(env, "GRADTRACE_RUN_MEMORY_MB", base.run_memory_mb),
            run_watch_steps=_int(env, "GRADTRACE_RUN_WATCH_STEPS", base.run_watch_steps),
            run_watch_numbers=_int(env, "GRADTRACE_RUN_WATCH_NUMBERS", base.run_watch_numbers),
            run_watch_trace_bytes=_int(env, "GRADTRACE_RUN_WATCH_TRACE_BYTES", base.run_watch_trace_bytes),
            api_cpu_processes=_int(env, "GRADTRACE_API_CPU_PROCESSES", base.api_cpu_processes),
            max_body_bytes=_int(env, "GRADTRACE_MAX_BODY_BYTES", base.max_body_bytes),
            rate_per_minute=_int(env, "GRADTRACE_RATE_PER_MINUTE", base.rate_per_minute),
            worker_seconds_per_minute=_float(
                env, "GRADTRACE_WORKER_SECONDS_PER_MINUTE", base.worker_seconds_per_minute
            ),
            queue_timeout_s=_float(env, "GRADTRACE_QUEUE_TIMEOUT", base.queue_timeout_s),
            store_client_bytes_per_day=_int(
                env, "GRADTRACE_STORE_CLIENT_BYTES_PER_DAY", base.store_client_bytes_per_day
            ),
            store_total_bytes=_int(env, "GRADTRACE_STORE_TOTAL_BYTES", base.store_total_bytes),
            cache_bytes=_int(env, "GRADTRACE_CACHE_BYTES", base.cache_bytes),
            cache_entry_max_bytes=_int(env, "GRADTRACE_CACHE_ENTRY_MAX_BYTES", base.cache_entry_max_bytes),
            cache_ttl_s=_int(env, "GRADTRACE_CACHE_TTL", base.cache_ttl_s),
            disk_cache_dir=_disk_cache_dir(env, sqlite_path),
            disk_cache_bytes=_int(env, "GRADTRACE_DISK_CACHE_BYTES", base.disk_cache_bytes),
            cors_origins=tuple(o.strip() for o in origins.split(",") if o.strip())
            if origins
            else base.cors_origins,
            public_url=env.get("GRADTRACE_PUBLIC_URL") or None,
            debug_trace_delay_s=_float(env, "GRADTRACE_DEBUG_TRACE_DELAY", base.debug_trace_delay_s),
            trust_proxy=env.get("GRADTRACE_TRUST_PROXY", "") in ("1", "true", "yes"),
        )
