"""The planned bins rewritten on the executors and committed as one COMPACT snapshot.

Crash ordering (see `jobs/compact.py` for the whole run):
1. One task per bin writes the new data files (and changelog files, on lookup / full-compaction
   changelog tables), reading its inputs ahead and uploading finished files in the background; the
   task returns its results only after every upload finished (a failed one fails the task). A
   crash here leaves only unreferenced files
   (`compact:after-files-written` is the last point before anything else), which
   remove-orphan-files deletes once they are older than its `older_than`. A failed run removes
   what it wrote: a task whose later bin failed deletes its finished bins' files itself, and the
   run's cleanup reads the other tasks' results back from Spark's cache, never rewriting a bin
   again to learn what it wrote (`CLEANUP_PASS`).
2. Executors write the delta manifests: a DELETE for every input (its ADD's exact metadata), an
   ADD for every output; and the changelog manifests (an ADD per changelog file). Still
   unreferenced.
3. The driver commits one COMPACT snapshot naming those manifests (create-if-absent). Before
   each attempt it reads the deltas of the snapshots that landed since the plan: a concurrent
   APPEND is kept; a snapshot that removed one of our inputs (another compaction, an overwrite,
   a drop) makes this run give up with exit 3 after removing what it wrote. `compact:after-commit`
   follows the commit.
   If Spark loses a cached bin result and recomputes it, the recomputed files are the ones the
   manifests name; the first ones stay unreferenced (remove-orphan-files), never half-committed.
"""

from __future__ import annotations

import contextlib
import logging
import math
import pickle
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.compaction.plan import BinSummary
from jobs.runtime.errors import CommitRaceLost
from jobs.runtime.job_group import run_action
from jobs.runtime.report import RunRecord
from paimon_format.commit import COMPACT, PrewrittenDelta, SnapshotCommit
from paimon_format.commit_conflicts import AttemptContext
from paimon_format.compaction.rewrite import RewriteSpec, read_order, rewrite_bin
from paimon_format.data.prefetch import tasks_for_files
from paimon_format.data.reader import prefetch_data_files
from paimon_format.data.uploads import Uploads
from paimon_format.errors import SnapshotNotFoundError
from paimon_format.index.deletion_vectors import DELETION_VECTORS_INDEX
from paimon_format.manifest.codec import read_manifest
from paimon_format.manifest.entries import ADD, DELETE, IndexManifestEntry, ManifestEntry, ManifestFileMeta
from paimon_format.manifest.files import rolling_write_manifests
from paimon_format.model.options import CoreOptions
from paimon_format.scan.snapshot_scan import index_entries, read_list
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark import RDD, Accumulator
    from pyspark.sql import DataFrame, SparkSession

# Entries (DELETE + ADD) one manifest-writing task puts into its rolling manifests.
ENTRIES_PER_WRITER = 200_000

Log = logging.Logger | logging.LoggerAdapter
# a Spark local property set while `_remove_written` reads the rewritten bins back (see there)
CLEANUP_PASS = "paimon.compaction.cleanup"


@dataclass
class BinResult:
    """What one bin's task returns to the driver (small: counts, no file lists)."""

    key: int
    partition: bytes
    bucket: int
    files_in: int
    rows_in: int
    bytes_in: int
    files_out: int
    rows_out: int
    bytes_out: int
    sample: str | None
    changelog_files: int = 0
    changelog_rows: int = 0


