"""Dropping partitions with Spark: what drop-partition and expire-partitions share (seed 004).

Paimon drops a partition by marking every live file in it as DELETE in one OVERWRITE snapshot; the
files themselves go when expire-snapshots expires the snapshots that still read them. Here:

1. `partition_stats`: executors read the manifests of a snapshot and aggregate them into one row per
   partition (live files, bytes, rows, newest creation time). ADD/DELETE pairs cancel by grouping on
   the file identifier in Spark, so the driver receives partitions, never files.
2. `drop_partitions`: executors read the manifests again, keep the entries of the chosen partitions,
   cancel ADD/DELETE pairs per partition, and write the DELETE entries into new manifests. The driver
   receives only the manifest metadata and commits them as the delta of one OVERWRITE snapshot.

Why pre-written delta manifests rather than replacing the base manifests of the affected partitions:
snapshot expiry finds the files to remove from the DELETE entries of later snapshots' deltas, and
streaming readers follow deltas too. Removing the entries from the base instead would hide the files
from both, leaving them for orphan cleaning.

Concurrent writers: the DELETE entries are computed against the snapshot the job read (the plan). If
other snapshots land before our commit, their deltas are read on the driver (they are small): files
they add to a dropped partition are dropped too (what Paimon's overwrite does, since it recomputes
the deletes on the snapshot it commits on), changes to other partitions are kept as they are. If one
of them deleted a file of our plan (a compaction or another drop of the same partition), the plan is
stale: its manifests are removed and the job plans again, a few times at most.
"""

from __future__ import annotations

import datetime as dt
import logging
import pickle
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from jobs.errors import CommitRaceLost
from jobs.spark import DRIVER_LIST_LIMIT, assert_small, driver_list_frame
from paimon_format.commit import OVERWRITE, AttemptContext, PrewrittenDelta, SnapshotCommit
from paimon_format.crash_points import crash_point
from paimon_format.errors import InvalidTableStateError, PaimonFormatError, SnapshotNotFoundError
from paimon_format.manifest import (
    ADD,
    DELETE,
    ManifestEntry,
    ManifestFileMeta,
    read_manifest,
    rolling_write_manifests,
)
from paimon_format.options import CoreOptions
from paimon_format.partition_spec import PartitionStats
from paimon_format.scan import EntryMerger, data_manifests, read_list
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

log = logging.getLogger(__name__)

_EPOCH = dt.datetime(1970, 1, 1)
ENTRY_FACTS = "partition binary, ident binary, kind int, size long, rows long, created long"
PAYLOADS = "partition binary, ord long, payload binary"
WRITTEN = "meta binary, files long, bytes long, rows long, error string"
_FACTS_SCHEMA = pa.schema(
    [
        ("partition", pa.binary()),
        ("ident", pa.binary()),
        ("kind", pa.int32()),
        ("size", pa.int64()),
        ("rows", pa.int64()),
        ("created", pa.int64()),
    ]
)
_PAYLOAD_SCHEMA = pa.schema([("partition", pa.binary()), ("ord", pa.int64()), ("payload", pa.binary())])
_WRITTEN_SCHEMA = pa.schema(
    [
        ("meta", pa.binary()),
        ("files", pa.int64()),
        ("bytes", pa.int64()),
        ("rows", pa.int64()),
        ("error", pa.string()),
    ]
)
# Files whose DELETE entries one writer task puts into manifests; more files spread over more tasks.
FILES_PER_WRITER = 200_000


def _manifest_frame(spark: Any, manifests: Sequence[ManifestFileMeta]) -> Any:
    """A DataFrame of (idx, name, size): one row per manifest, spread over tasks for the executors."""
    columns = {
        "idx": pa.array(range(len(manifests)), pa.int64()),
        "name": pa.array([meta.file_name for meta in manifests], pa.string()),
        "size": pa.array([meta.file_size for meta in manifests], pa.int64()),
    }
    return driver_list_frame(spark, columns, "manifest names")


def _creation_millis(created: dt.datetime | None) -> int | None:
    return None if created is None else (created - _EPOCH) // dt.timedelta(milliseconds=1)


# -- 1. per-partition summaries -----------------------------------------------------------------


