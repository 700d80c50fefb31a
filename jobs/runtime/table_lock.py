"""A per-table maintenance lock: one file with an expiry, created with create-if-absent.

Two maintenance runs on one table at once (an overlapping schedule, a manual rerun, a standalone
expire-snapshots or rollback while the nightly `maintain` works on the table) would each plan
deletions from a view the other is changing. Paimon's own commit protocol keeps snapshots
consistent, but not a second run's plan, so every table-management job takes a lock per table
first: `maintain` per table it works on, a standalone job through the frame (`jobs.runtime.run_lock`).

Where: `<warehouse>/_maintenance/locks/<db>.<table>.lock` by default (or `<lock dir>/<db>.<table>.lock`),
outside the table directory on purpose: Paimon readers and remove-orphan-files never look there,
and a catalog lists only `*.db` directories, so `_maintenance` is no database either.

The file holds JSON: a random token, the owner (user@host pid), when it was taken and when it
expires. A run that crashed leaves its lock behind; once expired it may be taken over:

1. the taker creates `<lock>.takeover-<token of the stale lock>` with create-if-absent; only one of
   several racing takers wins that file, because they all saw the same stale token;
2. the winner re-reads the lock, and only if it still holds that stale token deletes it and creates
   its own with create-if-absent again (a third run that created a fresh lock meanwhile wins);
3. the takeover marker is removed when the new lock is released. A marker holds an expiry as a lock
   does: a taker that died between steps 1 and 2 leaves one, and once it has expired the next taker
   deletes it and tries step 1 again, so a crash there never locks the table out for good.

The remaining race: a taker that read the stale token, then stalled for longer than the whole next
run (until its marker was removed) could win a second marker for the same stale token. Step 2's
re-read makes it see the newer lock and give up, except in the instant between that re-read and
the delete. A lock is a guard against overlapping schedules, not a consensus protocol.

Release deletes the lock only while it still holds our token: a run that outlived its expiry and
was taken over must not delete the new holder's lock.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from paimon_format.errors import CorruptFileError, MissingFileError
from paimon_format.model.instants import iso_utc
from paimon_format.model.options import parse_duration_ms
from paimon_format.storage.fileio import FileIO

LOCK_DIR_NAME = "_maintenance/locks"


def default_lock_dir(warehouse: str) -> str:
    return f"{warehouse.rstrip('/')}/{LOCK_DIR_NAME}"


def lock_path(lock_dir: str, table: str) -> str:
    return f"{lock_dir.rstrip('/')}/{table}.lock"


class LockConfig(BaseModel):
    """The `lock:` block of maintain and of every table-management job (one model, one meaning)."""

    model_config = ConfigDict(extra="forbid")  # as jobs.runtime.config.StrictModel, which imports this

    enabled: bool = Field(default=True, description="take a maintenance lock per table")
    ttl: str = Field(default="6h", description="a lock older than this may be taken over (crashed run)")
    dir: str | None = Field(default=None, description="default: <warehouse>/_maintenance/locks")

    @field_validator("ttl")
    @classmethod
    def _ttl(cls, value: str) -> str:
        if parse_duration_ms(str(value)) <= 0:
            raise ValueError("must be a positive duration such as 6h or 90 min")
        return str(value)

    @property
    def ttl_ms(self) -> int:
        return parse_duration_ms(self.ttl)


def _owner() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


@dataclass(frozen=True)
class LockState:
    """What a lock file says."""

    token: str
    owner: str
    acquired_ms: int
    expires_ms: int

    @property
    def expires(self) -> str:
        return iso_utc(self.expires_ms, "seconds")

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "token": self.token,
                "owner": self.owner,
                "acquired": iso_utc(self.acquired_ms, "seconds"),
                "acquired_ms": self.acquired_ms,
                "expires": self.expires,
                "expires_ms": self.expires_ms,
            }
        ).encode()

    @staticmethod
    def from_json(data: bytes, path: str) -> LockState:
        try:
            document = json.loads(data)
            return LockState(
                str(document["token"]),
                str(document["owner"]),
                int(document["acquired_ms"]),
                int(document["expires_ms"]),
            )
        except (ValueError, KeyError, TypeError) as error:
            raise CorruptFileError(
                path, f"not a maintenance lock ({error}); delete it if no maintenance run is active"
            ) from None


@dataclass
class Acquired:
    """The outcome of `TableLock.acquire`: ours (`held`), or someone else's (`holder`)."""

    held: bool
    holder: LockState | None = None
    took_over: LockState | None = None  # the expired lock we replaced

    def describe(self) -> str:
        if self.held:
            return "held"
        if self.holder is None:  # released between our create and our read of it
            return "locked by another run (released just now: run again)"
        return f"locked by {self.holder.owner} until {self.holder.expires}"


