"""Planning a data compaction on the executors: live files -> bins, the driver sees only summaries.

1. Executors read the manifests of the latest snapshot (each task its next manifests while it
   decodes one) and keep the entries of the selected partitions; ADD/DELETE pairs cancel by
   grouping on the file identifier (the rule of `paimon_format.scan.snapshot_scan.EntryMerger`),
   so what survives is each live file once.
2. With `partition_idle_time`, partitions whose newest file is younger than that are left out.
3. The live files are grouped by (partition, bucket); each group is handed to
   `paimon_format.compaction.rules.pick_bins`, and every bin becomes one row: its summary (files,
   bytes, rows) and its files' metadata as a pickled payload, which stays on the executors.

The driver collects the summary columns only (one row per bin), never the files.
"""

from __future__ import annotations

import datetime as dt
import functools
import pickle
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from jobs.partitions.scan import manifest_frame
from jobs.runtime.local_frame import LocalFrame, LocalSession, functions_for
from jobs.runtime.spark import DRIVER_LIST_LIMIT, assert_small, driver_list_frame
from paimon_format.compaction.rules import BucketFile, CompactionSettings, pick_bins
from paimon_format.compaction.universal import Placement, placement_of
from paimon_format.errors import InvalidTableStateError
from paimon_format.index.deletion_vectors import DeletionFile
from paimon_format.manifest.codec import decode_manifest
from paimon_format.manifest.entries import ADD, DELETE, DataFileMeta
from paimon_format.manifest.read_ahead import sized_bytes
from paimon_format.scan.partition_predicate import PartitionTest, selects
from paimon_format.scan.snapshot_scan import data_manifests
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_EPOCH = dt.datetime(1970, 1, 1)
ENTRY_COLUMNS = (
    "partition binary, bucket int, total_buckets int, ident binary, kind int, created long, payload binary"
)
BIN_COLUMNS = (
    "partition binary, bucket int, total_buckets int, bin int, files long, bytes long, rows long, "
    "bucket_files long, payload binary, error string"
)
_ENTRY_SCHEMA = pa.schema(
    [
        ("partition", pa.binary()),
        ("bucket", pa.int32()),
        ("total_buckets", pa.int32()),
        ("ident", pa.binary()),
        ("kind", pa.int32()),
        ("created", pa.int64()),
        ("payload", pa.binary()),
    ]
)
_BIN_SCHEMA = pa.schema(
    [
        ("partition", pa.binary()),
        ("bucket", pa.int32()),
        ("total_buckets", pa.int32()),
        ("bin", pa.int32()),
        ("files", pa.int64()),
        ("bytes", pa.int64()),
        ("rows", pa.int64()),
        ("bucket_files", pa.int64()),
        ("payload", pa.binary()),
        ("error", pa.string()),
    ]
)


@dataclass(frozen=True)
class BinSummary:
    """One bin as the driver sees it."""

    partition: bytes
    bucket: int
    bin: int
    files: int
    bytes: int
    rows: int
    bucket_files: int


@dataclass(frozen=True)
class PlanShape:
    """How the table's files are grouped: by table kind and strategy (small, picklable)."""

    primary_key: bool
    unaware_bucket: bool
    full: bool


def creation_millis(created: dt.datetime | None) -> int | None:
    """A file's creation time as milliseconds in the same local-as-UTC encoding (spec §10.11)."""
    return None if created is None else (created - _EPOCH) // dt.timedelta(milliseconds=1)


def live_files_frame(
    spark: SparkSession | LocalSession,
    table: Table,
    snapshot: Snapshot,
    selected: Sequence[PartitionTest] | None,
) -> DataFrame | LocalFrame:
    """One row per live file of `snapshot` in the selected partitions (all when `selected` is None).

    Raises InvalidTableStateError (via the job's error mapping) when the metadata deletes a file
    never added or adds one twice: a compaction on inconsistent metadata could lose rows. On a
    `LocalSession` the same code plans in the driver (`jobs.compaction.run`: small tables).
    """
    F = functions_for(spark)  # noqa: N806 - pyspark's functions (or their local stand-in) as usually named

    manifests = data_manifests(table, snapshot)
    tests = list(selected) if selected is not None else None

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        chosen: dict[bytes, bool] = {}
        files = [
            (table.manifest_path(name), size)
            for batch in batches
            for name, size in zip(
                batch.column("name").to_pylist(), batch.column("size").to_pylist(), strict=True
            )
        ]
        # the next manifests are read while one is decoded: a task's reads one after another would
        # be bound by the store's latency (`read_ahead`)
        for (path, _size), data in zip(files, sized_bytes(table.file_io, files), strict=True):
            kept = []
            for entry in decode_manifest(data, path):
                if tests is not None:
                    hit = chosen.get(entry.partition)
                    if hit is None:
                        values = table.partition_values(entry.partition)
                        hit = chosen[entry.partition] = any(selects(test, values) for test in tests)
                    if not hit:
                        continue
                kept.append(entry)
            if not kept:
                continue
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([e.partition for e in kept], pa.binary()),
                    pa.array([e.bucket for e in kept], pa.int32()),
                    pa.array([e.total_buckets for e in kept], pa.int32()),
                    pa.array([pickle.dumps(e.identifier()[1:]) for e in kept], pa.binary()),
                    pa.array([e.kind for e in kept], pa.int32()),
                    pa.array([creation_millis(e.file.creation_time) for e in kept], pa.int64()),
                    pa.array([pickle.dumps(e.file) if e.kind == ADD else None for e in kept], pa.binary()),
                ],
                schema=_ENTRY_SCHEMA,
            )

    entries = manifest_frame(spark, manifests).mapInArrow(read, ENTRY_COLUMNS)
    files = entries.groupBy("partition", "bucket", "ident").agg(
        F.sum(F.when(F.col("kind") == ADD, 1).when(F.col("kind") == DELETE, -1).otherwise(1000)).alias("net"),
        F.max("total_buckets").alias("total_buckets"),
        F.max("created").alias("created"),
        F.max("payload").alias("payload"),
    )
    return files


