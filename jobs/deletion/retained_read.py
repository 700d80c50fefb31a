"""A lenient read of the retained roots on a live table: what it could not read is noted, not fatal.

Why: Paimon's Java writers expire their own snapshots and tags while our deletion jobs run. A job
that listed the retained roots and then reads their manifest lists, manifests and index manifests
can find some of them deleted (the soak saw expire-tags refused in 98 of 345 runs for that alone).
Failing is safe but makes the job fail most of the time on a live table. Reading leniently is safe
only together with the check the caller makes before it deletes anything: each missing file is
judged by `jobs.runtime.vanished_roots.vanished_manifests`, and the run goes on only when no root
present names it any more (the roots that named it were expired during the run, and with them
everything that only they needed); anything still named fails the run as a strict read would have.

What a lenient read notes, per retained root (rows of the retained readers, collected here):
- `missing`: a manifest-directory file (list, manifest, index manifest) that was not there;
- `vanished`: a root listed at planning and gone when read (it protects nothing any more: whoever
  deleted it judged its files against the roots present, and every present root is protected);
- `snapshot`: the lists, index manifest and statistics of a retained snapshot as the read saw them,
  so that a tag created during the run on that very snapshot is known to need nothing more.

The judgment (`judge_retained_read`, shared by expire-tags and remove-orphan-files, run before
anything is deleted and in a dry run too): too many missing files (`MISSING_LIMIT`) is no race and
fails; each missing one must be named by no root present now (`vanished_manifests`), else the run
fails as a strict read would have (MissingFileError: exit 3 with a rival commit, else exit 2); and
when anything was skipped (a missing file or a root gone when read), each branch's latest snapshot
at planning must have been read (its lists) and still be there, checked before and after the
verdicts (`_require_latest_read_whole`: the snapshots committed during the run are never read and
carry its files; exit 3 otherwise).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jobs.runtime.errors import SafetyRefusal
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.vanished_roots import forget_reads_of, vanished_manifests
from paimon_format.errors import MissingFileError, SnapshotNotFoundError
from paimon_format.maintenance.references import (
    SNAPSHOT_ROOT,
    RootReferences,
    root_references,
    snapshot_root_references,
)
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MISSING, VANISHED, SNAPSHOT = "missing", "vanished", "snapshot"
NOTES = (MISSING, VANISHED, SNAPSHOT)
# The path of a reader's row that notes a missing manifest instead of a file it names. It sorts
# before every table-relative path and is never one (those start with a directory name).
MISSING_MARK = "\x00missing"
_SEPARATOR = "\x1f"
# Missing manifests judged at most; more than this on one run is no race (the first one fails it).
MISSING_LIMIT = 1000

# (base manifest list, delta manifest list, index manifest, statistics), "" for none
Signature = tuple[str, str, str, str]


@dataclass
class RetainedRead:
    """What a lenient read of the retained side noted besides the paths it protects."""

    missing: list[str] = field(default_factory=list)  # paths of manifest-directory files not there
    vanished: list[str] = field(default_factory=list)  # "branch/kind/name" of roots gone when read
    snapshots: dict[tuple[str, int], Signature] = field(default_factory=dict)  # (branch, id): as read
    # branch: its newest snapshot among the roots listed for the read (its latest at planning)
    latest_at_plan: dict[str, int] = field(default_factory=dict)

    def covers(self, branch: str, tag: Snapshot) -> bool:
        """Whether the read took a retained snapshot of `branch` with the tag's id, lists, index
        manifest and statistics as a root: then it protected every file the tag needs (a tag needs
        exactly what its snapshot needs, less the changelog)."""
        return self.snapshots.get((branch, tag.id)) == signature(tag)

    def note_latest(self, roots: list[tuple[str, str, str]]) -> None:
        """Remember each branch's newest snapshot among the `roots` (branch, kind, name) read."""
        for branch, kind, name in roots:
            if kind == SNAPSHOT_ROOT and int(name) > self.latest_at_plan.get(branch, -1):
                self.latest_at_plan[branch] = int(name)


def signature(snapshot: Snapshot) -> Signature:
    return (
        snapshot.base_manifest_list or "",
        snapshot.delta_manifest_list or "",
        snapshot.index_manifest or "",
        snapshot.statistics or "",
    )


def read_retained_root(
    table: Table, branch: str, kind: str, name: str
) -> tuple[RootReferences | None, list[tuple[str, str]]]:
    """(what a retained root of `table`'s `branch` names, its notes as (what, value) rows). A
    missing manifest list gives no references and a `missing` note; other errors propagate."""
    branch_table = table.for_branch(branch)
    try:
        if kind == SNAPSHOT_ROOT:
            try:
                snapshot = branch_table.snapshot_manager.snapshot(int(name))
            except SnapshotNotFoundError:
                snapshot = None
            if snapshot is not None:
                value = _SEPARATOR.join((branch, name, *signature(snapshot)))
                return snapshot_root_references(branch_table, snapshot, True), [(SNAPSHOT, value)]
        found = root_references(branch_table, kind, name)  # a snapshot gone: handed over, or expired
    except MissingFileError as error:
        return None, [(MISSING, error.path)]
    return found, [] if found is not None else [(VANISHED, f"{branch}/{kind}/{name}")]


