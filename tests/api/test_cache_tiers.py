"""Big traces over a real server: a trace larger than the memory cache's entry limit (set to
4 KB here) is computed once and kept on disk, so a permalink's trace, diagram and player run no
worker after the first GET; the disk tier outlives the server; a damaged entry is computed again;
the folder stays under its cap. Worker tasks are counted by /readyz (``tasks_run``)."""

from __future__ import annotations

from pathlib import Path

import httpx
from specs import tiny

TIMEOUT = 120
ENTRY_LIMIT = 4096


def tasks(base: str) -> dict[str, int]:
    return httpx.get(base + "/readyz", timeout=TIMEOUT).json()["tasks_run"]


def get(base: str, path: str) -> httpx.Response:
    r = httpx.get(base + path, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.entry"))


def test_a_big_permalink_is_computed_once_and_kept_on_disk(server_factory, tmp_path: Path) -> None:  # noqa: ANN001
    folder = tmp_path / "tier"
    env = {
        "GRADTRACE_WORKERS": "1",
        "GRADTRACE_RATE_PER_MINUTE": "0",
        "GRADTRACE_CACHE_ENTRY_MAX_BYTES": str(ENTRY_LIMIT),
        "GRADTRACE_DISK_CACHE_DIR": str(folder),
        "GRADTRACE_DB": str(tmp_path / "permalinks.db"),
    }
    server = server_factory(env=env)
    sid = httpx.post(server.url + "/api/v1/specs", json=tiny("big"), timeout=TIMEOUT).json()["id"]
    first = get(server.url, f"/api/v1/specs/{sid}/trace")
    assert len(first.content) > ENTRY_LIMIT and first.headers["x-cache"] == "miss"
    assert tasks(server.url) == {"run_trace": 1}
    again = get(server.url, f"/api/v1/specs/{sid}/trace")
    assert again.headers["x-cache"] == "hit" and again.content == first.content
    for path in (f"/api/v1/specs/{sid}/diagram.svg", f"/api/v1/specs/{sid}/player.html"):
        drawn = get(server.url, path)
        assert len(drawn.content) > ENTRY_LIMIT  # the drawings go to the disk tier too
        assert get(server.url, path).headers["x-cache"] == "hit"
    assert tasks(server.url) == {"run_trace": 1}  # one trace for all of them
    assert len(list(folder.glob("*.entry"))) == 3  # the trace, the SVG, the player

    # A new server process on the same folder: the trace is still there.
    server.stop()
    restarted = server_factory(env=env)
    after = get(restarted.url, f"/api/v1/specs/{sid}/trace")
    assert after.headers["x-cache"] == "hit" and after.content == first.content
    assert tasks(restarted.url) == {}

    # Every entry damaged on disk: read as misses, computed again, the same bytes.
    for entry in folder.glob("*.entry"):
        raw = bytearray(entry.read_bytes())
        raw[-10] ^= 0xFF
        entry.write_bytes(bytes(raw))
    recomputed = get(restarted.url, f"/api/v1/specs/{sid}/trace")
    assert recomputed.headers["x-cache"] == "miss" and recomputed.content == first.content
    assert tasks(restarted.url) == {"run_trace": 1}
    assert get(restarted.url, f"/api/v1/specs/{sid}/trace").headers["x-cache"] == "hit"


def test_the_disk_tier_stays_under_its_cap(server_factory, tmp_path: Path) -> None:  # noqa: ANN001
    folder = tmp_path / "tier"
    cap = 40_000
    server = server_factory(
        env={
            "GRADTRACE_WORKERS": "1",
            "GRADTRACE_RATE_PER_MINUTE": "0",
            "GRADTRACE_CACHE_ENTRY_MAX_BYTES": str(ENTRY_LIMIT),
            "GRADTRACE_DISK_CACHE_DIR": str(folder),
            "GRADTRACE_DISK_CACHE_BYTES": str(cap),
        }
    )
    sizes = []
    for i in range(12):
        r = httpx.post(server.url + "/api/v1/trace", json=tiny(f"distinct {i}"), timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        sizes.append(len(r.content))
        assert folder_bytes(folder) <= cap
    assert sum(sizes) > 2 * cap  # the cap was reached, more than once
    latest = httpx.post(server.url + "/api/v1/trace", json=tiny("distinct 11"), timeout=TIMEOUT)
    assert latest.headers["x-cache"] == "hit"  # the newest entries are the ones kept
    oldest = httpx.post(server.url + "/api/v1/trace", json=tiny("distinct 0"), timeout=TIMEOUT)
    assert oldest.headers["x-cache"] == "miss"
