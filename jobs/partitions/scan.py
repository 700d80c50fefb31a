"""One read of a snapshot's manifests for the partition jobs (drop-partition, expire-partitions).

Why one read: both jobs need per-partition summaries (to choose partitions and to report them) and
the DELETE entries of the chosen partitions' live files. Reading every manifest twice for that, and
sending one row per file through Spark aggregations, cost twice compact-manifests' CPU per entry.

1. Scan (one task per slice of manifest names): each manifest is read once and decoded with
   fastavro into plain records; no ManifestEntry is built here. A task reads its next manifests
   while it decodes one (`paimon_format.manifest.read_ahead`): on an object store each read waits a
   round trip, so one after another a task would be bound by latency. A partition's bytes decide, once per
   partition and task, whether it is *wanted* (it may be dropped: it matches drop-partition's
   selection, or is expired by its values). A wanted partition's entries are shipped as one pickled
   list of `RawEntry` (identity, counts and the entry's Avro bytes) per (manifest, partition); an
   unwanted one only as net counts (ADDs minus DELETEs of files, bytes, rows), which is exact for
   consistent metadata and all the report needs of it.
2. Merge (a hash shuffle by partition, rows in manifest order): per wanted partition, ADD/DELETE
   pairs cancel in `EntryMerger`, which refuses inconsistent metadata (a file added twice, a DELETE
   without its ADD); one summary row per live partition goes to the driver, and, when asked, the
   DELETE entries of the live files are written into manifests by the same task: each is its ADD's
   bytes with the kind changed (`RawEntry.as_delete`), nothing is encoded again.

Without DELETE entries (an append-only snapshot: its manifest list says so), drop-partition skips
step 2: each scan task writes the DELETEs of the wanted partitions' files it reads, and a stable
hash per dropped file lets the driver notice a file added twice (then the merge path runs and
refuses it).

Two ways to use it:
- `write=True` (drop-partition): every wanted partition with live files is dropped, so the scan
  writes the DELETE manifests at once: one Spark job reads, merges and writes.
- `keep=True` (expire-partitions): which wanted partitions go (`max_expires` in value order, commit
  batches) is decided on the driver from the summaries; the shuffled rows stay persisted and
  `PartitionScan.write_deletes` writes the chosen partitions' manifests from them, without reading
  the manifests again.

Nothing here commits. Manifests written by a scan that then fails (an inconsistent partition in
another task) are removed before the error is raised; if the process dies first, they are
unreferenced manifests that remove-orphan-files collects.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import pickle
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from jobs.partitions.scan_tasks import (
    CHECKED,
    DIRECT,
    HASH_RANGE_BITS,
    MERGED,
    SCANNED,
    ManifestTarget,
    check_identities_task,
    merge_partitions_task,
    scan_and_drop_task,
    scan_manifests_task,
)
from jobs.runtime.spark import DRIVER_LIST_LIMIT, assert_small, driver_list_frame
from paimon_format.errors import InvalidTableStateError
from paimon_format.manifest.entries import ManifestFileMeta
from paimon_format.model.partition_spec import PartitionStats
from paimon_format.scan.snapshot_scan import data_manifests
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from jobs.runtime.local_frame import LocalFrame, LocalSession

log = logging.getLogger(__name__)

_EPOCH = dt.datetime(1970, 1, 1)
# Live files per merge task, roughly: more entries than this spread over more tasks.
FILES_PER_WRITER = 200_000


def manifest_frame(
    spark: SparkSession | LocalSession, manifests: Sequence[ManifestFileMeta]
) -> DataFrame | LocalFrame:
    """A DataFrame of (idx, name, size): one row per manifest, spread over tasks for the executors."""
    columns = {
        "idx": pa.array(range(len(manifests)), pa.int64()),
        "name": pa.array([meta.file_name for meta in manifests], pa.string()),
        "size": pa.array([meta.file_size for meta in manifests], pa.int64()),
    }
    return driver_list_frame(spark, columns, "manifest names")


@dataclass
class WrittenDeletes:
    """The DELETE manifests of one plan, and what they drop."""

    snapshot_id: int
    manifests: list[ManifestFileMeta]
    files: int
    bytes: int
    rows: int


# -- the driver side ----------------------------------------------------------------------------


@dataclass
class PartitionScan:
    """The summaries of a snapshot's live partitions, and the DELETE manifests written so far."""

    table: Table
    snapshot_id: int
    stats: list[PartitionStats]
    written: WrittenDeletes | None = None  # write=True: the DELETE manifests of every wanted partition
    # keep=True: the persisted shuffled rows
    _arranged: DataFrame | LocalFrame | None = field(default=None, repr=False)
    # keep=True on the direct path: the DELETE manifests of every wanted partition, written at once
    # (handed over when exactly those partitions are asked for), and how to arrange the rows instead
    _direct: tuple[frozenset[bytes], WrittenDeletes] | None = field(default=None, repr=False)
    _arrange: Callable[[], DataFrame | LocalFrame | None] | None = field(default=None, repr=False)
    skipped_manifests: int = 0  # not read: their partition stats rule every wanted partition out

    def write_deletes(self, partitions: Iterable[bytes]) -> WrittenDeletes:
        """The DELETE manifests of `partitions`: written from the kept rows (no manifest is read
        again), or the direct scan's when they are exactly its wanted partitions (one batch of
        everything a values-time expiry selects, its usual case)."""
        chosen = frozenset(partitions)
        if not chosen:
            return WrittenDeletes(self.snapshot_id, [], 0, 0, 0)
        if self._direct is not None:
            wanted, written = self._direct
            self._direct = None
            if chosen == wanted:
                return written
            remove_manifests(self.table, written.manifests)  # another selection: arrange the rows
            log.info(
                "%s: %d of %d partitions chosen: arranging the scan by partition",
                _source(self.table, self.snapshot_id),
                len(chosen),
                len(wanted),
            )
            self._arranged = self._arrange() if self._arrange is not None else None
        if self._arranged is None:
            raise RuntimeError("write_deletes needs a scan made with keep=True")
        task = functools.partial(
            merge_partitions_task,
            table=self.table,
            source=_source(self.table, self.snapshot_id),
            target=ManifestTarget.of(self.table),
            chosen=chosen,
        )
        _stats, written = _collect(self.table, self.snapshot_id, self._arranged.mapInArrow(task, MERGED))
        return written

    def close(self) -> None:
        """Release the kept rows, and remove direct DELETE manifests nobody took."""
        if self._direct is not None:
            remove_manifests(self.table, self._direct[1].manifests)
            self._direct = None
        if self._arranged is not None:
            self._arranged.unpersist()
            self._arranged = None


