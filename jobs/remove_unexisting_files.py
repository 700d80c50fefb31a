"""remove-unexisting-files: repair a table whose data files were lost (Paimon's remove_unexisting_files).

The latest snapshot's data manifests are read on the executors, ADD and DELETE entries merged into
the live files (per file identifier, as readers do), and every live file's existence is checked on
the executors (its path, or its external path), many checks in flight per task (`io_parallelism`:
on an object store each check is a round trip). The missing ones are reported exactly: path,
partition, bucket, rows (`details.missing`, the first 1,000; counts of files and rows per
partition), and then removed from the table by one commit of DELETE entries grouped per partition
and bucket (kind OVERWRITE, conflict-checked: a concurrent commit that changed one of those files
makes the run exit 3 and commit nothing). Older snapshots and tags are not changed; they still name
the lost files, so reading them fails as before.

Deletion vectors of lost files leave the index too, so that the repaired snapshot names no index
data for a file it no longer has (as Paimon's own compaction drops the vectors of the files it
removes; Paimon's repair action leaves them, which readers tolerate but which keeps stale bitmaps in
every later DV rewrite of the bucket). A DV index file naming only lost files leaves the index
manifest; one naming live files too is rewritten without the lost ones' vectors (the new index file
is written before the commit: a crash leaves an orphan, never a snapshot naming a missing file). The
commit refuses (exit 3) when another writer changed those index files meanwhile.

Refused (exit 3, nothing committed) when more than `max_missing_ratio` of the live files are missing:
that is a wrong path, a permissions problem or a storage outage far more often than a loss, and
the commit would silently empty the table. A dry run reports and commits nothing. Only the commit
writes, so a crash leaves the table as it was or repaired.

Spark-submit entry: `spark-submit jobs/remove_unexisting_files.py --config conf/remove-unexisting-files.yaml`.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from pydantic import Field

from jobs.repair.breaker import refuse_beyond_ratio
from jobs.runtime.config import TableJobConfig
from jobs.runtime.local_frame import functions_for
from jobs.runtime.registry import JobContext
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.spark import assert_small, parallelize_small
from jobs.runtime.table_open import open_existing_table
from paimon_format.commit import OVERWRITE, CommitMessage, SnapshotCommit
from paimon_format.commit_conflicts import AttemptContext
from paimon_format.errors import CommitConflictError
from paimon_format.index.deletion_vectors import (
    DELETION_VECTORS_INDEX,
    drop_deletion_vectors,
    index_file_path,
)
from paimon_format.manifest.codec import decode_manifest
from paimon_format.manifest.entries import ADD, IndexManifestEntry, ManifestEntry
from paimon_format.manifest.read_ahead import sized_bytes
from paimon_format.scan.snapshot_scan import data_manifests, index_entries
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.storage.in_flight import map_in_flight
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

OPERATION = "remove-unexisting-files"
MISSING_LIMIT = 1_000_000  # missing entries the driver holds for the commit
DETAIL_LIMIT = 1000
_ENTRY_COLUMNS = "key string, kind int, path string, rows long, entry binary"
_ENTRY_SCHEMA = pa.schema(
    [
        ("key", pa.string()),
        ("kind", pa.int32()),
        ("path", pa.string()),
        ("rows", pa.int64()),
        ("entry", pa.binary()),
    ]
)


class RemoveUnexistingFilesConfig(TableJobConfig):
    max_missing_ratio: float = Field(
        default=0.1, ge=0, le=1, description="refuse (exit 3) when more of the live files are missing"
    )


CONFIG_MODEL = RemoveUnexistingFilesConfig


def run(context: JobContext, config: RemoveUnexistingFilesConfig) -> None:
    table = open_existing_table(config)
    remove_unexisting_files(
        context.spark,
        table,
        max_missing_ratio=config.max_missing_ratio,
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
    )


def remove_unexisting_files(
    spark: SparkSession,
    table: Table,
    *,
    max_missing_ratio: float = 0.1,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """Find the latest snapshot's missing data files and commit their removal (module docstring)."""
    log = log or logging.getLogger("jobs.remove_unexisting_files")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    latest = table.snapshot_manager.latest()
    if latest is None:
        record.count("missing_files", 0)
        return record
    record.snapshot_ids["scanned"] = latest.id
    live = _live_files(spark, table, latest)
    missing = live.mapInArrow(_missing_only(table), live.schema).localCheckpoint(eager=True)
    live_count = live.count()
    F = functions_for(spark)
    missing_count, missing_rows = missing.agg(F.count("path"), F.sum("rows")).first()
    missing_rows = missing_rows or 0
    record.count("live_files", live_count)
    record.count("missing_files", missing_count)
    record.count("rows_lost", missing_rows)
    ratio = missing_count / live_count if live_count else 0.0
    record.details["missing_ratio"] = round(ratio, 6)
    log.info("%d of %d live files are missing (%d rows)", missing_count, live_count, missing_rows)
    try:
        if missing_count == 0:
            return record
        assert_small(missing_count, MISSING_LIMIT, "missing files")
        lost = [pickle.loads(row["entry"]) for row in missing.select("entry").toLocalIterator()]
        _record_missing(table, lost, record)
        refuse_beyond_ratio(table.path, missing_count, live_count, max_missing_ratio, "live files")
        vectors = lost_deletion_vectors(table, latest, lost)
        record.count("deletion_vector_files_to_drop", len(vectors))
        record.sample("deletion_vector_files_to_drop", [e.file_name for e in vectors[:SAMPLE_LIMIT]])
        crash_point(f"{OPERATION}:planned")
        if dry_run:
            log.info("dry run: nothing committed")
            return record
        snapshot = commit_removal(table, lost, vectors)
        record.snapshot_ids["committed"] = snapshot.id
        record.count("files_removed", len(lost))
        record.count("deletion_vector_files_dropped", len(vectors))
        log.info("committed snapshot %d removing %d missing files", snapshot.id, len(lost))
        return record
    finally:
        live.unpersist()
        missing.unpersist()


