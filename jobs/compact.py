"""compact: rewrite a table's small files and sorted runs into fewer, larger ones (issue #15).

Append tables get their small files bin-packed (Paimon's append compaction rules), primary-key
tables get every bucket fully compacted: all sorted runs merged by key with the table's merge
engine into files at the top level. See `paimon_format.compaction.rules` for the picking rules and
`paimon_format.compaction.rewrite` for what one bin's task writes. On primary-key tables with
`changelog-producer` lookup or full-compaction each task also writes the changelog of its rewrite
(`paimon_format.compaction.changelog`, Paimon's rules), which the COMPACT snapshot commits in its
changelog manifest list, as Paimon's compaction does.

The run, and why in this order (crash ordering):
1. Plan on the executors from the latest snapshot's manifests (`jobs.compaction.plan`); the driver
   gets one summary row per bin. Nothing is written.
2. One task per bin writes the new data files (and changelog files, on lookup / full-compaction
   changelog tables). A crash here leaves only unreferenced files
   (`compact:after-files-written` is the last point before anything else), which
   remove-orphan-files deletes once they are older than its `older_than`.
3. Executors write the delta manifests: a DELETE for every input (its ADD's exact metadata), an
   ADD for every output; and the changelog manifests (an ADD per changelog file). Still
   unreferenced.
4. The driver commits one COMPACT snapshot naming those manifests (create-if-absent). Before
   each attempt it reads the deltas of the snapshots that landed since the plan: a concurrent
   APPEND is kept; a snapshot that removed one of our inputs (another compaction, an overwrite,
   a drop) makes this run give up with exit 3 after removing what it wrote. `compact:after-commit`
   follows the commit.
   If Spark loses a cached bin result and recomputes it, the recomputed files are the ones the
   manifests name; the first ones stay unreferenced (remove-orphan-files), never half-committed.
5. Nothing is deleted: the inputs stay on storage for the older snapshots that still read them
   until expire-snapshots expires those snapshots.

Spark-submit entry: `spark-submit jobs/compact.py --config conf/compact.yaml`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import pickle
import threading
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from jobs.compaction.plan import (
    BinSummary,
    PlanShape,
    bins_frame,
    collect_summaries,
    idle_partitions_only,
    limit_buckets,
    live_files_frame,
)
from jobs.partitions.commit import RECORD_PARTITION_LIMIT, partition_label
from jobs.runtime.config import TableJobConfig, check_partition_specs, check_predicate_syntax
from jobs.runtime.errors import BadInputError, CommitRaceLost
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import open_existing_table
from paimon_format.commit import COMPACT, AttemptContext, PrewrittenDelta, SnapshotCommit
from paimon_format.compaction.changelog import PRODUCERS_AT_COMPACTION, changelog_rule
from paimon_format.compaction.rewrite import RewriteSpec, rewrite_bin
from paimon_format.compaction.rules import CompactionSettingError, CompactionSettings
from paimon_format.errors import PaimonFormatError, SnapshotNotFoundError
from paimon_format.index.deletion_vectors import DELETION_VECTORS_INDEX, snapshot_deletion_files
from paimon_format.manifest.entries import (
    ADD,
    DELETE,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    read_manifest,
)
from paimon_format.manifest.files import rolling_write_manifests
from paimon_format.model.options import CoreOptions, parse_duration_ms, parse_memory_size
from paimon_format.scan.partition_predicate import PartitionTest
from paimon_format.scan.snapshot_scan import index_entries, read_list
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

Scalar = str | int | float | bool | None
# Entries (DELETE + ADD) one manifest-writing task puts into its rolling manifests.
ENTRIES_PER_WRITER = 200_000


class CompactConfig(TableJobConfig):
    strategy: Literal["minor", "full"] = Field(
        default="minor", description="minor: Paimon's picking rules; full: rewrite every selected bin"
    )
    partitions: list[dict[str, Scalar]] | None = Field(
        default=None, description="partition specs {key: value} to compact (default: all partitions)"
    )
    where: str | None = Field(default=None, description="a predicate on partition columns, instead of specs")
    order_by: list[str] | None = Field(
        default=None, description="append tables: sort each bin by these columns"
    )
    order_strategy: Literal["order", "zorder"] = Field(default="order", description="order | zorder")
    partition_idle_time: str | None = Field(
        default=None, description="only partitions whose newest file is older than this, e.g. 1 h"
    )
    max_buckets_per_run: int | None = Field(
        default=None, ge=1, description="compact at most this many buckets"
    )
    target_file_size: str | None = Field(default=None, description="overrides the table's target-file-size")
    skip_unsupported: bool = Field(
        default=False,
        description="a table this job cannot compact (postpone bucket, row tracking, ...) is "
        "skipped with its reason in the record instead of exit 2 (for maintain over many tables)",
    )

    @field_validator("where")
    @classmethod
    def _predicate_syntax(cls, value: str | None) -> str | None:
        return check_predicate_syntax(value)

    @field_validator("partitions")
    @classmethod
    def _specs(cls, value: list[dict[str, Scalar]] | None) -> list[dict[str, Scalar]] | None:
        return check_partition_specs(value, "leave partitions out to compact every partition")

    @field_validator("order_by")
    @classmethod
    def _columns(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            if not value or any(not str(column).strip() for column in value):
                raise ValueError("give one or more column names")
            if len(set(value)) != len(value):
                raise ValueError("a column is named twice")
        return value

    @field_validator("partition_idle_time")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                if parse_duration_ms(str(value)) <= 0:
                    raise ValueError("must be positive")
            except ValueError as error:
                raise ValueError(f"{value!r} is not a duration such as 1 h or 30 min: {error}") from None
        return value

    @field_validator("target_file_size")
    @classmethod
    def _size(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                if parse_memory_size(str(value)) <= 0:
                    raise ValueError("must be positive")
            except ValueError as error:
                raise ValueError(f"{value!r} is not a size such as 128 mb: {error}") from None
        return value

    @model_validator(mode="after")
    def _one_selector(self) -> CompactConfig:
        if self.partitions is not None and self.where is not None:
            raise ValueError("give partitions (specs) or where (a predicate), not both")
        if self.order_strategy == "zorder" and not self.order_by:
            raise ValueError("order_strategy zorder needs order_by columns")
        return self


CONFIG_MODEL = CompactConfig


def run(context: JobContext, config: CompactConfig) -> None:
    table = open_existing_table(config)
    compact(
        context.spark,
        table,
        strategy=config.strategy,
        specs=config.partitions,
        where=config.where,
        order_by=config.order_by,
        order_strategy=config.order_strategy,
        partition_idle_time=config.partition_idle_time,
        max_buckets_per_run=config.max_buckets_per_run,
        target_file_size=config.target_file_size,
        skip_unsupported=config.skip_unsupported,
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
    )


# -- refusals before anything is read ------------------------------------------------------------


class UnsupportedTable(BadInputError):
    """A table kind this job cannot compact correctly (exit 2, or skipped with skip_unsupported)."""


def check_supported(table: Table, order_by: Sequence[str] | None) -> None:
    """Refuse (exit 2, naming the reason) tables this job would compact wrongly."""
    schema = table.schema
    options = CoreOptions(schema.options)
    try:
        bucket = options.bucket
        producer = options.changelog_producer
    except ValueError as error:
        raise BadInputError(f"{table.path}: {error}") from None
    if bucket == -2:
        raise UnsupportedTable(
            f"{table.path}: postpone-bucket tables (bucket = -2) cannot be compacted by this job"
        )
    if schema.primary_keys and producer in PRODUCERS_AT_COMPACTION:
        try:  # the changelog of the rewrite is produced as Paimon's compaction does
            changelog_rule(schema, options, 0)
        except ValueError as error:
            raise BadInputError(f"{table.path}: {error}") from None
    if options.row_tracking_enabled or options.data_evolution_enabled:
        raise UnsupportedTable(
            f"{table.path}: row tracking / data evolution tables cannot be compacted by this job"
        )
    if order_by:
        if schema.primary_keys:
            raise BadInputError(
                f"{table.path}: order_by applies to append tables; a primary-key table is ordered by its key"
            )
        names = set(schema.field_names())
        unknown = [column for column in order_by if column not in names]
        if unknown:
            raise BadInputError(
                f"{table.path}: order_by: no column {', '.join(map(repr, unknown))} "
                f"(columns: {', '.join(schema.field_names())})"
            )
    if schema.primary_keys:
        try:
            from paimon_format.merge.table_engine import check_merge_supported
        except ImportError as error:  # the merge module is part of the package; a broken install
            raise BadInputError(f"{table.path}: primary-key compaction is unavailable: {error}") from None
        try:
            check_merge_supported(schema, options)
        except PaimonFormatError as error:
            raise UnsupportedTable(f"{table.path}: {error}") from None


def _selection(
    table: Table, specs: Sequence[Mapping[str, Any]] | None, where: str | None
) -> list[PartitionTest] | None:
    if specs is None and where is None:
        return None
    if not table.schema.partition_keys:
        raise BadInputError(f"{table.path}: partitions/where given, but the table has no partition keys")
    from jobs.drop_partition import selection_tests

    return [test for _description, test in selection_tests(table, specs, where)]


# -- the run -------------------------------------------------------------------------------------


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


def compact(
    spark: Any,
    table: Table,
    strategy: str = "minor",
    specs: Sequence[Mapping[str, Any]] | None = None,
    where: str | None = None,
    order_by: Sequence[str] | None = None,
    order_strategy: str = "order",
    partition_idle_time: str | None = None,
    max_buckets_per_run: int | None = None,
    target_file_size: str | None = None,
    skip_unsupported: bool = False,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: Any = None,
    before_commit: Callable[[], None] | None = None,
    buckets: Collection[tuple[bytes, int]] | None = None,
) -> RunRecord:
    """Compact the table's latest snapshot; `before_commit` is a test hook (a rival commits there).

    `buckets` limits the run to these (partition bytes, bucket) pairs (the write job compacts the
    buckets it wrote to; the driver holds them already).
    """
    log = log or logging.getLogger("jobs.compact")
    record = record or RunRecord(operation="compact", table=table.path, dry_run=dry_run)
    try:
        check_supported(table, order_by)
    except UnsupportedTable as refusal:
        if not skip_unsupported:
            raise
        record.details["skipped"] = str(refusal)
        log.info("skipped (skip_unsupported): %s", refusal)
        return record
    tests = _selection(table, specs, where)
    schema = table.schema
    try:
        settings = CompactionSettings.of(schema.options, bool(schema.primary_keys), target_file_size)
    except CompactionSettingError as error:
        raise BadInputError(f"{table.path}: {error}") from None
    latest = table.snapshot_manager.latest()
    record.snapshot_ids["base"] = latest.id if latest else None
    record.details["strategy"] = strategy
    if latest is None:
        log.info("the table has no snapshot: nothing to compact")
        return record
    if latest.schema_id != schema.id:
        table.schema_manager.schema(latest.schema_id)  # a snapshot naming a missing schema: refuse
    # deletion files of the snapshot: O(files with a deletion vector) on the driver, shipped with the bins
    deletions = snapshot_deletion_files(table, latest) if latest.index_manifest else {}
    bucket_option = CoreOptions(schema.options).bucket
    shape = PlanShape(
        primary_key=bool(schema.primary_keys), unaware_bucket=bucket_option == -1, full=strategy == "full"
    )
    parallelism = spark.sparkContext.defaultParallelism
    from pyspark import StorageLevel

    files = live_files_frame(spark, table, latest, tests)
    if buckets is not None:
        files = _only_buckets(spark, files, buckets)
    if partition_idle_time is not None:
        files = idle_partitions_only(files, parse_duration_ms(partition_idle_time))
    source = f"{table.path} snapshot {latest.id}"
    bins = bins_frame(files, shape, settings, max(parallelism * 2, 1), source, deletions)
    bins = bins.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        summaries = limit_buckets(collect_summaries(bins), max_buckets_per_run)
    except BaseException:
        bins.unpersist()
        raise
    try:
        _record_plan(record, table, summaries, settings)
        log.info(
            "snapshot %d: %d bins in %d buckets, %d files, %d bytes to rewrite",
            latest.id,
            len(summaries),
            record.counts["buckets"],
            record.counts["files_before"],
            record.bytes["files_before"],
        )
        if not summaries:
            log.info("nothing to compact")
            return record
        if dry_run:
            log.info("dry run: %d bins would be rewritten", len(summaries))
            return record
        spec = RewriteSpec(
            target_file_size=settings.target_file_size,
            top_level=settings.top_level,
            order_by=tuple(order_by or ()),
            order_strategy=order_strategy,
        )
        _rewrite_and_commit(spark, table, latest, bins, summaries, spec, record, log, before_commit)
    finally:
        if bins is not None:
            bins.unpersist()
    return record


def _only_buckets(spark: Any, files: Any, buckets: Collection[tuple[bytes, int]]) -> Any:
    """The live files of the given (partition, bucket) pairs only (a broadcast semi-join)."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    from jobs.runtime.spark import driver_list_frame

    pairs = sorted(set(buckets))
    chosen = driver_list_frame(
        spark,
        {
            "partition": pa.array([p for p, _ in pairs], pa.binary()),
            "bucket": pa.array([b for _, b in pairs], pa.int32()),
        },
        "buckets to compact",
    )
    return files.join(F.broadcast(chosen), ["partition", "bucket"], "left_semi")