def _source(table: Table, snapshot_id: int) -> str:
    return f"{table.path} snapshot {snapshot_id}"


def scan_partitions(
    spark: SparkSession | LocalSession,
    table: Table,
    snapshot: Snapshot | None,
    wanted: Callable[[bytes], bool],
    write: bool = False,
    keep: bool = False,
    direct: bool = False,
    summarize_all: bool = False,
    may_hold: Callable[[ManifestFileMeta], bool] | None = None,
) -> PartitionScan:
    """Summaries of the live partitions of `snapshot` (None: an empty table), every manifest read once.

    `wanted(partition bytes)` runs on the executors (it must be picklable): only wanted partitions
    are merged file by file (and checked for consistent metadata); the others are counted. With
    `write`, the DELETE manifests of every wanted live partition are written in the same job; with
    `keep`, `write_deletes` writes those of chosen partitions later, until `close`.

    `direct`: when no manifest of the snapshot counts a DELETE entry, the scan tasks write the
    DELETEs themselves with no shuffle (`scan_and_drop_task`); the summaries cover the wanted
    partitions only, or all with `summarize_all`. With `keep` that happens as well (unless it is a
    dry run's scan, without `write` or `keep`), betting that all wanted partitions are chosen; any
    other choice removes them and arranges the rows by partition as the merge path does. A file
    added twice sends the scan down the merge path, which refuses it.

    `may_hold(manifest)` False: its partition stats prove it holds no wanted partition
    (`paimon_format.scan.partition_pruning`), so it is not read. The summaries then cover the wanted
    partitions only (an unwanted one's ADD and DELETE may be in a read and a skipped manifest), so
    it suits the scans that need only those; it cannot go with `summarize_all`.
    """
    if may_hold is not None and summarize_all:
        raise ValueError("a pruned scan summarises the wanted partitions only: not with summarize_all")
    if snapshot is None:
        return PartitionScan(table, 0, [], WrittenDeletes(0, [], 0, 0, 0) if write else None)
    manifests, skipped = _manifests_to_read(table, snapshot, may_hold)
    if not manifests:
        return PartitionScan(
            table,
            snapshot.id,
            [],
            WrittenDeletes(snapshot.id, [], 0, 0, 0) if write else None,
            skipped_manifests=skipped,
        )
    started = time.perf_counter()
    arrange = functools.partial(
        _scan_and_merge, spark, table, snapshot, manifests, wanted, count_others=may_hold is None
    )
    found = None
    if direct and not any(m.num_deleted_files for m in manifests):
        found = _scan_and_drop(spark, table, snapshot, manifests, wanted, write or keep, summarize_all)
    if found is not None:
        (stats, written), arranged = found, None
    else:
        stats, written, arranged = arrange(write=write, keep=keep)
    _log_scan(table, snapshot, manifests, found is not None, started, stats, written)
    if found is not None and keep:
        selected = frozenset(s.partition for s in stats if wanted(s.partition))
        return PartitionScan(
            table,
            snapshot.id,
            stats,
            None,  # handed over by write_deletes (or removed by close), never committed as .written
            _direct=(selected, written),
            _arrange=lambda: arrange(write=False, keep=True)[2],
            skipped_manifests=skipped,
        )
    return PartitionScan(
        table, snapshot.id, stats, written if write else None, arranged, skipped_manifests=skipped
    )