def rewrite_and_commit(
    spark: SparkSession,
    table: Table,
    planned: Snapshot,
    bins: DataFrame,
    summaries: list[BinSummary],
    spec: RewriteSpec,
    record: RunRecord,
    log: Log,
    before_commit: Callable[[], None] | None,
    own_snapshots: frozenset[int] = frozenset(),
) -> None:
    """Rewrite every summarised bin, write the delta and changelog manifests, commit once; a failure
    before the commit landed removes what this run wrote. `own_snapshots`: ids this run's earlier
    commit groups committed, on other buckets, so the rival check skips them unread."""
    compacted = frozenset((s.partition, s.bucket) for s in summaries)
    results, rewritten_bins, rewritten_rows = _rewrite_bins(spark, table, bins, summaries, spec)
    written_manifests: list[ManifestFileMeta] = []
    changelog_manifests: list[ManifestFileMeta] = []
    committed = False
    try:
        with _progress(log, rewritten_bins, rewritten_rows, len(summaries)):
            # a failed rewrite stops its running tasks before the cleanup below removes what they wrote
            summarised = run_action(spark, "compact: rewrite", results.map(_summarise).collect)
            done = [_bin_result(table, key, value) for key, value in summarised]
        crash_point("compact:after-files-written")
        _record_results(record, done, log)
        written_manifests, changelog_manifests = _write_delta_manifests(
            table, results, sum(r.files_in + r.files_out + r.changelog_files for r in done)
        )
        if before_commit is not None:
            before_commit()
        delta = PrewrittenDelta(
            written_manifests,
            sum(r.rows_out - r.rows_in for r in done),
            changelog_manifests,
            sum(r.changelog_rows for r in done),
        )
        snapshot = _commit(table, planned, compacted, results, delta, own_snapshots)
        committed = True
        record.snapshot_ids["committed"] = snapshot.id if snapshot else None
        crash_point("compact:after-commit")
        log.info(
            "snapshot %s: %d files -> %d files in %d bins",
            record.snapshot_ids["committed"],
            record.counts.get("files_rewritten", 0),
            record.counts.get("files_written", 0),
            len(done),
        )
    except Exception:
        # a failure (not a kill: KeyboardInterrupt/SystemExit pass, as a crash would) before the
        # commit landed: what this run wrote is referenced by nothing, so remove it now
        if not committed:
            _remove_written(table, results, written_manifests + changelog_manifests, log)
        raise
    finally:
        results.unpersist()


