"""Settings come from the environment; a malformed value names its variable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gradtrace.service.settings import Settings


def test_defaults_work_with_zero_set_up() -> None:
    s = Settings.from_env({})
    assert s.database_url is None and s.redis_url is None
    assert s.sqlite_path.name == "gradtrace.db" and "site-packages" not in s.sqlite_path.parts
    assert (s.frontend_dir / "package.json").is_file()
    assert s.workers >= 1 and s.max_body_bytes == 256 * 1024


def test_environment_overrides() -> None:
    s = Settings.from_env(
        {
            "DATABASE_URL": "postgresql://u@h/db",
            "REDIS_URL": "redis://r:6379/0",
            "GRADTRACE_DB": "/tmp/x.db",
            "GRADTRACE_WORKERS": "3",
            "GRADTRACE_TRACE_TIMEOUT": "2.5",
            "GRADTRACE_CORS_ORIGINS": "https://a.example, https://b.example",
            "GRADTRACE_TRUST_PROXY": "1",
            "GRADTRACE_RUN_WATCH_STEPS": "50",
            "GRADTRACE_RUN_WATCH_NUMBERS": "1000",
            "GRADTRACE_RUN_WATCH_TRACE_BYTES": "65536",
        }
    )
    assert s.database_url == "postgresql://u@h/db" and s.redis_url == "redis://r:6379/0"
    assert s.sqlite_path == Path("/tmp/x.db") and s.workers == 3 and s.trace_timeout_s == 2.5
    assert s.cors_origins == ("https://a.example", "https://b.example") and s.trust_proxy
    assert (s.run_watch_steps, s.run_watch_numbers, s.run_watch_trace_bytes) == (50, 1000, 65536)


def test_malformed_value_names_the_variable() -> None:
    with pytest.raises(ValueError, match="GRADTRACE_WORKERS must be an integer"):
        Settings.from_env({"GRADTRACE_WORKERS": "two"})


def test_serve_with_a_malformed_variable_is_exit_2() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "gradtrace", "serve", "--port", "1"],
        env={"GRADTRACE_WORKERS": "two", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stderr == "gradtrace: environment variable GRADTRACE_WORKERS must be an integer, got 'two'\n"
