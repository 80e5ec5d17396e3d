"""The trace cache: trace JSON bytes by content hash, in-process or shared through Redis,
with a disk tier for the entries too big for either.

Traces are immutable for a given key (spec hash + engine fingerprint), so entries never
need invalidation. The memory cache is an LRU bounded in bytes (``GRADTRACE_CACHE_BYTES``,
64 MB by default): the API process's memory stays bounded however large the traces are.
Redis entries expire after a TTL. An entry larger than the per-entry cap
(``GRADTRACE_CACHE_ENTRY_MAX_BYTES``) goes to the disk tier (``service/disk_cache.py``) instead:
reads look in memory (or Redis) first, then on disk. ``open`` answers a disk entry open rather
than read (``DiskEntry``): a response sends it from the file a piece at a time. A Redis or disk failure degrades to
misses (slower), never to errors; a frozen Redis costs one short timeout, then none while its
circuit is open (``redis_breaker``).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Protocol, cast

from gradtrace.service.disk_cache import DiskCache, DiskEntry
from gradtrace.service.redis_breaker import Breaker, RedisAway
from gradtrace.service.settings import Settings

# What a cache answers for a response: bytes in memory, or an entry on disk read in pieces.
CachedBody = bytes | DiskEntry


class TraceCache(Protocol):
    async def get(self, key: str) -> bytes | None: ...
    async def open(self, key: str) -> CachedBody | None: ...
    async def set(self, key: str, value: bytes) -> None: ...
    async def close(self) -> None: ...


class MemoryCache:
    def __init__(self, max_bytes: int, max_entry_bytes: int) -> None:
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._max_bytes = max_bytes
        self._max_entry_bytes = min(max_entry_bytes, max_bytes)
        self._bytes = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    async def get(self, key: str) -> bytes | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    async def open(self, key: str) -> CachedBody | None:
        return await self.get(key)

    async def set(self, key: str, value: bytes) -> None:
        if len(value) > self._max_entry_bytes:
            return
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= len(old)
        self._items[key] = value
        self._bytes += len(value)
        while self._bytes > self._max_bytes:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= len(dropped)

    async def close(self) -> None:
        self._items.clear()


class RedisCache:
    """Shared by every API replica: a trace computed by one is a hit on the others."""

    PREFIX = "gradtrace:trace:"

    def __init__(self, url: str, ttl_s: int, max_entry_bytes: int) -> None:
        import redis.asyncio as aioredis

        self._breaker = Breaker("trace cache")
        timeout = self._breaker.timeout_s
        self._redis = aioredis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        self._ttl = ttl_s
        self._max_entry_bytes = max_entry_bytes

    async def get(self, key: str) -> bytes | None:
        try:  # no decode_responses: bytes
            return cast("bytes | None", await self._breaker.call(self._redis.get(self.PREFIX + key)))
        except RedisAway:  # redis down or frozen: a miss, not an error (logged by the breaker)
            return None

    async def open(self, key: str) -> CachedBody | None:
        return await self.get(key)

    async def set(self, key: str, value: bytes) -> None:
        if len(value) > self._max_entry_bytes:
            return
        try:
            await self._breaker.call(self._redis.set(self.PREFIX + key, value, ex=self._ttl))
        except RedisAway:
            pass  # not kept: computed again next time

    async def close(self) -> None:
        await self._redis.aclose()


class TieredCache:
    """Memory (or Redis) for entries up to ``max_entry_bytes``, the disk for bigger ones.

    An entry lives in exactly one tier, chosen by its size, so a read asks the first tier and,
    on a miss, the disk (in a thread: file I/O and hashing stay off the event loop).
    """

    def __init__(self, first: TraceCache, disk: DiskCache, max_entry_bytes: int) -> None:
        self.first = first
        self.disk = disk
        self._max_entry_bytes = max_entry_bytes

    async def get(self, key: str) -> bytes | None:
        value = await self.first.get(key)
        if value is None:
            value = await asyncio.to_thread(self.disk.get, key)
        return value

    async def open(self, key: str) -> CachedBody | None:
        """Like ``get``, but an entry of the disk tier is answered open, to be read in pieces."""
        value = await self.first.get(key)
        if value is None:
            return await asyncio.to_thread(self.disk.open, key)
        return value

    async def set(self, key: str, value: bytes) -> None:
        if len(value) <= self._max_entry_bytes:
            await self.first.set(key, value)
        else:
            await asyncio.to_thread(self.disk.set, key, value)

    async def close(self) -> None:
        await self.first.close()


def make_cache(settings: Settings) -> TraceCache:
    first: TraceCache
    if settings.redis_url:
        first = RedisCache(settings.redis_url, settings.cache_ttl_s, settings.cache_entry_max_bytes)
        max_entry = settings.cache_entry_max_bytes
    else:
        first = MemoryCache(settings.cache_bytes, settings.cache_entry_max_bytes)
        max_entry = min(settings.cache_entry_max_bytes, settings.cache_bytes)
    if settings.disk_cache_dir is None or settings.disk_cache_bytes <= 0:
        return first
    return TieredCache(first, DiskCache(settings.disk_cache_dir, settings.disk_cache_bytes), max_entry)
