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

A value is read in pieces, never whole: ``open`` checks an entry (its header, then its value's
hash, a megabyte at a time) and answers it open (``DiskEntry``), for a response to send from
the file a piece at a time. Big traces are what this tier holds, and a reader that takes its
answer slowly held a whole copy of one before (100 such readers took the API process from 259
to 2,335 MB, issue 38); now it holds a piece.

The methods block (file I/O and hashing): ``TieredCache`` calls them in a thread.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger(__name__)

MAGIC = b"gradtrace-cache-2\n"
_HEADER = len(MAGIC) + 64  # the magic, then the key's and the value's sha256 digests
_SUFFIX = ".entry"
_HASH_PIECE = 1024 * 1024  # read this much at a time to check an entry's hash


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
        """The whole value (for a comparison or a diagram, which need it whole), or None."""
        entry = self.open(key)
        if entry is None:
            return None
        try:
            return entry.read(0, entry.size)
        except OSError as exc:
            log.warning("disk cache read failed: %s", exc)
            return None
        finally:
            entry.close()

    def open(self, key: str) -> DiskEntry | None:
        """The entry of ``key``, checked and open for reading in pieces, or None (a miss).

        The file stays open while it is read: an entry replaced (``os.replace``) or evicted
        meanwhile leaves this one's bytes in place until it is closed."""
        path = self._path(key)
        try:
            file = path.open("rb", buffering=0)
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("disk cache read failed: %s", exc)
            return None
        try:
            sound = self._sound(file, key)
        except OSError as exc:
            file.close()
            log.warning("disk cache read failed: %s", exc)
            return None
        if not sound:
            file.close()
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
        return DiskEntry(file, os.fstat(file.fileno()).st_size - _HEADER)

    @staticmethod
    def _sound(file: BinaryIO, key: str) -> bool:
        """The header names ``key`` and the value's bytes match its recorded hash."""
        header = file.read(_HEADER)
        if len(header) != _HEADER or header[: len(MAGIC) + 32] != MAGIC + _digest(key):
            return False
        value_hash = hashlib.sha256()
        while piece := file.read(_HASH_PIECE):
            value_hash.update(piece)
        return header[len(MAGIC) + 32 :] == value_hash.digest()

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


class DiskEntry:
    """A checked entry's value, open on disk: read a piece at a time (``read``), then ``close``."""

    def __init__(self, file: BinaryIO, size: int) -> None:
        self._file = file
        self.size = size  # bytes of the value

    def read(self, start: int, length: int) -> bytes:
        """Up to ``length`` bytes of the value from ``start`` (blocking: call it in a thread)."""
        return os.pread(self._file.fileno(), min(length, self.size - start), _HEADER + start)

    def close(self) -> None:
        self._file.close()