def _manifests_to_read(
    table: Table, snapshot: Snapshot, may_hold: Callable[[ManifestFileMeta], bool] | None
) -> tuple[list[ManifestFileMeta], int]:
    """The snapshot's data manifests that may hold a wanted partition, and how many were skipped."""
    listed = data_manifests(table, snapshot)
    manifests = listed if may_hold is None else [meta for meta in listed if may_hold(meta)]
    skipped = len(listed) - len(manifests)
    if skipped:
        log.info(
            "%s: %d of %d manifests hold no wanted partition by their stats: not read",
            _source(table, snapshot.id),
            skipped,
            len(listed),
        )
    return manifests, skipped


def _log_scan(
    table: Table,
    snapshot: Snapshot,
    manifests: Sequence[ManifestFileMeta],
    direct: bool,
    started: float,
    stats: list[PartitionStats],
    written: WrittenDeletes,
) -> None:
    log.info(
        "%s: %d manifests (%d entries%s) read once in %.1f s: %d partitions summarised, %d DELETE "
        "manifests written",
        _source(table, snapshot.id),
        len(manifests),
        sum(m.num_added_files + m.num_deleted_files for m in manifests),
        ", no DELETE: no shuffle" if direct else "",
        time.perf_counter() - started,
        len(stats),
        len(written.manifests),
    )