def partition_stats(spark: Any, table: Table, snapshot: Snapshot | None) -> list[PartitionStats]:
    """Live files, bytes, rows and newest creation time per partition of `snapshot` (none: empty table).

    Inconsistent metadata (a DELETE without its ADD, a file added twice) is an error, never a guess.
    """
    if snapshot is None:
        return []
    manifests = data_manifests(table, snapshot)
    if not manifests:
        return []
    from pyspark.sql import functions as F

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for name, size in zip(
                batch.column("name").to_pylist(), batch.column("size").to_pylist(), strict=True
            ):
                entries = read_manifest(table.file_io, table.manifest_path(name), size)
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array([e.partition for e in entries], pa.binary()),
                        pa.array([pickle.dumps(e.identifier()[1:]) for e in entries], pa.binary()),
                        pa.array([e.kind for e in entries], pa.int32()),
                        pa.array([e.file.file_size for e in entries], pa.int64()),
                        pa.array([e.file.row_count for e in entries], pa.int64()),
                        pa.array([_creation_millis(e.file.creation_time) for e in entries], pa.int64()),
                    ],
                    schema=_FACTS_SCHEMA,
                )

    facts = _manifest_frame(spark, manifests).mapInArrow(read, ENTRY_FACTS)
    files = facts.groupBy("partition", "ident").agg(
        F.sum(F.when(F.col("kind") == ADD, 1).when(F.col("kind") == DELETE, -1).otherwise(1000)).alias("net"),
        F.max("size").alias("size"),
        F.max("rows").alias("rows"),
        F.max("created").alias("created"),
    )
    # one pass: live files per partition, plus the first file whose ADD/DELETE count is impossible
    live = F.col("net") == 1
    broken = (F.col("net") != 0) & (F.col("net") != 1)
    per_partition = files.groupBy("partition").agg(
        F.sum(F.when(live, 1).otherwise(0)).alias("files"),
        F.sum(F.when(live, F.col("size"))).alias("bytes"),
        F.sum(F.when(live, F.col("rows"))).alias("rows"),
        F.max(F.when(live, F.col("created"))).alias("created"),
        F.min(F.when(broken, F.struct("net", "ident"))).alias("broken"),
    )
    rows = per_partition.limit(DRIVER_LIST_LIMIT + 1).collect()
    assert_small(len(rows), DRIVER_LIST_LIMIT, "partitions")
    for row in rows:
        if row["broken"] is not None:
            net = row["broken"]["net"]
            problem = "deletes a file that was never added" if net < 0 else "adds a file that is already live"
            name = pickle.loads(row["broken"]["ident"])[2]
            raise InvalidTableStateError(
                f"{table.path} snapshot {snapshot.id}: the metadata {problem} ({name}); nothing was changed"
            )
    return [
        PartitionStats(
            partition=bytes(row["partition"]),
            file_count=int(row["files"]),
            file_bytes=int(row["bytes"] or 0),
            row_count=int(row["rows"] or 0),
            last_file_creation=None
            if row["created"] is None
            else _EPOCH + dt.timedelta(milliseconds=row["created"]),
        )
        for row in rows
        if row["files"]
    ]


# -- 2. DELETE manifests written on the executors -----------------------------------------------


@dataclass
class WrittenDeletes:
    """The DELETE manifests of one plan, and what they drop."""

    snapshot_id: int
    manifests: list[ManifestFileMeta]
    files: int
    bytes: int
    rows: int


