"""The per-table lock around a run: taken by the frame for a standalone job, by maintain per table.

Why one place: a standalone spark-submit of expire-snapshots, rollback or delete-branch on a table
that the nightly `maintain` is working on would plan from a view the other run is changing (the
lock file itself: `jobs.runtime.table_lock`). So `jobs/__main__.py` runs every table-management
operation inside `held_for_run`, and `maintain` takes the same lock per table with `claim` and
`release`, then runs its steps' `run()` directly, never through the frame: a step never asks for
the lock its maintain run already holds.

Who takes none: `write` (a writer races maintenance through the commit protocol, and the loser is
the maintenance job with exit 3; a maintenance lock held for hours must not stop ingestion), and
`maintain` itself at the frame (it locks each table it works on). Read-only tools (`inspect`,
`read_table`) are no operations of the frame and take none.

Ordering: the lock is taken after the config is valid and before the operation reads the table;
released in a `finally`, only while it still holds our token (a run that outlived its `ttl` and was
taken over leaves the new holder's lock alone). A killed run leaves its lock until `ttl` passes.
A dry run only reads the lock: a held one ends the dry run with exit 3 as the real run would.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jobs.runtime.errors import BadInputError, SafetyRefusal, describe
from jobs.runtime.table_lock import Acquired, LockConfig, TableLock, open_table_lock

NOT_TAKEN_DRY_RUN = "not taken (dry run)"


class TableLocked(SafetyRefusal):
    """Another run holds the table's lock (exit 3: retry once it is done)."""


def claim(lock: TableLock, dry_run: bool) -> Acquired:
    """Take the lock; in a dry run only look at it. `held` is False when another run holds it
    (`holder` says who, until when); a dry run on a free lock is `held` without a lock file."""
    if dry_run:
        holder = lock.read()
        if holder is not None and holder.expires_ms > time.time() * 1000:
            return Acquired(False, holder)
        return Acquired(True)
    return lock.acquire()


def release(lock: TableLock, log: logging.Logger | logging.LoggerAdapter) -> None:
    """Release a held lock; never raises (the run's own outcome stands), logs what went wrong."""
    try:
        if not lock.release():
            log.warning("lock %s was taken over before we released it (run longer than ttl)", lock.path)
    except Exception as error:
        log.error("cannot release lock %s: %s", lock.path, describe(error))


def log_takeover(acquired: Acquired, log: logging.Logger | logging.LoggerAdapter) -> None:
    if acquired.took_over is not None:
        stale = acquired.took_over
        log.warning("took over an expired lock of %s (expired %s)", stale.owner, stale.expires)


def locked_message(table: str, lock: TableLock, acquired: Acquired, dry_run: bool) -> str:
    """What a refused run says: who holds the lock, until when, and what to do."""
    holder = acquired.describe()
    prefix = "dry run: a real run now would be refused: " if dry_run else ""
    return (
        f"{prefix}table {table} is {holder} (lock file {lock.path}): another maintenance run is "
        "working on it; run again once it is done, or delete the lock file if that run is known to be gone"
    )


@contextmanager
def held_for_run(
    takes_lock: bool,
    config: Any,
    dry_run: bool,
    record: Any,
    log: logging.Logger | logging.LoggerAdapter,
) -> Iterator[None]:
    """Run the body under the table's lock (see the module docstring). `config` is the operation's
    validated config; one without a `table` and a `lock` block (maintain's) passes straight through."""
    lock_config: LockConfig | None = getattr(config, "lock", None)
    table = getattr(config, "table", None)
    if not isinstance(lock_config, LockConfig) or not table:
        yield
        return
    if not takes_lock:
        if "lock" in config.model_fields_set:
            raise BadInputError(
                f"lock: {record.operation} takes no table lock (a writer races maintenance through the "
                "commit protocol instead); remove the key"
            )
        yield
        return
    if not lock_config.enabled:
        record.details["lock"] = "disabled"
        yield
        return
    lock = open_table_lock(
        config.warehouse, table, lock_config, config.storage_options, config.allow_unsafe_overwrite_commit
    )
    acquired = claim(lock, dry_run)
    if not acquired.held:
        record.details["lock"] = acquired.describe()
        raise TableLocked(locked_message(table, lock, acquired, dry_run))
    record.details["lock"] = NOT_TAKEN_DRY_RUN if dry_run else lock.path
    log_takeover(acquired, log)
    try:
        yield
    finally:
        if not dry_run:
            release(lock, log)
