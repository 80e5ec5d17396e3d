"""The trace cache's disk tier on a real folder: bounded in bytes (least recently used out
first), damaged or torn entries read as misses, writes atomic; and the tiers chosen by size."""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gradtrace.service.cache import MemoryCache, TieredCache, make_cache
from gradtrace.service.disk_cache import DiskCache
from gradtrace.service.settings import Settings


def aged(cache: DiskCache, key: str, seconds_ago: float) -> None:
    """Set an entry's last use in the past (mtime resolution is coarse on some filesystems)."""
    stamp = time.time() - seconds_ago
    os.utime(cache._path(key), (stamp, stamp))


def test_eviction_keeps_the_total_under_the_cap(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / "tier", max_bytes=10_000)
    for i in range(12):
        assert cache.set(f"k{i}", os.urandom(3_000))
        aged(cache, f"k{i}", 100 - i)  # k0 the oldest
        assert cache.size_bytes() <= 10_000
    kept = [i for i in range(12) if cache.get(f"k{i}") is not None]
    assert kept == [9, 10, 11]  # three entries (3,000 bytes + header each) fit


def test_a_read_makes_an_entry_the_last_to_go(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=10_000)
    for i, key in enumerate(("a", "b", "c")):
        cache.set(key, bytes(3_000))
        aged(cache, key, 100 - i)
    assert cache.get("a") is not None  # touched: now the newest
    cache.set("d", bytes(3_000))
    assert cache.get("a") is not None and cache.get("b") is None


def test_an_entry_larger_than_the_cap_is_refused_and_counted(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path, max_bytes=10_000)
    cache.set("small", bytes(100))
    assert cache.set("huge", bytes(20_000)) is False
    assert cache.refused == 1
    assert cache.get("huge") is None and cache.get("small") == bytes(100)  # nothing else dropped


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "foreign"])
def test_a_damaged_entry_is_a_miss_and_is_deleted(tmp_path: Path, damage: str) -> None:
    cache = DiskCache(tmp_path, max_bytes=1_000_000)
    value = os.urandom(5_000)
    cache.set("k", value)
    path = cache._path("k")
    raw = bytearray(path.read_bytes())
    if damage == "flip":
        raw[-100] ^= 0xFF
    elif damage == "truncate":
        raw = raw[: len(raw) // 2]
    elif damage == "empty":
        raw = bytearray()
    else:
        raw = bytearray(b"not a cache entry at all")
    path.write_bytes(bytes(raw))
    assert cache.get("k") is None
    assert not path.exists()
    cache.set("k", value)  # computed again, kept again
    assert cache.get("k") == value


def test_an_entry_copied_over_another_keys_name_is_a_miss(tmp_path: Path) -> None:
    # Issue 38: the key is bound inside the entry, so a valid entry under the wrong name is no hit
    cache = DiskCache(tmp_path, max_bytes=1_000_000)
    cache.set("trace:a", b"the trace of a")
    cache.set("trace:b", b"the trace of b")
    cache._path("trace:b").write_bytes(cache._path("trace:a").read_bytes())
    assert cache.get("trace:b") is None
    assert cache.get("trace:a") == b"the trace of a"


def test_a_deleted_folder_is_made_again_at_the_next_write(tmp_path: Path) -> None:
    folder = tmp_path / "tier"
    cache = DiskCache(folder, max_bytes=1_000_000)
    cache.set("k", b"v")
    for entry in folder.iterdir():
        entry.unlink()
    folder.rmdir()
    assert cache.get("k") is None
    assert cache.set("k", b"v") is True and cache.get("k") == b"v"


def test_a_write_cut_short_leaves_no_entry(tmp_path: Path) -> None:
    """Writes go to a temporary file renamed over the entry: a killed writer leaves a *.tmp,
    never a half entry, and the next start removes it."""
    cache = DiskCache(tmp_path, max_bytes=1_000_000)
    (tmp_path / "abc.tmp").write_bytes(b"half a trace")
    assert cache.get("k") is None
    DiskCache(tmp_path, max_bytes=1_000_000)
    assert not list(tmp_path.glob("*.tmp"))


def test_entries_survive_a_new_process_and_keys_never_name_files(tmp_path: Path) -> None:
    DiskCache(tmp_path, 1_000_000).set("svg:3:../../etc/passwd:1both", b"<svg/>")
    assert [p.name for p in tmp_path.iterdir()][0].endswith(".entry")
    assert DiskCache(tmp_path, 1_000_000).get("svg:3:../../etc/passwd:1both") == b"<svg/>"


def test_an_unusable_folder_degrades_to_misses(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = DiskCache(blocker / "tier", max_bytes=1_000_000)
    assert cache.set("k", b"v") is False
    assert cache.get("k") is None


def test_tiers_are_chosen_by_size(tmp_path: Path) -> None:
    async def scenario() -> None:
        memory = MemoryCache(max_bytes=100_000, max_entry_bytes=1_000)
        disk = DiskCache(tmp_path, max_bytes=1_000_000)
        cache = TieredCache(memory, disk, max_entry_bytes=1_000)
        await cache.set("small", bytes(500))
        await cache.set("big", bytes(50_000))
        assert await memory.get("small") is not None and disk.get("small") is None
        assert await memory.get("big") is None and disk.get("big") is not None
        assert await cache.get("small") == bytes(500) and await cache.get("big") == bytes(50_000)
        assert await cache.get("absent") is None

    # In a thread of its own: in the whole suite, the browser tests' sync Playwright keeps an
    # event loop running on the main thread, where asyncio.run() refuses to start.
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, scenario()).result()


def test_settings_place_the_disk_tier(tmp_path: Path) -> None:
    beside = Settings.from_env({"GRADTRACE_DB": str(tmp_path / "g.db")})
    assert beside.disk_cache_dir == tmp_path / "trace-cache"
    chosen = Settings.from_env(
        {"GRADTRACE_DISK_CACHE_DIR": str(tmp_path / "t"), "GRADTRACE_DISK_CACHE_BYTES": "5"}
    )
    assert (chosen.disk_cache_dir, chosen.disk_cache_bytes) == (tmp_path / "t", 5)
    off = Settings.from_env({"GRADTRACE_DISK_CACHE_DIR": "off"})
    assert off.disk_cache_dir is None and isinstance(make_cache(off), MemoryCache)
    assert isinstance(make_cache(beside), TieredCache)
    with pytest.raises(ValueError, match="GRADTRACE_DISK_CACHE_BYTES"):
        Settings.from_env({"GRADTRACE_DISK_CACHE_BYTES": "a lot"})