def idle_partitions_only(files: DataFrame, idle_ms: int, now: dt.datetime | None = None) -> DataFrame:
    """Keep the files of partitions whose newest file was created more than `idle_ms` ago.

    Creation times are local wall-clock times stored as if UTC (spec §10.11), so the cut-off is the
    local wall clock minus the idle time, in the same encoding.
    """
    from pyspark.sql import functions as F  # pyspark: loaded when the job runs, not on import (--help)

    cutoff = creation_millis((now or dt.datetime.now()) - dt.timedelta(milliseconds=idle_ms))
    live_created = F.when(F.col("net") == 1, F.col("created"))
    newest = files.groupBy("partition").agg(F.max(live_created).alias("newest"))
    idle = newest.filter(F.col("newest").isNull() | (F.col("newest") < F.lit(cutoff))).select("partition")
    return files.join(idle, "partition", "left_semi")


DeletionFiles = Mapping[tuple[bytes, int], Mapping[str, DeletionFile]]


def bins_frame(
    files: DataFrame | LocalFrame,
    shape: PlanShape,
    settings: CompactionSettings,
    num_tasks: int,
    source: str,
    deletions: DeletionFiles | None = None,
) -> DataFrame | LocalFrame:
    """One row per bin: (partition, bucket) groups of live files handed to the picking rules.

    `files` are the grouped entries of `live_files_frame` (with their ADD/DELETE count `net`); a
    file whose count is neither 0 (added and deleted) nor 1 (live) means the metadata deletes a
    file never added or adds one twice: it becomes an error row, and the driver refuses to go on
    (a compaction on inconsistent metadata could lose rows). Checking here saves a Spark job.
    `deletions` (the snapshot's deletion files by bucket) travel with each bin's payload as
    (files, {file name: DeletionFile}), so the task applies them.
    """
    plan = functools.partial(
        _plan_bins_task, shape=shape, settings=settings, source=source, vectors=dict(deletions or {})
    )
    grouped = files.select("partition", "bucket", "total_buckets", "net", "ident", "payload")
    arranged = grouped.repartition(num_tasks, "partition", "bucket").sortWithinPartitions(
        "partition", "bucket"
    )
    return arranged.mapInArrow(plan, BIN_COLUMNS)


def _plan_bins_task(
    batches: Iterable[pa.RecordBatch],
    shape: PlanShape,
    settings: CompactionSettings,
    source: str,
    vectors: DeletionFiles,
) -> Iterator[pa.RecordBatch]:
    """The executor side of `bins_frame`: a task's rows, sorted by (partition, bucket), into bins."""
    collected = [batch for batch in batches if batch.num_rows]
    if not collected:
        return
    rows = pa.Table.from_batches(collected)
    partitions = rows.column("partition").to_pylist()
    buckets = rows.column("bucket").to_pylist()
    totals = rows.column("total_buckets").to_pylist()
    nets = rows.column("net").to_pylist()
    payloads = rows.column("payload").to_pylist()
    error = _inconsistency(nets, rows.column("ident").to_pylist(), source)
    if error is not None:
        yield pa.RecordBatch.from_pylist([{"bin": -1, "error": error}], schema=_BIN_SCHEMA)
        return
    out: list[dict[str, Any]] = []
    for start, end in _bucket_ranges(partitions, buckets):
        bucket_vectors = vectors.get((partitions[start], buckets[start]), {})
        files = [
            _bucket_file(pickle.loads(payloads[i]), bucket_vectors) for i in range(start, end) if nets[i] == 1
        ]
        picked = pick_bins(
            files,
            settings,
            primary_key=shape.primary_key,
            unaware_bucket=shape.unaware_bucket,
            full=shape.full,
        )
        for index, chosen in enumerate(picked):
            metas = [f.meta for f in chosen]
            out.append(
                _bin_row(
                    partitions[start],
                    buckets[start],
                    totals[start],
                    index,
                    metas,
                    len(files),
                    bucket_vectors,
                    placement_of(chosen),
                )
            )
        if len(out) >= 256:
            yield pa.RecordBatch.from_pylist(out, schema=_BIN_SCHEMA)
            out = []
    if out:
        yield pa.RecordBatch.from_pylist(out, schema=_BIN_SCHEMA)