def _scan_and_merge(
    spark: SparkSession | LocalSession,
    table: Table,
    snapshot: Snapshot,
    manifests: Sequence[ManifestFileMeta],
    wanted: Callable[[bytes], bool],
    write: bool,
    keep: bool,
    count_others: bool = True,
) -> tuple[list[PartitionStats], WrittenDeletes, DataFrame | LocalFrame | None]:
    """The merge path: scan, shuffle by partition, merge; the persisted rows too with `keep`."""
    from pyspark import StorageLevel  # pyspark: loaded by a scan that runs, never by importing this module

    parallelism = spark.sparkContext.defaultParallelism
    entries = sum(m.num_added_files + m.num_deleted_files for m in manifests)
    tasks = max(parallelism, min(-(-entries // FILES_PER_WRITER), parallelism * 4))
    scanned = manifest_frame(spark, manifests).mapInArrow(
        functools.partial(scan_manifests_task, table=table, wanted=wanted, count_others=count_others), SCANNED
    )
    arranged = scanned.repartition(tasks, "partition").sortWithinPartitions("partition", "ord")
    if keep:
        arranged = arranged.persist(StorageLevel.MEMORY_AND_DISK)
    task = functools.partial(
        merge_partitions_task,
        table=table,
        source=_source(table, snapshot.id),
        target=ManifestTarget.of(table) if write else None,
        chosen=None,
    )
    try:
        stats, written = _collect(table, snapshot.id, arranged.mapInArrow(task, MERGED))
    except BaseException:
        if keep:
            arranged.unpersist()
        raise
    return stats, written, arranged if keep else None


def _scan_and_drop(
    spark: SparkSession | LocalSession,
    table: Table,
    snapshot: Snapshot,
    manifests: Sequence[ManifestFileMeta],
    wanted: Callable,
    write: bool,
    summarize_all: bool = False,
) -> tuple[list[PartitionStats], WrittenDeletes] | None:
    """The direct path (`scan_and_drop_task`); None when a dropped file's name repeats (or two hashes
    collide): its manifests are removed and the caller takes the merge path, which says what is wrong."""
    target = ManifestTarget.of(table) if write else None
    task = functools.partial(
        scan_and_drop_task, table=table, wanted=wanted, target=target, summarize_others=summarize_all
    )
    # one job: the scan tasks, then the hash ranges brought together (the other rows pass through)
    scanned = manifest_frame(spark, manifests).mapInArrow(task, DIRECT)
    checked = scanned.repartition(1 << HASH_RANGE_BITS, "hash_range").mapInArrow(
        check_identities_task, CHECKED
    )
    rows = checked.collect()
    repeats = sum(row["repeats"] for row in rows if row["repeats"] is not None)
    stats, written = _collected(table, snapshot.id, [row for row in rows if row["repeats"] is None])
    if repeats:
        remove_manifests(table, written.manifests)
        log.info("%s: a dropped file's name repeats: merging entry by entry", _source(table, snapshot.id))
        return None
    return stats, written


def _collect(
    table: Table, snapshot_id: int, merged: DataFrame | LocalFrame
) -> tuple[list[PartitionStats], WrittenDeletes]:
    """Run a merge job: its summaries and written manifests; its first error after removing those."""
    return _collected(table, snapshot_id, merged.collect())


def _collected(
    table: Table, snapshot_id: int, rows: list[Any]
) -> tuple[list[PartitionStats], WrittenDeletes]:
    """A merge job's collected rows: its summaries and written manifests; its first error after
    removing those."""
    assert_small(len(rows), DRIVER_LIST_LIMIT, "partitions")
    metas = [pickle.loads(row["meta"]) for row in rows if row["meta"] is not None]
    errors = [row["error"] for row in rows if row["error"]]
    if errors:
        remove_manifests(table, metas)
        raise InvalidTableStateError(f"{errors[0]}; the metadata is inconsistent, nothing was changed")
    written = [row for row in rows if row["meta"] is not None]
    totals: dict[bytes, list[Any]] = {}  # one row per partition, or one per partition and task
    for row in rows:
        if row["meta"] is None:
            total = totals.setdefault(bytes(row["partition"]), [0, 0, 0, None])
            total[0] += int(row["files"])
            total[1] += int(row["bytes"] or 0)
            total[2] += int(row["rows"] or 0)
            if row["created"] is not None and (total[3] is None or row["created"] > total[3]):
                total[3] = row["created"]
    stats = [
        PartitionStats(
            partition=partition,
            file_count=files,
            file_bytes=size,
            row_count=count,
            last_file_creation=None if created is None else _EPOCH + dt.timedelta(milliseconds=created),
        )
        for partition, (files, size, count, created) in totals.items()
    ]
    return stats, WrittenDeletes(
        snapshot_id,
        metas,
        sum(row["files"] for row in written),
        sum(row["bytes"] for row in written),
        sum(row["rows"] for row in written),
    )


def remove_manifests(table: Table, metas: Sequence[ManifestFileMeta]) -> None:
    """Remove manifests this job wrote and no snapshot names (a lost or abandoned plan)."""
    if metas:
        table.file_io.delete_many([table.manifest_path(meta.file_name) for meta in metas])
