"""One listing entry (`FileStatus`) and the modification time every backend reports differently."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from paimon_format.errors import StorageError

# Keys the fsspec backends use for a modification time, most specific first.
_MTIME_KEYS = ("mtime", "LastModified", "last_modified", "updated", "modified", "created")


@dataclass(frozen=True)
class FileStatus:
    """One listing entry; `path` is in the caller's form (same scheme as the listed directory)."""

    path: str
    size: int
    modification_time_ms: int
    is_dir: bool


def mtime_ms(info: dict[str, Any], path: str, is_dir: bool) -> int:
    """Modification time in epoch millis.

    A file without one is an error rather than 0: orphan cleaning would take 0 for "very old".
    Object-store directories are virtual and have none; they get 0.
    """
    for key in _MTIME_KEYS:
        value = info.get(key)
        if value is not None:
            return _to_epoch_ms(value, path)
    if is_dir:
        return 0
    raise StorageError(f"list {path}: the filesystem reported no modification time ({sorted(info)})")


def _to_epoch_ms(value: Any, path: str) -> int:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    if isinstance(value, (int, float)):
        return int(value * 1000)
    raise StorageError(f"list {path}: unreadable modification time {value!r}")