def collect_notes(F: Any, needs: DataFrame, read: RetainedRead) -> None:  # noqa: N803 - pyspark's functions
    """Add the notes of the retained roots' rows (`needs`: root, what, value; checkpointed) to `read`:
    one row per root at most, a small collect."""
    for row in needs.filter(F.col("what").isin(*NOTES)).select("what", "value").collect():
        add_note(read, row["what"], row["value"])


def add_note(read: RetainedRead, what: str, value: str) -> None:
    """Add one note row (`what` one of NOTES) of `read_retained_root` to `read`."""
    if what == MISSING:
        read.missing.append(value)
    elif what == VANISHED:
        read.vanished.append(value)
    else:
        branch, snapshot_id, base, delta, index, statistics = value.split(_SEPARATOR)
        read.snapshots[(branch, int(snapshot_id))] = (base, delta, index, statistics)


# {path: why it vanished, or None when a present root still names it}, as `vanished_manifests` answers
Verdicts = Callable[[Table, list[str]], dict[str, str | None]]


def judge_retained_read(
    table: Table,
    record: RunRecord,
    log: logging.Logger | logging.LoggerAdapter,
    read: RetainedRead,
    prefix: str,
    verdicts: Verdicts | None = None,
) -> None:
    """Before anything is deleted (also in a dry run): every file the lenient `read` found missing
    must be named by no root present now, else the run fails as a strict read would have
    (MissingFileError); with anything skipped each branch's latest snapshot at planning must have
    been read and still be there (exit 3). Counts `<prefix>roots_vanished` and
    `<prefix>manifests_vanished` (the skipped ones, with why, in the details).

    `verdicts` judges the missing paths (default: this module's `vanished_manifests`, looked up at
    the call, so that a test can stand in for an expiry that completes while it is judged; a caller
    may hand its own module's name of it for the same reason)."""
    record.count(f"{prefix}roots_vanished", len(read.vanished))
    if read.vanished:
        record.details[f"{prefix}roots_vanished"] = sorted(read.vanished)[:SAMPLE_LIMIT]
        log.info("%d roots were deleted before they were read: %s", len(read.vanished), read.vanished[:5])
    skipped_any = bool(read.missing or read.vanished)
    if skipped_any:
        _require_latest_read_whole(table, read)
    missing = sorted(set(read.missing))
    if len(missing) > MISSING_LIMIT:
        raise MissingFileError(missing[0], f"a retained root; {len(missing) - 1} more manifests are missing")
    judged = (verdicts or vanished_manifests)(table, missing) if missing else {}
    named = [path for path, why in judged.items() if why is None]
    if named:
        more = f"; {len(named) - 1} more" if len(named) > 1 else ""
        raise MissingFileError(named[0], f"a snapshot, tag or changelog present now{more}")
    if skipped_any:  # again after the verdicts: they may have waited for that snapshot to vanish
        _require_latest_read_whole(table, read)
    record.count(f"{prefix}manifests_vanished", len(judged))
    if judged:
        record.details[f"{prefix}manifests_vanished"] = dict(list(judged.items())[:SAMPLE_LIMIT])
        log.info("%d manifests went with roots expired during the run: skipped", len(judged))


def _require_latest_read_whole(table: Table, read: RetainedRead) -> None:
    """Exit 3 unless each branch's latest snapshot at planning was read and is still there.

    Why: snapshots committed during the run are not read; they are safe only because they carry
    files from the snapshot that was latest at planning (read in full) or new files. When that
    snapshot was expired during the run (newer ones committed, then the writer's own expiry), the
    lenient read may have skipped its lists or manifests as vanished, and what it shared with the
    unread new snapshots would be protected by nothing. Checked before and after the verdicts on
    the missing manifests: still there after them means it was there all through the verdicts, so
    a missing manifest it names was judged named (a failure), never vanished; gone after them (the
    verdicts may wait for an expiry in progress) refuses."""
    for branch, latest in sorted(read.latest_at_plan.items()):
        path = table.for_branch(branch).snapshot_manager.snapshot_path(latest)
        forget_reads_of(table.file_io, path)  # the store's answer, not what the run read earlier
        if (branch, latest) not in read.snapshots or not table.file_io.file_exists(path):
            raise SafetyRefusal(
                f"{table.path}: snapshot {latest} of branch {branch}, the latest when this job planned, "
                "was expired while it ran and some retained metadata was gone when read; nothing was "
                "deleted: run the job again"
            )
