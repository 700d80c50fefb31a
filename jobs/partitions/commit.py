"""Dropping partitions: the commit that drop-partition and expire-partitions share (seed 004).

Paimon drops a partition by marking every live file in it as DELETE in one OVERWRITE snapshot; the
files themselves go when expire-snapshots expires the snapshots that still read them. The executors
read the manifests once (`jobs/partitions/scan.py`): they summarise the partitions and write the
DELETE entries of the chosen partitions' live files into new manifests; the driver receives only the
summaries and the manifest metadata, and commits them here as the delta of one OVERWRITE snapshot.

Why pre-written delta manifests rather than replacing the base manifests of the affected partitions:
snapshot expiry finds the files to remove from the DELETE entries of later snapshots' deltas, and
streaming readers follow deltas too. Removing the entries from the base instead would hide the files
from both, leaving them for orphan cleaning.

Concurrent writers: the DELETE entries are computed against the snapshot the job read (the plan). If
other snapshots land before our commit, their deltas are read on the driver (they are small): files
they add to a dropped partition are dropped too (what Paimon's overwrite does, since it recomputes
the deletes on the snapshot it commits on), changes to other partitions are kept as they are. If one
of them deleted a file of our plan (a compaction or another drop of the same partition), the plan is
stale: its manifests are removed and the job plans again (reading the manifests anew), a few times
at most. Snapshots this job committed itself (the earlier batches of expire-partitions) only delete
files of other partitions and are not read again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobs.partitions.scan import WrittenDeletes, remove_manifests, scan_partitions
from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError, CommitRaceLost
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import open_existing_table
from paimon_format.commit import OVERWRITE, PrewrittenDelta, SnapshotCommit
from paimon_format.commit_conflicts import AttemptContext
from paimon_format.errors import PaimonFormatError, SnapshotNotFoundError
from paimon_format.manifest.entries import ADD, ManifestEntry
from paimon_format.scan.partition_pruning import partitions_pruner
from paimon_format.scan.snapshot_scan import read_entries, read_list
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from jobs.runtime.local_frame import LocalSession

log = logging.getLogger(__name__)


def plan_deletes(
    spark: SparkSession | LocalSession, table: Table, snapshot: Snapshot, partitions: Collection[bytes]
) -> WrittenDeletes:
    """The DELETE manifests of every live file of `partitions` in `snapshot` (one read, on executors)."""
    wanted = frozenset(partitions)
    may_hold = partitions_pruner(wanted, table.partition_types)
    scan = scan_partitions(spark, table, snapshot, wanted.__contains__, write=True, may_hold=may_hold)
    assert scan.written is not None
    return scan.written


# -- the commit, aware of what landed since the plan -----------------------------------------


class StalePlan(PaimonFormatError):
    """A snapshot that landed after the plan deleted one of the planned files: plan again."""


def concurrent_deletes(
    table: Table,
    planned: int,
    latest: Snapshot | None,
    partitions: frozenset[bytes],
    own: Collection[int] = (),
) -> list[ManifestEntry]:
    """DELETE entries for files added to `partitions` by snapshots after `planned` up to `latest`.

    Raises StalePlan when one of those snapshots deleted a file the plan already deletes, or when
    a snapshot in between is gone (expired meanwhile), because then the plan cannot be checked.
    Snapshots in `own` were committed by this job for other partitions (earlier batches of the same
    scan): their deltas only delete files outside `partitions`, so they are not read.
    """
    if latest is None or latest.id <= planned:
        return []
    added: dict[tuple, ManifestEntry] = {}
    for snapshot_id in range(planned + 1, latest.id + 1):
        if snapshot_id in own:
            continue
        try:
            snapshot = latest if snapshot_id == latest.id else table.snapshot_manager.snapshot(snapshot_id)
        except SnapshotNotFoundError:
            raise StalePlan(f"{table.path}: snapshot {snapshot_id} expired while this job ran") from None
        # read_entries: the delta's manifests in flight (object stores are latency-bound)
        for entry in read_entries(table, read_list(table, snapshot.delta_manifest_list)):
            if entry.partition not in partitions:
                continue
            identifier = entry.identifier()
            if entry.kind == ADD:
                added[identifier] = entry
            elif identifier in added:
                del added[identifier]
            else:
                raise StalePlan(
                    f"{table.path}: snapshot {snapshot_id} ({snapshot.commit_kind}) removed "
                    f"{entry.file.file_name} from a partition being dropped"
                )
    return [entry.as_delete() for entry in added.values()]


@dataclass
class DropOutcome:
    """What one drop committed (snapshot None: nothing to drop)."""

    snapshot: Snapshot | None
    files: int = 0
    bytes: int = 0
    rows: int = 0
    concurrent_files: int = 0
    replans: int = 0
    manifests: list[str] = field(default_factory=list)


def drop_partitions(
    spark: SparkSession | LocalSession,
    table: Table,
    partitions: Sequence[bytes],
    max_replans: int = 3,
    before_commit: Callable[[], None] | None = None,
    step_prefix: str = "drop-partition",
    properties: dict[str, str] | None = None,
    first_plan: WrittenDeletes | None = None,
    own_snapshots: Collection[int] = (),
) -> DropOutcome:
    """Commit one OVERWRITE snapshot that deletes every live file of `partitions`.

    `first_plan`: DELETE manifests the caller's scan already wrote for exactly these partitions (the
    job reads the manifests once); a stale plan, or none, is made by scanning the latest snapshot.
    `own_snapshots`: snapshots this job committed since `first_plan`'s snapshot (see
    `concurrent_deletes`). `before_commit` is a test hook (a rival writer commits there); crash
    points are named `<step_prefix>:after-manifests-written` and `<step_prefix>:after-commit`.
    """
    wanted = frozenset(partitions)
    for replan in range(max_replans + 1):
        if replan == 0 and first_plan is not None:
            written = first_plan
        else:
            latest = table.snapshot_manager.latest()
            if latest is None:
                return DropOutcome(None)
            written = plan_deletes(spark, table, latest, wanted)
        if not written.manifests:
            return DropOutcome(None, replans=replan)
        crash_point(f"{step_prefix}:after-manifests-written")
        if before_commit is not None:
            before_commit()
        prewritten = PrewrittenDelta(written.manifests, -written.rows)
        extra: list[ManifestEntry] = []

        def build(
            ctx: AttemptContext, planned: int = written.snapshot_id, extra: list[ManifestEntry] = extra
        ) -> list[ManifestEntry]:
            extra[:] = concurrent_deletes(table, planned, ctx.latest, wanted, own_snapshots)
            return list(extra)

        try:
            snapshot = SnapshotCommit(table).commit(
                build,
                kind=OVERWRITE,
                check_conflicts=False,
                prewritten_delta=lambda _ctx, delta=prewritten: delta,
                properties=properties,
                drop_index_of=wanted.__contains__,
            )
        except StalePlan as stale:
            log.info("%s; planning again (%d of %d)", stale, replan + 1, max_replans)
            remove_manifests(table, written.manifests)
            continue
        except BaseException:
            remove_manifests(table, written.manifests)
            raise
        crash_point(f"{step_prefix}:after-commit")
        return DropOutcome(
            snapshot,
            files=written.files + len(extra),
            bytes=written.bytes + sum(e.file.file_size for e in extra),
            rows=written.rows + sum(e.file.row_count for e in extra),
            concurrent_files=len(extra),
            replans=replan,
            manifests=[m.file_name for m in written.manifests],
        )
    raise CommitRaceLost(
        f"{table.path}: other writers kept changing the partitions being dropped; "
        f"gave up after {max_replans + 1} plans, nothing was committed"
    )


# -- shared by the two jobs ---------------------------------------------------------------------


def open_partitioned_table(config: TableJobConfig) -> Table:
    """The configured table, which must exist and be partitioned (else exit 2 naming it)."""
    table = open_existing_table(config)
    if not table.schema.partition_keys:
        raise BadInputError(f"{table.path}: table {config.table} has no partition keys; nothing to drop")
    return table


def record_drop(record: RunRecord, outcome: DropOutcome) -> None:
    if outcome.snapshot is not None:
        record.committed(outcome.snapshot.id)
    record.count("files_dropped", outcome.files)
    record.add_bytes("files_dropped", outcome.bytes)
    record.count("rows_dropped", outcome.rows)
    record.count("concurrent_files_dropped", outcome.concurrent_files)
    record.count("replans", outcome.replans)
    record.sample("delete_manifests", outcome.manifests)