def write_partition_deletes(
    spark: Any, table: Table, snapshot: Snapshot, partitions: set[bytes], expected_files: int = 0
) -> WrittenDeletes:
    """Write a DELETE entry for every live file of `partitions` in `snapshot`, on the executors."""
    manifests = data_manifests(table, snapshot)
    if not manifests or not partitions:
        return WrittenDeletes(snapshot.id, [], 0, 0, 0)
    assert_small(len(partitions), DRIVER_LIST_LIMIT, "partitions to drop")
    options = CoreOptions(table.schema.options)
    target = options.manifest_target_file_size
    compression = options.manifest_compression
    partition_types = table.schema.partition_types()
    schema_id = table.schema.id
    manifest_dir = table.file_io.join(table.path, "manifest")
    wanted = frozenset(partitions)
    source = f"{table.path} snapshot {snapshot.id}"

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            columns = (batch.column(c).to_pylist() for c in ("idx", "name", "size"))
            for index, name, size in zip(*columns, strict=True):
                entries = read_manifest(table.file_io, table.manifest_path(name), size)
                kept = [(pos, e) for pos, e in enumerate(entries) if e.partition in wanted]
                if kept:
                    yield pa.RecordBatch.from_arrays(
                        [
                            pa.array([e.partition for _pos, e in kept], pa.binary()),
                            pa.array([(index << 32) | pos for pos, _e in kept], pa.int64()),
                            pa.array([pickle.dumps(e) for _pos, e in kept], pa.binary()),
                        ],
                        schema=_PAYLOAD_SCHEMA,
                    )

    def merge_and_write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        collected = [batch for batch in batches if batch.num_rows]
        if not collected:
            return
        rows = pa.Table.from_batches(collected)
        partitions_in_order = rows.column("partition").to_pylist()
        payloads = rows.column("payload").to_pylist()
        deletes: list[ManifestEntry] = []
        start = 0
        try:
            while start < len(payloads):
                end = start
                while end < len(payloads) and partitions_in_order[end] == partitions_in_order[start]:
                    end += 1
                merger = EntryMerger(source)
                merger.add_all(pickle.loads(p) for p in payloads[start:end])
                deletes.extend(entry.as_delete() for entry in merger.live())
                start = end
        except PaimonFormatError as error:
            yield pa.RecordBatch.from_pylist(
                [{"meta": None, "files": 0, "bytes": 0, "rows": 0, "error": str(error)}],
                schema=_WRITTEN_SCHEMA,
            )
            return
        if not deletes:
            return
        prefix = str(uuid.uuid4())
        counter = iter(range(1 << 30))
        metas = rolling_write_manifests(
            table.file_io,
            manifest_dir,
            lambda: f"manifest-{prefix}-{next(counter)}",
            deletes,
            target,
            compression,
            partition_types,
            schema_id,
        )
        out = []
        first = 0
        for meta in metas:
            chunk = deletes[first : first + meta.num_deleted_files]
            first += meta.num_deleted_files
            out.append(
                {
                    "meta": pickle.dumps(meta),
                    "files": len(chunk),
                    "bytes": sum(e.file.file_size for e in chunk),
                    "rows": sum(e.file.row_count for e in chunk),
                    "error": None,
                }
            )
        yield pa.RecordBatch.from_pylist(out, schema=_WRITTEN_SCHEMA)

    parallelism = spark.sparkContext.defaultParallelism
    writers = max(1, min(-(-max(expected_files, 1) // FILES_PER_WRITER), parallelism * 4, len(partitions)))
    from pyspark import StorageLevel

    # the range shuffle samples its input first: keep the kept entries rather than reading twice
    entries = (
        _manifest_frame(spark, manifests).mapInArrow(read, PAYLOADS).persist(StorageLevel.MEMORY_AND_DISK)
    )
    try:
        arranged = entries.repartitionByRange(writers, "partition").sortWithinPartitions("partition", "ord")
        results = arranged.mapInArrow(merge_and_write, WRITTEN).collect()
    finally:
        entries.unpersist()
    metas = [pickle.loads(row["meta"]) for row in results if row["meta"] is not None]
    errors = [row["error"] for row in results if row["error"]]
    if errors:
        remove_manifests(table, metas)
        raise InvalidTableStateError(f"{errors[0]}; the metadata is inconsistent, nothing was changed")
    return WrittenDeletes(
        snapshot.id,
        metas,
        sum(row["files"] for row in results),
        sum(row["bytes"] for row in results),
        sum(row["rows"] for row in results),
    )


def remove_manifests(table: Table, metas: Sequence[ManifestFileMeta]) -> None:
    """Remove manifests this job wrote and no snapshot names (a lost or abandoned plan)."""
    if metas:
        table.file_io.delete_many([table.manifest_path(meta.file_name) for meta in metas])


# -- 3. the commit, aware of what landed since the plan -----------------------------------------


class StalePlan(PaimonFormatError):
    """A snapshot that landed after the plan deleted one of the planned files: plan again."""


def concurrent_deletes(
    table: Table, planned: int, latest: Snapshot | None, partitions: frozenset[bytes]
) -> list[ManifestEntry]:
    """DELETE entries for files added to `partitions` by snapshots after `planned` up to `latest`.

    Raises StalePlan when one of those snapshots deleted a file the plan already deletes, or when
    a snapshot in between is gone (expired meanwhile), because then the plan cannot be checked.
    """
    if latest is None or latest.id <= planned:
        return []
    added: dict[tuple, ManifestEntry] = {}
    for snapshot_id in range(planned + 1, latest.id + 1):
        try:
            snapshot = latest if snapshot_id == latest.id else table.snapshot_manager.snapshot(snapshot_id)
        except SnapshotNotFoundError:
            raise StalePlan(f"{table.path}: snapshot {snapshot_id} expired while this job ran") from None
        for meta in read_list(table, snapshot.delta_manifest_list):
            for entry in read_manifest(table.file_io, table.manifest_path(meta.file_name), meta.file_size):
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
    spark: Any,
    table: Table,
    partitions: Sequence[bytes],
    expected_files: int = 0,
    max_replans: int = 3,
    before_commit: Callable[[], None] | None = None,
    step_prefix: str = "drop-partition",
    properties: dict[str, str] | None = None,
) -> DropOutcome:
    """Commit one OVERWRITE snapshot that deletes every live file of `partitions`.

    `before_commit` is a test hook (a rival writer commits there); crash points are named
    `<step_prefix>:after-manifests-written` and `<step_prefix>:after-commit`.
    """
    wanted = frozenset(partitions)
    for replan in range(max_replans + 1):
        latest = table.snapshot_manager.latest()
        if latest is None:
            return DropOutcome(None)
        written = write_partition_deletes(spark, table, latest, set(wanted), expected_files)
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
            extra[:] = concurrent_deletes(table, planned, ctx.latest, wanted)
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

# Partitions listed one by one in a run record (all of them are counted).
RECORD_PARTITION_LIMIT = 100


def open_partitioned_table(config: Any) -> Table:
    """The configured table, which must exist and be partitioned (else exit 2 naming it)."""
    from jobs.errors import BadInputError
    from jobs.table_open import open_existing_table

    table = open_existing_table(config)
    if not table.schema.partition_keys:
        raise BadInputError(f"{table.path}: table {config.table} has no partition keys; nothing to drop")
    return table


def partition_label(table: Table, values: Sequence[Any]) -> dict[str, str]:
    """A partition as people write it in a spec: {key: text}, the default name for null."""
    default = table.options.partition_default_name
    label = {}
    for key, value in zip(table.schema.partition_keys, values, strict=True):
        if value is None:
            label[key] = default
        elif isinstance(value, (dt.date, dt.datetime)):
            label[key] = value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
        else:
            label[key] = str(value)
    return label


def record_partitions(
    record: Any, table: Table, chosen: Sequence[tuple[PartitionStats, Sequence[Any]]]
) -> None:
    """Counts of the chosen partitions, and the first RECORD_PARTITION_LIMIT of them in detail."""
    record.count("partitions", len(chosen))
    record.count("files", sum(stats.file_count for stats, _ in chosen))
    record.add_bytes("files", sum(stats.file_bytes for stats, _ in chosen))
    record.count("rows", sum(stats.row_count for stats, _ in chosen))
    record.details["partitions"] = [
        {
            "partition": partition_label(table, values),
            "files": stats.file_count,
            "bytes": stats.file_bytes,
            "rows": stats.row_count,
        }
        for stats, values in chosen[:RECORD_PARTITION_LIMIT]
    ]
    record.sample("partition_dirs", [table.partition_dir(stats.partition) for stats, _ in chosen])


def record_drop(record: Any, outcome: DropOutcome) -> None:
    if outcome.snapshot is not None:
        record.committed(outcome.snapshot.id)
    record.count("files_dropped", outcome.files)
    record.add_bytes("files_dropped", outcome.bytes)
    record.count("rows_dropped", outcome.rows)
    record.count("concurrent_files_dropped", outcome.concurrent_files)
    record.count("replans", outcome.replans)
    record.sample("delete_manifests", outcome.manifests)