def _rewrite_bins(
    spark: SparkSession, table: Table, bins: DataFrame, summaries: list[BinSummary], spec: RewriteSpec
) -> tuple[RDD[tuple[int, Any]], Accumulator[int], Accumulator[int]]:
    """The persisted (lazy) RDD of rewritten bins, one task per bin, and its progress counters.

    A bin's payload is (inputs, deletion files, placement): see `plan._bin_row`.

    An item is key -> (partition, bucket, total buckets, inputs, outputs, changelog files): the
    file lists stay on the executors, the driver sees `BinResult` counts."""
    from pyspark import StorageLevel  # pyspark: loaded when the job runs, not on import (--help)

    keys = {(s.partition, s.bucket, s.bin): index for index, s in enumerate(summaries)}
    key_map = spark.sparkContext.broadcast(keys)

    def keyed(row: Any) -> Iterator[tuple[int, Any]]:
        key = key_map.value.get((bytes(row["partition"]), row["bucket"], row["bin"]))
        if key is not None:
            yield key, (bytes(row["partition"]), row["bucket"], row["total_buckets"], bytes(row["payload"]))

    rewritten_rows = spark.sparkContext.accumulator(0)
    rewritten_bins = spark.sparkContext.accumulator(0)

    def rewrite(items: Iterator[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
        if _in_cleanup_pass():  # a partition the failed run never finished: nothing of it to remove
            return
        # the task's bins (file metadata only) known up front, so their inputs are fetched ahead
        bins = [
            (key, part, bucket, total, *pickle.loads(payload))
            for key, (part, bucket, total, payload) in items
        ]
        ahead = ((b[1], b[2], meta) for b in bins for meta in read_order(b[4]))
        done: list[tuple[int, Any]] = []
        try:
            with prefetch_data_files(table, ahead) as prefetch, Uploads(table.file_io) as uploads:
                for key, partition, bucket, total_buckets, inputs, deletion_files, placement in bins:
                    output = rewrite_bin(
                        table, partition, bucket, inputs, spec, deletion_files, prefetch, uploads, placement
                    )
                    rewritten_bins.add(1)
                    rewritten_rows.add(sum(meta.row_count for meta in inputs))
                    done.append(
                        (
                            key,
                            (partition, bucket, total_buckets, inputs, output.files, output.changelog_files),
                        )
                    )
                uploads.wait()  # every output stored before any leaves the task (a failure fails it)
        except BaseException:
            # a later bin failed (its own writer removed its files): the bins this task finished are
            # named nowhere and its partition will not be cached for the run's cleanup, so go now
            with contextlib.suppress(Exception):  # leftovers are orphans: remove-orphan-files clears them
                table.file_io.delete_many(_written_paths(table, done))
            raise
        yield from done

    # bins share tasks (a few a core): each task's read-ahead spans its bins, and fewer tasks pay
    # Spark's per-task cost fewer times
    tasks = tasks_for_files(
        len(summaries), sum(s.bytes for s in summaries), spark.sparkContext.defaultParallelism
    )
    results = (
        bins.rdd.flatMap(keyed)
        .partitionBy(tasks, lambda key: key % tasks)
        .mapPartitions(rewrite, preservesPartitioning=True)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    return results, rewritten_bins, rewritten_rows


def _commit(
    table: Table,
    planned: Snapshot,
    compacted: frozenset[tuple[bytes, int]],
    results: RDD[tuple[int, Any]],
    delta: PrewrittenDelta,
    own_snapshots: frozenset[int],
) -> Snapshot | None:
    """The COMPACT snapshot; each attempt first refuses rivals that removed an input or changed the
    deletion vectors of a compacted bucket, and drops the compacted buckets' old vectors."""

    def check_rivals(ctx: AttemptContext) -> list[ManifestEntry]:
        _refuse_if_inputs_removed(table, planned.id, ctx.latest, results, own_snapshots)
        _refuse_if_deletions_changed(table, planned, ctx.latest, compacted)
        return []

    def rewritten_vectors(entry: IndexManifestEntry) -> bool:
        return entry.index_type == DELETION_VECTORS_INDEX and (entry.partition, entry.bucket) in compacted

    return SnapshotCommit(table).commit(
        check_rivals,
        kind=COMPACT,
        check_conflicts=False,
        prewritten_delta=lambda _ctx: delta,
        drop_index_entries=rewritten_vectors,
        properties={"paimon-jobs.operation": "compact"},
    )


@contextlib.contextmanager
def _progress(
    log: Log, bins: Accumulator[int], rows: Accumulator[int], total: int, interval_s: float = 10.0
) -> Iterator[None]:
    """Log `n of total bins rewritten` every `interval_s` while the rewrite runs (from accumulators,
    which the driver updates as tasks finish), so a long run shows it is alive."""
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(interval_s):
            log.info("compaction: %d of %d bins rewritten (%d rows) so far", bins.value, total, rows.value)

    reporter = threading.Thread(target=report, name="compact-progress", daemon=True)
    reporter.start()
    try:
        yield
    finally:
        stop.set()
        reporter.join()


def _summarise(item: tuple[int, Any]) -> tuple[int, Any]:
    key, (partition, bucket, _total, inputs, outputs, changelog) = item
    first = outputs[0].file_name if outputs else None
    return key, (partition, bucket, _counts(inputs), _counts(outputs), _counts(changelog), first)


def _counts(metas: Sequence[Any]) -> tuple[int, int, int]:
    return len(metas), sum(m.row_count for m in metas), sum(m.file_size for m in metas)


def _bin_result(table: Table, key: int, value: Any) -> BinResult:
    partition, bucket, counts_in, counts_out, changelog, first = value
    files_in, rows_in, bytes_in = counts_in
    files_out, rows_out, bytes_out = counts_out
    sample = f"{table.bucket_relpath(partition, bucket)}/{first}" if first else None
    return BinResult(
        key,
        partition,
        bucket,
        files_in,
        rows_in,
        bytes_in,
        files_out,
        rows_out,
        bytes_out,
        sample,
        changelog_files=changelog[0],
        changelog_rows=changelog[1],
    )


def _record_results(record: RunRecord, done: list[BinResult], log: Log) -> None:
    record.count("files_rewritten", sum(r.files_in for r in done))
    record.add_bytes("files_rewritten", sum(r.bytes_in for r in done))
    record.count("rows_rewritten", sum(r.rows_in for r in done))
    record.count("files_written", sum(r.files_out for r in done))
    record.add_bytes("files_written", sum(r.bytes_out for r in done))
    record.count("rows_written", sum(r.rows_out for r in done))
    record.sample("files_written", [r.sample for r in done if r.sample])
    if any(r.changelog_files for r in done):
        record.count("changelog_files", sum(r.changelog_files for r in done))
        record.count("changelog_rows", sum(r.changelog_rows for r in done))
    log.info(
        "%d bins rewritten: %d files (%d rows) -> %d files (%d rows)",
        len(done),
        record.counts["files_rewritten"],
        record.counts["rows_rewritten"],
        record.counts["files_written"],
        record.counts["rows_written"],
    )


def _write_delta_manifests(
    table: Table, results: RDD[tuple[int, Any]], entries: int
) -> tuple[list[ManifestFileMeta], list[ManifestFileMeta]]:
    """DELETE of every input and ADD of every output, written into manifests on the executors;
    and an ADD of every changelog file into changelog manifests. (delta, changelog) manifests."""
    options = CoreOptions(table.schema.options)
    target = options.manifest_target_file_size
    compression = options.manifest_compression
    partition_types = table.schema.partition_types()
    schema_id = table.schema.id
    manifest_dir = table.file_io.join(table.path, "manifest")

    def write(items: Iterator[tuple[int, Any]]) -> Iterator[bytes]:
        changes: list[ManifestEntry] = []
        changelog: list[ManifestEntry] = []
        for _key, (partition, bucket, total_buckets, inputs, outputs, changelog_files) in items:
            changes.extend(ManifestEntry(DELETE, partition, bucket, total_buckets, meta) for meta in inputs)
            changes.extend(ManifestEntry(ADD, partition, bucket, total_buckets, meta) for meta in outputs)
            changelog.extend(ManifestEntry(ADD, partition, bucket, total_buckets, m) for m in changelog_files)
        prefix = str(uuid.uuid4())
        counter = iter(range(1 << 30))
        for kind, entries in (("delta", changes), ("changelog", changelog)):
            if not entries:
                continue
            for meta in rolling_write_manifests(
                table.file_io,
                manifest_dir,
                lambda: f"manifest-{prefix}-{next(counter)}",
                entries,
                target,
                compression,
                partition_types,
                schema_id,
            ):
                yield pickle.dumps((kind, meta))

    writers = max(1, min(math.ceil(entries / ENTRIES_PER_WRITER), results.getNumPartitions()))
    action = results.coalesce(writers).mapPartitions(write).collect
    written = [pickle.loads(blob) for blob in run_action(results.context, "compact: manifests", action)]
    return (
        [meta for kind, meta in written if kind == "delta"],
        [meta for kind, meta in written if kind == "changelog"],
    )


def _refuse_if_inputs_removed(
    table: Table,
    planned: int,
    latest: Snapshot | None,
    results: RDD[tuple[int, Any]],
    own_snapshots: frozenset[int] = frozenset(),
) -> None:
    """Exit 3 when a snapshot after the plan removed one of the bins' inputs (read from its delta).
    This run's own earlier groups are skipped: they compacted other buckets, and reading them would
    hold every file the run compacted so far in the driver, and read them again at every group."""
    if latest is None or latest.id <= planned:
        return
    removed: set[tuple[bytes, int, str]] = set()
    for snapshot_id in range(planned + 1, latest.id + 1):
        if snapshot_id in own_snapshots:
            continue
        try:
            snapshot = latest if snapshot_id == latest.id else table.snapshot_manager.snapshot(snapshot_id)
        except SnapshotNotFoundError:
            raise CommitRaceLost(
                f"{table.path}: snapshot {snapshot_id} expired while this job ran, so the plan cannot be "
                "checked against it; nothing was committed, run compact again"
            ) from None
        for meta in read_list(table, snapshot.delta_manifest_list):
            for entry in read_manifest(table.file_io, table.manifest_path(meta.file_name), meta.file_size):
                if entry.kind == DELETE:
                    removed.add((entry.partition, entry.bucket, entry.file.file_name))
    if not removed:
        return
    gone = frozenset(removed)

    def hits(item: tuple[int, Any]) -> bool:
        _key, (partition, bucket, _total, inputs, _outputs, _changelog) = item
        return any((partition, bucket, meta.file_name) in gone for meta in inputs)

    clash = results.filter(hits).take(1)
    if clash:
        _key, (partition, bucket, _total, inputs, _outputs, _changelog) = clash[0]
        name = next(meta.file_name for meta in inputs if (partition, bucket, meta.file_name) in gone)
        raise CommitRaceLost(
            f"{table.path}: a commit after snapshot {planned} removed {name} (bucket {bucket}), which this "
            "run compacted; nothing was committed and the files it wrote were removed, run compact again"
        )


def _deletion_vector_files(table: Table, snapshot: Snapshot | None, buckets: frozenset) -> set[tuple]:
    if snapshot is None or not snapshot.index_manifest:
        return set()
    return {
        (entry.partition, entry.bucket, entry.file_name)
        for entry in index_entries(table, snapshot)
        if entry.index_type == DELETION_VECTORS_INDEX and (entry.partition, entry.bucket) in buckets
    }


def _refuse_if_deletions_changed(
    table: Table, planned: Snapshot, latest: Snapshot | None, buckets: frozenset
) -> None:
    """Exit 3 when a commit after the plan changed the deletion vectors of a bucket being compacted.

    The new files were written with the planned vectors applied; a row deleted since then would
    come back if the commit dropped the bucket's (newer) vectors with the old ones.
    """
    if latest is None or latest.id == planned.id or latest.index_manifest == planned.index_manifest:
        return
    if _deletion_vector_files(table, latest, buckets) != _deletion_vector_files(table, planned, buckets):
        raise CommitRaceLost(
            f"{table.path}: a commit after snapshot {planned.id} changed the deletion vectors of a bucket "
            "this run compacted; nothing was committed and the files it wrote were removed, run compact again"
        )


def _written_paths(table: Table, items: Iterable[tuple[int, Any]]) -> list[str]:
    """The data and changelog files of rewritten bins (items of `_rewrite_bins`' RDD)."""
    return [
        table.full_path(path)
        for _key, (partition, bucket, _total, _inputs, outputs, changelog) in items
        for meta in [*outputs, *changelog]
        for path in table.data_file_relpaths(partition, bucket, meta)
    ]


def _in_cleanup_pass() -> bool:
    """Whether this task runs for `_remove_written` (the job's local property `CLEANUP_PASS`)."""
    from pyspark import TaskContext  # in a Spark task: pyspark is loaded there anyway

    context = TaskContext.get()
    return context is not None and context.getLocalProperty(CLEANUP_PASS) == "1"


def _remove_written(
    table: Table, results: RDD[tuple[int, Any]], manifests: list[ManifestFileMeta], log: Log
) -> None:
    """Delete the data files and manifests of an uncommitted run (on the executors for data files)."""

    def delete(items: Iterator[tuple[int, Any]]) -> Iterator[int]:
        paths = _written_paths(table, items)
        if paths:
            table.file_io.delete_many(paths)
        yield len(paths)

    context = results.context
    try:
        # the cached partitions are read back; one the failed rewrite never finished is not computed
        # again (`rewrite` yields nothing in this pass: it would write its files only to delete them,
        # or fail again and leave the others' files behind)
        context.setLocalProperty(CLEANUP_PASS, "1")
        try:
            removed = sum(results.mapPartitions(delete).collect())
        finally:
            context.setLocalProperty(CLEANUP_PASS, None)  # type: ignore[arg-type]  # None unsets it
        if manifests:
            table.file_io.delete_many([table.manifest_path(meta.file_name) for meta in manifests])
        log.info(
            "nothing committed: removed the %d data files and %d manifests this run wrote",
            removed,
            len(manifests),
        )
    except Exception as error:  # leftovers are orphans; remove-orphan-files clears them
        log.warning("could not remove the files of the uncommitted run (%s); remove-orphan-files will", error)