def _record_plan(
    record: RunRecord, table: Table, summaries: list[BinSummary], settings: CompactionSettings
) -> None:
    record.count("bins", len(summaries))
    record.count("buckets", len({(s.partition, s.bucket) for s in summaries}))
    record.count("files_before", sum(s.files for s in summaries))
    record.add_bytes("files_before", sum(s.bytes for s in summaries))
    record.count("rows_before", sum(s.rows for s in summaries))
    estimate = sum(max(1, math.ceil(s.bytes / settings.target_file_size)) for s in summaries)
    record.count("files_after_estimate", estimate)
    per_partition: dict[bytes, dict[str, int]] = {}
    for summary in summaries:
        counts = per_partition.setdefault(
            summary.partition, {"bins": 0, "buckets": 0, "files": 0, "bytes": 0}
        )
        counts["bins"] += 1
        counts["files"] += summary.files
        counts["bytes"] += summary.bytes
        if summary.bin == 0:
            counts["buckets"] += 1
    record.count("partitions", len(per_partition))
    record.details["partitions"] = [
        {"partition": partition_label(table, table.partition_values(partition)), **counts}
        for partition, counts in sorted(per_partition.items(), key=lambda item: -item[1]["files"])[
            :RECORD_PARTITION_LIMIT
        ]
    ]


