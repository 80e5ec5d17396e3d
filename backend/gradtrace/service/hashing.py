"""Content hashes: the cache key of a trace, the ETag, and the permalink id.

The hash is over the canonical JSON of the *normalised* spec (sorted keys, no spaces), so
two specs that differ only in key order or defaults share a trace and a permalink.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from functools import lru_cache
from importlib import metadata
from typing import Any

from gradtrace.comparison_schema import COMPARE_SCHEMA_VERSION
from gradtrace.trace_schema import SCHEMA_VERSION

PERMALINK_ID_LENGTH = 12  # base32 chars: 60 bits, collisions negligible for user-scale stores
_PERMALINK_ID = re.compile(rf"[a-z2-7]{{{PERMALINK_ID_LENGTH}}}")


def canonical_json(doc: Any) -> bytes:
    return json.dumps(
        doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def spec_hash(normalized_spec: dict[str, Any]) -> str:
    """sha256 hex of the normalised spec: identifies the spec itself (permalinks)."""
    return hashlib.sha256(canonical_json(normalized_spec)).hexdigest()


@lru_cache(maxsize=1)
def engine_fingerprint() -> str:
    """What else decides a trace's bytes: the trace format, gradtrace and torch versions.

    Read from package metadata, so the API process learns torch's version without importing it.
    """
    versions = []
    for dist in ("gradtrace", "torch"):
        try:
            versions.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist}=?")
    return f"schema={SCHEMA_VERSION};" + ";".join(versions)


def trace_key(normalized_spec: dict[str, Any]) -> str:
    """Cache key and ETag of a trace: the spec's hash salted with the engine fingerprint."""
    h = hashlib.sha256(engine_fingerprint().encode() + b"\n" + canonical_json(normalized_spec))
    return h.hexdigest()


def run_key(source: str) -> str:
    """Cache key and ETag of a program's run (``POST /run``): its source, salted like a trace."""
    h = hashlib.sha256(engine_fingerprint().encode() + b"\nrun\n" + source.encode())
    return h.hexdigest()


def compare_key(trace_key_a: str, trace_key_b: str, permalinks: dict[str, str]) -> str:
    """Cache key of a comparison: the ordered pair of trace keys (``a`` is the baseline; the
    result is not symmetric), the comparison format, and the permalink ids it names."""
    named = ",".join(f"{side}={permalinks[side]}" for side in sorted(permalinks))
    return f"compare:{COMPARE_SCHEMA_VERSION}:{trace_key_a}:{trace_key_b}:{named}"


def permalink_id(normalized_spec: dict[str, Any]) -> str:
    """Short, URL-safe, lower-case id derived from the spec's hash: same spec, same id."""
    digest = hashlib.sha256(canonical_json(normalized_spec)).digest()
    return base64.b32encode(digest).decode().lower()[:PERMALINK_ID_LENGTH]


def is_permalink_id(text: str) -> bool:
    """Whether ``text`` has a permalink id's alphabet (lower-case base32) and length."""
    return _PERMALINK_ID.fullmatch(text) is not None