def _inconsistency(nets: Sequence[int], idents: Sequence[bytes], source: str) -> str | None:
    """The error of the first file whose ADD/DELETE count is neither 0 nor 1, if any."""
    for net, ident in zip(nets, idents, strict=True):
        if net not in (0, 1):
            problem = "deletes a file that was never added" if net < 0 else "adds a file that is already live"
            return f"{source}: the metadata {problem} ({pickle.loads(ident)[2]}); nothing was changed"
    return None


def _bucket_ranges(partitions: Sequence[bytes], buckets: Sequence[int]) -> Iterator[tuple[int, int]]:
    """[start, end) of each run of rows with the same (partition, bucket), the rows being sorted so."""
    start = 0
    while start < len(partitions):
        end = start
        group = (partitions[start], buckets[start])
        while end < len(partitions) and (partitions[end], buckets[end]) == group:
            end += 1
        yield start, end
        start = end


def _bin_row(
    partition: bytes,
    bucket: int,
    total_buckets: int,
    index: int,
    metas: list[DataFileMeta],
    bucket_files: int,
    bucket_vectors: Mapping[str, DeletionFile],
    placement: Placement | None = None,
) -> dict[str, Any]:
    """One bin's row: its summary columns, and as the payload its files, their deletion files and
    where a primary-key bin's output goes (None: the top level)."""
    return {
        "partition": partition,
        "bucket": bucket,
        "total_buckets": total_buckets,
        "bin": index,
        "files": len(metas),
        "bytes": sum(m.file_size for m in metas),
        "rows": sum(m.row_count for m in metas),
        "bucket_files": bucket_files,
        "payload": pickle.dumps(
            (
                metas,
                {m.file_name: bucket_vectors[m.file_name] for m in metas if m.file_name in bucket_vectors},
                placement,
            )
        ),
        "error": None,
    }


def _bucket_file(meta: DataFileMeta, bucket_vectors: Mapping[str, DeletionFile]) -> BucketFile:
    deletion = bucket_vectors.get(meta.file_name)
    if deletion is None:
        return BucketFile(meta)
    return BucketFile(meta, deletion.cardinality if deletion.cardinality is not None else meta.row_count)


def collect_summaries(bins: DataFrame) -> list[BinSummary]:
    """The bins' summaries on the driver (never their payloads); refuses absurdly many bins.

    Counted first, then collected: `bins` is persisted, so the count computes every partition at
    once and the collect reads the cache (a `limit` would run one job per growing set of
    partitions, each a Spark job's fixed cost)."""
    summary = bins.select("partition", "bucket", "bin", "files", "bytes", "rows", "bucket_files", "error")
    assert_small(summary.count(), DRIVER_LIST_LIMIT, "compaction bins")
    rows = summary.collect()
    errors = [row["error"] for row in rows if row["error"]]
    if errors:
        raise InvalidTableStateError(errors[0])
    return [
        BinSummary(
            bytes(row["partition"]),
            row["bucket"],
            row["bin"],
            row["files"],
            row["bytes"],
            row["rows"],
            row["bucket_files"],
        )
        for row in rows
    ]


def only_buckets(spark: SparkSession, frame: DataFrame, buckets: Collection[tuple[bytes, int]]) -> DataFrame:
    """The rows of `frame` (live files, or planned bins) in the given (partition, bucket) pairs only:
    a broadcast semi-join, so the filter runs in the JVM and only those rows reach Python."""
    from pyspark.sql import functions as F  # pyspark: loaded when the job runs, not on import (--help)

    pairs = sorted(set(buckets))
    chosen = driver_list_frame(
        spark,
        {
            "partition": pa.array([p for p, _ in pairs], pa.binary()),
            "bucket": pa.array([b for _, b in pairs], pa.int32()),
        },
        "buckets to compact",
    )
    return frame.join(F.broadcast(chosen), ["partition", "bucket"], "left_semi")


def limit_buckets(summaries: list[BinSummary], max_buckets: int | None) -> list[BinSummary]:
    """At most `max_buckets` (partition, bucket) pairs: those with the most files to rewrite first."""
    if max_buckets is None:
        return summaries
    per_bucket: dict[tuple[bytes, int], int] = {}
    for summary in summaries:
        key = (summary.partition, summary.bucket)
        per_bucket[key] = per_bucket.get(key, 0) + summary.files
    chosen = set(sorted(per_bucket, key=lambda key: (-per_bucket[key], key))[:max_buckets])
    return [s for s in summaries if (s.partition, s.bucket) in chosen]
