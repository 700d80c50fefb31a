"""One compaction run: refuse what cannot be compacted, plan bins, rewrite them, commit.

Shared by the compact job (`jobs/compact.py`, whose docstring tells the run and its crash
ordering) and the write job, which compacts the buckets it wrote on tables whose batch reads skip
level 0 (`jobs.writing.level0`). What the run is asked to do is one `CompactRequest` (the compact
job builds it from its validated config: `jobs.compact.compact_request`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.compaction.groups import Buckets, commit_in_groups, plan_groups, record_groups
from jobs.compaction.plan import (
    BinSummary,
    PlanShape,
    bins_frame,
    collect_summaries,
    idle_partitions_only,
    limit_buckets,
    live_files_frame,
    only_buckets,
)
from jobs.compaction.refusals import UnsupportedTable, check_supported
from jobs.compaction.slices import BucketRanges, bucket_condition, check_bucket_ranges, order_and_cut
from jobs.partitions.records import RECORD_PARTITION_LIMIT, partition_label
from jobs.partitions.selection import selection_tests
from jobs.runtime.errors import BadInputError
from jobs.runtime.local_frame import LocalFrame, LocalLimitExceeded, LocalSession
from jobs.runtime.report import RunRecord
from jobs.runtime.spark import driver_list_frame
from paimon_format.compaction.rewrite import RewriteSpec
from paimon_format.compaction.rules import CompactionSettingError, CompactionSettings
from paimon_format.index.deletion_vectors import snapshot_deletion_files
from paimon_format.model.options import CoreOptions, parse_duration_ms
from paimon_format.scan.partition_predicate import PartitionTest
from paimon_format.scan.snapshot_scan import data_manifests
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


Log = logging.Logger | logging.LoggerAdapter

# A plan of at most this many manifest entries, whose bins' payloads are estimated at most
# LOCAL_PLAN_BYTES, is made in the driver (`_planned_bins`). A file's pickled metadata grows with
# the stats columns: about 450 bytes at 10 columns, 5.3 KB at 100 string columns (measured).
LOCAL_PLAN_ENTRIES = 50_000
LOCAL_PLAN_BYTES = 32 << 20
PAYLOAD_BASE_BYTES, PAYLOAD_COLUMN_BYTES = 300, 50  # the estimate of one file's pickled metadata


@dataclass(frozen=True)
class CompactRequest:
    """What one compaction run is asked to do (the compact job's validated config, or the write
    job's buckets); the defaults compact every bucket of every partition by Paimon's rules."""

    strategy: str = "minor"  # minor: Paimon's picking rules; full: rewrite every selected bin
    specs: Sequence[Mapping[str, Any]] | None = None  # partition specs, or
    where: str | None = None  # a predicate on partition columns
    order_by: Sequence[str] | None = None  # append tables: sort each bin by these columns
    order_strategy: str = "order"  # order | zorder | hilbert
    partition_idle_time: str | None = None  # only partitions whose newest file is older than this
    max_buckets_per_run: int | None = None
    target_file_size: str | None = None  # overrides the table's target-file-size
    skip_unsupported: bool = False  # a table this job cannot compact is skipped, not exit 2
    # only these (partition bytes, bucket) pairs (the write job compacts the buckets it wrote; the
    # driver holds them already)
    buckets: Collection[tuple[bytes, int]] | None = None
    bucket_ranges: BucketRanges | None = None  # only these bucket ids, e.g. ((0, 3), (7, 7))
    max_bytes_per_run: int | None = None  # buckets in job_order while their input bytes fit
    job_order: str = "files-desc"  # files-desc | bytes-desc | partition-asc | none (`slices`)
    partial_progress: bool = True  # commit groups as they finish (False: one commit, no retry)
    max_commit_bins: int = 1000  # a commit group's bins at most (a bucket is never split)
    max_commit_bytes: int = 100 * 1024**3  # a commit group's input bytes at most


def compact_table(
    spark: SparkSession,
    table: Table,
    request: CompactRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: Log | None = None,
    before_commit: Callable[[], None] | None = None,
) -> RunRecord:
    """Compact the table's latest snapshot in commit groups (`jobs.compaction.groups`); `before_commit`
    is a test hook called before each commit attempt (a rival commits there)."""
    log = log or logging.getLogger("jobs.compact")
    record = record or RunRecord(operation="compact", table=table.path, dry_run=dry_run)
    if _skipped(table, request, record, log):
        return record
    tests = _selection(table, request.specs, request.where)
    settings = _compaction_settings(table, request.target_file_size)
    latest = table.snapshot_manager.latest(reuse_read=True)  # the open check's read (the commit rereads)
    record.snapshot_ids["base"] = latest.id if latest else None
    record.details["strategy"] = request.strategy
    if latest is None:
        log.info("the table has no snapshot: nothing to compact")
        return record
    if latest.schema_id != table.schema.id:
        table.schema_manager.schema(latest.schema_id)  # a snapshot naming a missing schema: refuse
    bins, record.details["planned_in"] = _planned_bins(spark, table, latest, tests, settings, request)
    try:
        summaries = _sliced(table, collect_summaries(bins), request, record)
        _record_plan(record, table, summaries, settings)
        groups = plan_groups(
            summaries, request.partial_progress, request.max_commit_bins, request.max_commit_bytes
        )
        record_groups(record, groups)
        log.info(
            "snapshot %d: %d bins in %d buckets, %d files, %d bytes to rewrite in %d commit groups",
            latest.id,
            len(summaries),
            record.counts["buckets"],
            record.counts["files_before"],
            record.bytes["files_before"],
            len(groups),
        )
        if not summaries:
            log.info("nothing to compact")
            return record
        if dry_run:
            log.info("dry run: %d bins would be rewritten in %d commits", len(summaries), len(groups))
            return record
        spec = RewriteSpec(
            target_file_size=settings.target_file_size,
            top_level=settings.top_level,
            order_by=tuple(request.order_by or ()),
            order_strategy=request.order_strategy,
        )

        def replan(buckets: Buckets) -> tuple[Snapshot | None, DataFrame | None, list[BinSummary]]:
            fresh = table.snapshot_manager.latest()
            if fresh is None:
                return None, None, []
            again = dataclasses.replace(request, buckets=buckets)
            planned, _where = _planned_bins(spark, table, fresh, tests, settings, again)
            return fresh, planned, collect_summaries(planned)

        retry = replan if request.partial_progress else None
        commit_in_groups(spark, table, latest, bins, groups, spec, record, log, before_commit, retry)
    finally:
        bins.unpersist()
    return record


def _sliced(
    table: Table, summaries: list[BinSummary], request: CompactRequest, record: RunRecord
) -> list[BinSummary]:
    """The bins this run takes: `max_buckets_per_run` (most files first), then in `job_order` the
    buckets whose bytes fit `max_bytes_per_run`; what is left is counted for the next run."""
    limited = limit_buckets(summaries, request.max_buckets_per_run)
    cut = order_and_cut(table, limited, request.job_order, request.max_bytes_per_run)
    if cut.buckets_left:
        record.count("buckets_left_for_next_run", cut.buckets_left)
        record.add_bytes("left_for_next_run", cut.bytes_left)
    return cut.summaries


# -- before anything is read ---------------------------------------------------------------------


def _skipped(table: Table, request: CompactRequest, record: RunRecord, log: Log) -> bool:
    """Refuse a table this job would compact wrongly (exit 2), or with `skip_unsupported` skip a
    table kind it cannot compact, its reason in the record (for maintain over many tables)."""
    try:
        check_supported(table, request.order_by)
    except UnsupportedTable as refusal:
        if not request.skip_unsupported:
            raise
        record.details["skipped"] = str(refusal)
        log.info("skipped (skip_unsupported): %s", refusal)
        return True
    return False


def _selection(
    table: Table, specs: Sequence[Mapping[str, Any]] | None, where: str | None
) -> list[PartitionTest] | None:
    if specs is None and where is None:
        return None
    if not table.schema.partition_keys:
        raise BadInputError(f"{table.path}: partitions/where given, but the table has no partition keys")
    return [test for _description, test in selection_tests(table, specs, where)]


def _compaction_settings(table: Table, target_file_size: str | None) -> CompactionSettings:
    schema = table.schema
    try:
        return CompactionSettings.of(schema.options, bool(schema.primary_keys), target_file_size)
    except CompactionSettingError as error:
        raise BadInputError(f"{table.path}: {error}") from None


# -- the plan ------------------------------------------------------------------------------------


def _planned_bins(
    spark: SparkSession,
    table: Table,
    latest: Snapshot,
    tests: list[PartitionTest] | None,
    settings: CompactionSettings,
    request: CompactRequest,
) -> tuple[DataFrame, str]:
    """The persisted bins of the snapshot's live files in the selected, idle, requested buckets, and
    where they were planned ("driver" or "spark").

    A plan of at most `LOCAL_PLAN_ENTRIES` manifest entries (counted from the manifest lists) and
    `LOCAL_PLAN_BYTES` of estimated payloads is made in the driver by the same code on a
    `LocalSession`, and only the bins go to Spark: Spark's planning jobs (a manifest-reading task,
    two shuffles, their Python workers) took about 3 s of a 10M-row compaction of 5,000 files on 2
    cores, the driver 0.2 s. Bucket filters and idle partitions (the write job's buckets, a commit
    group's retry, `buckets`, `partition_idle_time`) plan on Spark. The driver holds at most those
    bounds, whatever the table. The choice counts entries only, not requests: on an object store
    the driver reads the manifests through its read-ahead window, as the executors would."""
    from pyspark import StorageLevel  # pyspark: loaded when the job runs, not on import (--help)

    plain = request.buckets is None and request.bucket_ranges is None and request.partition_idle_time is None
    if plain and _fits_the_driver(table, planned_entries(table, latest)):
        try:
            local = _bins(LocalSession(row_limit=LOCAL_PLAN_ENTRIES), table, latest, tests, settings, request)
        except LocalLimitExceeded:
            pass  # more entries than the lists counted (should not happen): plan on Spark
        else:
            # a local relation in the JVM: counted and collected without a Spark job, never persisted
            columns = {name: local.table.column(name) for name in local.table.column_names}
            frame = driver_list_frame(spark, columns, "compaction bins", LOCAL_PLAN_ENTRIES, spread=False)
            return frame, "driver"
    planned = _bins(spark, table, latest, tests, settings, request)
    return planned.persist(StorageLevel.MEMORY_AND_DISK), "spark"


def _fits_the_driver(table: Table, entries: int) -> bool:
    """Whether a plan of `entries` is small enough for the driver, by count and by the estimated
    bytes of its payloads (which the driver then hands to the JVM as a local relation)."""
    per_file = PAYLOAD_BASE_BYTES + PAYLOAD_COLUMN_BYTES * len(table.schema.fields)
    return entries <= LOCAL_PLAN_ENTRIES and entries * per_file <= LOCAL_PLAN_BYTES


def planned_entries(table: Table, snapshot: Snapshot) -> int:
    """The manifest entries (ADD and DELETE) a plan of `snapshot` reads, from its manifest lists."""
    return sum(meta.num_added_files + meta.num_deleted_files for meta in data_manifests(table, snapshot))


def _bins(
    spark: SparkSession | LocalSession,
    table: Table,
    latest: Snapshot,
    tests: list[PartitionTest] | None,
    settings: CompactionSettings,
    request: CompactRequest,
) -> DataFrame | LocalFrame:
    """The bins frame (not persisted), on Spark or on a `LocalSession`."""
    schema = table.schema
    # deletion files of the snapshot: O(files with a deletion vector) on the driver, shipped with the bins
    deletions = snapshot_deletion_files(table, latest) if latest.index_manifest else {}
    bucket_option = CoreOptions(schema.options).bucket
    shape = PlanShape(
        primary_key=bool(schema.primary_keys),
        unaware_bucket=bucket_option == -1,
        full=request.strategy == "full",
    )
    parallelism = spark.sparkContext.defaultParallelism
    files = live_files_frame(spark, table, latest, tests)
    if request.bucket_ranges is not None:
        check_bucket_ranges(request.bucket_ranges, bucket_option, table.path)
        files = files.filter(bucket_condition(request.bucket_ranges))
    if request.buckets is not None:
        files = only_buckets(spark, files, request.buckets)
    if request.partition_idle_time is not None:
        files = idle_partitions_only(files, parse_duration_ms(request.partition_idle_time))
    source = f"{table.path} snapshot {latest.id}"
    return bins_frame(files, shape, settings, max(parallelism * 2, 1), source, deletions)


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
