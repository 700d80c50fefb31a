"""A file that vanished under a live writer is a race (exit 3), not a broken table (exit 2).

Why: Paimon's Java writers expire their own snapshots and tags after each commit
(`snapshot.num-retained.*`, tag retention) and delete what only those needed. A maintenance job
that listed a snapshot or tag and then reads its manifests can find them gone: the soak
(scripts/soak.py) saw expire-tags and remove-orphan-files fail that way in one run of four. The
table is fine; the job only has to run again. Exit 2 would tell the operator to fix a table that
needs no fixing, so a job that failed on a missing file is asked one more question: did another
writer commit to the table while the job ran? If so the failure is reported as a race (exit 3,
"retry"), with the missing file and the rival's snapshot named.

A live writer's expiry also runs after a commit made *before* the run, so a missing file with no
commit during the run is asked a second question (`vanished_roots`): does anything present still
name it? If its snapshot, tag or changelog was expired meanwhile, it is a race too.

What this cannot tell apart: a table that is really missing a file AND has a live writer gets exit
3 every run, naming the same missing file each time; without a writer it stays exit 2. Nothing
here changes what a job deleted or committed before it failed: deleting jobs are
crash-safe and a rerun finishes their work (docs/safety.md).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from jobs.runtime.errors import EXIT_BAD_INPUT, EXIT_REFUSED, executor_error
from jobs.runtime.vanished_roots import missing_path, vanished_root
from paimon_format.errors import MissingFileError, PaimonFormatError, SnapshotNotFoundError
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

log = logging.getLogger(__name__)


def missing_file(error: BaseException) -> bool:
    """Whether `error` (also one carried back from a Spark task) says a file does not exist: a
    missing file, or a snapshot, tag or changelog read after it was listed."""
    remote = executor_error(error)
    error_class = remote[0] if remote else type(error)
    return issubclass(error_class, (MissingFileError, SnapshotNotFoundError))


def _open_table(config: Any) -> Table | None:
    warehouse, identifier = getattr(config, "warehouse", None), getattr(config, "table", None)
    if not warehouse or not identifier:
        return None
    try:
        return Table.open(warehouse, identifier, getattr(config, "storage_options", None))
    except (PaimonFormatError, OSError, ValueError) as error:
        log.debug("cannot open the table to judge a missing file: %s", error)
        return None


def committed_since(table: Table, started: str) -> Snapshot | None:
    """The table's latest snapshot when it was committed after `started` (a run record's ISO start
    time), else None; None too when the table cannot be read now (the original error stands)."""
    try:
        latest = table.snapshot_manager.latest()
    except (PaimonFormatError, OSError, ValueError) as error:
        log.debug("cannot tell whether another writer committed during the run: %s", error)
        return None
    started_ms = int(dt.datetime.fromisoformat(started).timestamp() * 1000)
    return latest if latest is not None and latest.time_millis >= started_ms else None


def race_or_bad_input(
    error: BaseException, code: int, message: str, config: Any, started: str
) -> tuple[int, str]:
    """(exit code, message) for a failed run: a missing file while another writer committed during
    the run, or whose snapshot, tag or changelog was expired meanwhile (`vanished_roots`), becomes a
    race (exit 3) saying why; anything else is unchanged."""
    if code != EXIT_BAD_INPUT or config is None or not missing_file(error):
        return code, message
    table = _open_table(config)
    if table is None:
        return code, message
    rival = committed_since(table, started)
    if rival is not None:
        return EXIT_REFUSED, (
            f"{message} -- snapshot {rival.id} was committed during this run (commit user "
            f"{rival.commit_user}): a live writer's own expiry removes the files of the snapshots and "
            "tags it expires, so the file most likely went with them; run the job again"
        )
    path = missing_path(error)
    reason = vanished_root(table, path) if path else None
    if reason is None:
        return code, message
    return EXIT_REFUSED, f"{message} -- {reason} (a live writer's own expiry); run the job again"