class TableLock:
    """The maintenance lock of one table. `acquire()`, then `release()` in a `finally`."""

    def __init__(self, file_io: FileIO, path: str, ttl_ms: int, owner: str | None = None) -> None:
        self.file_io = file_io
        self.path = path
        self.ttl_ms = ttl_ms
        self.owner = owner or _owner()
        self.state: LockState | None = None
        self._marker: str | None = None

    def _new_state(self) -> LockState:
        now = int(time.time() * 1000)
        return LockState(uuid.uuid4().hex, self.owner, now, now + self.ttl_ms)

    def read(self) -> LockState | None:
        """The lock as stored, None when there is none; a garbled file is a CorruptFileError."""
        try:
            return LockState.from_json(self.file_io.read_bytes(self.path), self.path)
        except MissingFileError:
            return None

    def acquire(self) -> Acquired:
        state = self._new_state()
        if self.file_io.create_if_absent(self.path, state.to_json()):
            self.state = state
            return Acquired(True)
        current = self.read()
        if current is None:  # released between our create and read: try once more
            return self._create(state, None)
        if current.expires_ms > int(time.time() * 1000):
            return Acquired(False, current)
        return self._take_over(current)

    def _take_over(self, stale: LockState) -> Acquired:
        marker = f"{self.path}.takeover-{stale.token}"
        mark = self._new_state().to_json()
        taken = self.file_io.create_if_absent(marker, mark)
        if not taken and self._cleared_dead_marker(marker, stale):
            taken = self.file_io.create_if_absent(marker, mark)
        if not taken:
            return Acquired(False, self.read() or stale)  # another run is taking it over
        current = self.read()
        if current is not None and current.token != stale.token:
            self.file_io.delete(marker)
            return Acquired(False, current)
        if current is not None:
            self.file_io.delete(self.path)
        self._marker = marker
        result = self._create(self._new_state(), stale)
        if not result.held:
            self.file_io.delete(marker)
            self._marker = None
        return result

    def _cleared_dead_marker(self, marker: str, stale: LockState) -> bool:
        """Whether the takeover marker is gone now: a taker that died between creating its marker
        and creating the new lock would leave the stale lock refusing every run for good, so a
        marker past its own expiry (it is written as a lock: now + ttl) is deleted. A marker of an
        older version holds only its owner: it counts as expiring a ttl after the stale lock."""
        try:
            data = self.file_io.read_bytes(marker)
        except MissingFileError:
            return True
        try:
            expires_ms = LockState.from_json(data, marker).expires_ms
        except CorruptFileError:
            expires_ms = stale.expires_ms + self.ttl_ms
        if expires_ms > int(time.time() * 1000):
            return False  # its taker may still be at work
        self.file_io.delete(marker, just_read=True)
        return True

    def _create(self, state: LockState, stale: LockState | None) -> Acquired:
        if self.file_io.create_if_absent(self.path, state.to_json()):
            self.state = state
            return Acquired(True, took_over=stale)
        return Acquired(False, self.read())

    def release(self) -> bool:
        """Delete the lock if it is still ours; False when it was taken over meanwhile (or not held)."""
        if self.state is None:
            return False
        try:
            current = self.read()
        except CorruptFileError:
            current = None
        released = current is not None and current.token == self.state.token
        if released:
            self.file_io.delete(self.path, just_read=True)
        if self._marker is not None:
            self.file_io.delete(self._marker)
            self._marker = None
        self.state = None
        return released


def open_table_lock(
    warehouse: str,
    table: str,
    config: LockConfig,
    storage_options: dict[str, Any] | None = None,
    allow_unsafe_overwrite_commit: bool = False,
) -> TableLock:
    """The lock of `table` (db.name) where `config` puts it: `<dir>/<db>.<name>.lock`."""
    directory = config.dir or default_lock_dir(warehouse)
    file_io = FileIO.for_path(directory, storage_options, allow_unsafe_overwrite_commit)
    return TableLock(file_io, lock_path(directory, table), config.ttl_ms)