def _rewrite_and_commit(
    spark: Any,
    table: Table,
    planned: Snapshot,
    bins: Any,
    summaries: list[BinSummary],
    spec: RewriteSpec,
    record: RunRecord,
    log: Any,
    before_commit: Callable[[], None] | None,
) -> None:
    keys = {(s.partition, s.bucket, s.bin): index for index, s in enumerate(summaries)}
    compacted = frozenset((s.partition, s.bucket) for s in summaries)
    key_map = spark.sparkContext.broadcast(keys)

    def keyed(row: Any) -> Iterator[tuple[int, Any]]:
        key = key_map.value.get((bytes(row["partition"]), row["bucket"], row["bin"]))
        if key is not None:
            yield key, (bytes(row["partition"]), row["bucket"], row["total_buckets"], bytes(row["payload"]))

    rewritten_rows = spark.sparkContext.accumulator(0)
    rewritten_bins = spark.sparkContext.accumulator(0)

    def rewrite(items: Iterator[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
        for key, (partition, bucket, total_buckets, payload) in items:
            inputs, deletion_files = pickle.loads(payload)
            output = rewrite_bin(table, partition, bucket, inputs, spec, deletion_files)
            rewritten_bins.add(1)
            rewritten_rows.add(sum(meta.row_count for meta in inputs))
            yield key, (partition, bucket, total_buckets, inputs, output.files, output.changelog_files)

    tasks = min(len(summaries), 10_000)
    from pyspark import StorageLevel

    results = (
        bins.rdd.flatMap(keyed)
        .partitionBy(tasks, lambda key: key % tasks)
        .mapPartitions(rewrite, preservesPartitioning=True)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    written_manifests: list[ManifestFileMeta] = []
    changelog_manifests: list[ManifestFileMeta] = []
    committed = False
    try:
        with _progress(log, rewritten_bins, rewritten_rows, len(summaries)):
            done = [_bin_result(table, key, value) for key, value in results.map(_summarise).collect()]
        crash_point("compact:after-files-written")
        _record_results(record, done, log)
        written_manifests, changelog_manifests = _write_delta_manifests(
            spark, table, results, sum(r.files_in + r.files_out + r.changelog_files for r in done)
        )
        delta_rows = sum(r.rows_out - r.rows_in for r in done)
        changelog_rows = sum(r.changelog_rows for r in done)
        if before_commit is not None:
            before_commit()

        def check_rivals(ctx: AttemptContext) -> list[ManifestEntry]:
            _refuse_if_inputs_removed(table, planned.id, ctx.latest, results)
            _refuse_if_deletions_changed(table, planned, ctx.latest, compacted)
            return []

        def rewritten_vectors(entry: IndexManifestEntry) -> bool:
            return entry.index_type == DELETION_VECTORS_INDEX and (entry.partition, entry.bucket) in compacted

        snapshot = SnapshotCommit(table).commit(
            check_rivals,
            kind=COMPACT,
            check_conflicts=False,
            prewritten_delta=lambda _ctx: PrewrittenDelta(
                written_manifests, delta_rows, changelog_manifests, changelog_rows
            ),
            drop_index_entries=rewritten_vectors,
            properties={"paimon-jobs.operation": "compact"},
        )
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


@contextlib.contextmanager
def _progress(log: Any, bins: Any, rows: Any, total: int, interval_s: float = 10.0) -> Iterator[None]:
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


def _record_results(record: RunRecord, done: list[BinResult], log: Any) -> None:
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
    spark: Any, table: Table, results: Any, entries: int
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
    written = [pickle.loads(blob) for blob in results.coalesce(writers).mapPartitions(write).collect()]
    return (
        [meta for kind, meta in written if kind == "delta"],
        [meta for kind, meta in written if kind == "changelog"],
    )


def _refuse_if_inputs_removed(table: Table, planned: int, latest: Snapshot | None, results: Any) -> None:
    """Exit 3 when a snapshot after the plan removed one of the bins' inputs (read from its delta)."""
    if latest is None or latest.id <= planned:
        return
    removed: set[tuple[bytes, int, str]] = set()
    for snapshot_id in range(planned + 1, latest.id + 1):
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


def _remove_written(table: Table, results: Any, manifests: list[ManifestFileMeta], log: Any) -> None:
    """Delete the data files and manifests of an uncommitted run (on the executors for data files)."""

    def delete(items: Iterator[tuple[int, Any]]) -> Iterator[int]:
        paths = []
        for _key, (partition, bucket, _total, _inputs, outputs, changelog) in items:
            paths.extend(
                table.full_path(p)
                for meta in [*outputs, *changelog]
                for p in table.data_file_relpaths(partition, bucket, meta)
            )
        if paths:
            table.file_io.delete_many(paths)
        yield len(paths)

    try:
        removed = sum(results.mapPartitions(delete).collect())
        if manifests:
            table.file_io.delete_many([table.manifest_path(meta.file_name) for meta in manifests])
        log.info(
            "nothing committed: removed the %d data files and %d manifests this run wrote",
            removed,
            len(manifests),
        )
    except Exception as error:  # leftovers are orphans; remove-orphan-files clears them
        log.warning("could not remove the files of the uncommitted run (%s); remove-orphan-files will", error)


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry("compact")
