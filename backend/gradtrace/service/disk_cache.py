"""The disk tier of the trace cache: entries too big for the memory (or Redis) tier, on disk.

One file per entry, named by the sha256 of its key, holding a header (a magic word, the sha256
of the key and the sha256 of the value) then the value: an entry copied over another key's
name is a miss, not another permalink's trace. Writes go to a temporary file in the same folder that is
renamed over the entry (``os.replace``), so a killed process leaves either the whole entry or
none; a file whose bytes do not match its recorded hash (a torn copy, a bad disk, an edit) is
deleted and read as a miss, so the value is computed again. The folder is bounded in bytes:
after a write, the least recently used entries (by modification time, which a read refreshes)
are deleted until the total is under the cap. A value larger than the cap is not kept (logged,
and counted in ``refused``). Disk errors degrade to misses, never to errors; a folder deleted
while the server runs is made again at the next write.

The methods block (file I/O and hashing): ``TieredCache`` calls them in a thread.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from pathlib import Path

log = logging.getLogger(__name__)

MAGIC = b"gradtrace-cache-2\n"
_HEADER = len(MAGIC) + 64  # the magic, then the key's and the value's sha256 digests
_SUFFIX = ".entry"


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class DiskCache:
    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.refused = 0  # values larger than the whole cap: not kept
        self._lock = threading.Lock()  # one eviction pass at a time within this process
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for stale in directory.glob("*.tmp"):  # a write cut short by a killed process
                stale.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("disk cache folder %s is not usable: %s", directory, exc)

    def _path(self, key: str) -> Path:
        return self.directory / (_digest(key).hex() + _SUFFIX)

    def get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("disk cache read failed: %s", exc)
            return None
        value = raw[_HEADER:]
        if raw[:_HEADER] != MAGIC + _digest(key) + hashlib.sha256(value).digest():
            log.warning(
                "disk cache entry %s is damaged or another key's: deleted, it will be computed again",
                path.name,
            )
            path.unlink(missing_ok=True)
            return None
        try:
            os.utime(path)  # recently used: last to be evicted
        except OSError:
            pass
        return value

    def set(self, key: str, value: bytes) -> bool:
        """Keep ``value``; False when it was not kept (larger than the cap, or a disk error)."""
        if len(value) + _HEADER > self.max_bytes:
            self.refused += 1
            log.warning(
                "an entry of %d bytes is larger than the disk cache (%d bytes): not cached",
                len(value),
                self.max_bytes,
            )
            return False
        try:
            self.directory.mkdir(parents=True, exist_ok=True)  # deleted meanwhile: made again
            fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(MAGIC + _digest(key) + hashlib.sha256(value).digest())
                    out.write(value)
                os.replace(tmp, self._path(key))
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError as exc:
            log.warning("disk cache write failed: %s", exc)
            return False
        self.evict()
        return True

    def entries(self) -> list[tuple[float, int, Path]]:
        """(mtime, size, path) of every entry, oldest first."""
        out = []
        for path in self.directory.glob("*" + _SUFFIX):
            try:
                stat = path.stat()
            except OSError:  # deleted meanwhile (another process evicted it)
                continue
            out.append((stat.st_mtime, stat.st_size, path))
        return sorted(out)

    def size_bytes(self) -> int:
        return sum(size for _, size, _ in self.entries())

    def evict(self) -> None:
        """Delete the least recently used entries until the folder is within the cap."""
        with self._lock:
            entries = self.entries()
            total = sum(size for _, size, _ in entries)
            for _, size, path in entries:
                if total <= self.max_bytes:
                    break
                path.unlink(missing_ok=True)
                total -= size