def _live_files(spark: SparkSession, table: Table, latest: Snapshot) -> DataFrame:
    """The latest snapshot's live data files (path, rows, the pickled ADD entry), checkpointed: its
    data manifests read on the executors, ADD and DELETE entries merged per file identifier."""
    F = functions_for(spark)
    manifests = [(meta.file_name, meta.file_size) for meta in data_manifests(table, latest)]
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    names = spark.createDataFrame(
        parallelize_small(spark, manifests, what="manifests"), "manifest string, size long"
    )
    entries = names.repartition(parallelism * 2).mapInArrow(_entry_reader(table), _ENTRY_COLUMNS)
    return (
        entries.groupBy("key")
        .agg(
            F.sum(F.when(F.col("kind") == ADD, 1).otherwise(-1)).alias("balance"),
            F.first(F.when(F.col("kind") == ADD, F.col("path")), ignorenulls=True).alias("path"),
            F.first(F.when(F.col("kind") == ADD, F.col("rows")), ignorenulls=True).alias("rows"),
            F.first(F.when(F.col("kind") == ADD, F.col("entry")), ignorenulls=True).alias("entry"),
        )
        .filter(F.col("balance") > 0)
        .select("path", "rows", "entry")
        .localCheckpoint(eager=True)
    )


def _entry_reader(table: Table) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Per manifest name: every entry's identifier, kind, data file path and rows (ADDs pickled).
    A task reads its next manifests while it decodes one (`read_ahead`)."""

    def read_entries(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        files = [
            (table.manifest_path(name), size)
            for batch in batches
            for name, size in zip(
                batch.column("manifest").to_pylist(), batch.column("size").to_pylist(), strict=True
            )
        ]
        for (path, _size), data in zip(files, sized_bytes(table.file_io, files), strict=True):
            out: dict[str, list] = {field: [] for field in _ENTRY_SCHEMA.names}
            for entry in decode_manifest(data, path):
                out["key"].append(repr(entry.identifier()))
                out["kind"].append(entry.kind)
                out["path"].append(table.data_file_path(entry))
                out["rows"].append(entry.file.row_count)
                out["entry"].append(pickle.dumps(entry) if entry.kind == ADD else b"")
            yield pa.RecordBatch.from_pydict(out, schema=_ENTRY_SCHEMA)

    return read_entries


def _missing_only(table: Table) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """Per batch of live files: only the rows whose file does not exist. The checks (one HEAD or stat
    each) run `io_parallelism` at once: one after another, a task would wait a round trip per file."""

    def check_exists(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        file_io = table.file_io
        for batch in batches:
            paths = batch.column("path").to_pylist()
            present = list(map_in_flight(file_io.file_exists, paths, file_io.io_parallelism))
            keep = pa.array([not found for found in present])
            yield batch.filter(keep)

    return check_exists


def _record_missing(table: Table, lost: list[ManifestEntry], record: RunRecord) -> None:
    """Files and rows lost per partition, the first DETAIL_LIMIT lost files in detail, a sample."""
    by_partition: dict[str, dict[str, int]] = {}
    for entry in lost:
        label = "/".join(f"{k}={v}" for k, v in table.partition_spec(entry.partition).items()) or "(table)"
        found = by_partition.setdefault(label, {"files": 0, "rows": 0})
        found["files"] += 1
        found["rows"] += entry.file.row_count
    record.details["missing_by_partition"] = dict(list(by_partition.items())[:DETAIL_LIMIT])
    record.details["missing"] = [
        {
            "path": table.data_file_path(entry),
            "partition": {k: str(v) for k, v in table.partition_spec(entry.partition).items()},
            "bucket": entry.bucket,
            "rows": entry.file.row_count,
        }
        for entry in lost[:DETAIL_LIMIT]
    ]
    record.sample("missing_files", [table.data_file_path(entry) for entry in lost[:SAMPLE_LIMIT]])


def lost_deletion_vectors(
    table: Table, snapshot: Snapshot, lost: list[ManifestEntry]
) -> list[IndexManifestEntry]:
    """The snapshot's deletion-vector index entries that hold a vector of a lost file (file names
    are unique within a partition and bucket, so they are matched there)."""
    if not snapshot.index_manifest:
        return []
    names: dict[tuple[bytes, int], set[str]] = {}
    for entry in lost:
        names.setdefault((entry.partition, entry.bucket), set()).add(entry.file.file_name)
    found = []
    for entry in index_entries(table, snapshot):
        gone = names.get((entry.partition, entry.bucket))
        if entry.index_type != DELETION_VECTORS_INDEX or not gone:
            continue
        if any(item["f0"] in gone for item in entry.deletion_vector_ranges or []):
            found.append(entry)
    return found


def commit_removal(table: Table, lost: list[ManifestEntry], vectors: list[IndexManifestEntry]) -> Snapshot:
    """One OVERWRITE snapshot: DELETE entries for the lost files (grouped per partition and bucket)
    and the index without their deletion vectors. The rewritten DV index files are written first;
    a refused commit removes them again (a crash leaves them as orphans)."""
    groups: dict[tuple[bytes, int, int], list] = {}
    for entry in lost:
        groups.setdefault((entry.partition, entry.bucket, entry.total_buckets), []).append(entry.file)
    messages = [
        CommitMessage(partition, bucket, total_buckets, [], files)
        for (partition, bucket, total_buckets), files in groups.items()
    ]
    delta = [entry for message in messages for entry in message.entries()]
    removed: list[IndexManifestEntry] = []
    added: list[IndexManifestEntry] = []
    gone: dict[tuple[bytes, int], list[str]] = {}
    for entry in lost:
        gone.setdefault((entry.partition, entry.bucket), []).append(entry.file.file_name)
    for entry in vectors:
        dropped, rewritten = drop_deletion_vectors(table, [entry], gone[(entry.partition, entry.bucket)])
        removed += dropped
        added += rewritten
    dropped_names = {entry.file_name for entry in removed}

    def build(ctx: AttemptContext) -> list[ManifestEntry]:
        if dropped_names:
            current = {e.file_name for e in index_entries(table, ctx.latest)} if ctx.latest else set()
            changed = sorted(dropped_names - current)
            if changed:
                raise CommitConflictError(
                    f"{table.path}: deletion-vector index files {changed[:3]} were replaced by another "
                    "writer while this job ran; nothing was committed, run the job again"
                )
        return delta

    try:
        snapshot = SnapshotCommit(table).commit(
            build,
            kind=OVERWRITE,
            check_conflicts=True,
            drop_index_entries=lambda entry: entry.file_name in dropped_names,
            add_index_entries=added,
        )
    except CommitConflictError:
        # refused before any snapshot landed: the rewritten index files are referenced by nothing.
        # (After any other error the commit may have landed; they stay, orphans at worst.)
        for entry in added:
            table.file_io.delete(index_file_path(table, entry))
        raise
    assert snapshot is not None
    return snapshot


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
