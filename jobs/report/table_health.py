"""What the health page shows of one table, read from its metadata alone.

Snapshots (count, earliest and latest commit), the live files of the latest snapshot (files, bytes,
rows, small files, a size histogram, files per partition), tags, branches, consumers and the
options. The figures are those of `python -m paimon_format inspect --files-per-partition`: the same
size buckets (`paimon_format.inspect.SIZE_BUCKETS`) and the same small-file rule (under half of
`target-file-size`), so a user can check the page against the command line.

Memory: `inspect` keeps every live entry to cancel ADDs against DELETEs; a warehouse page must not
hold millions of entries per table. Here each manifest is streamed and its entries are added into
per-partition tallies, an ADD counting +1 and a DELETE -1 (a DELETE entry carries the same file
meta as its ADD, so sizes and rows cancel exactly). What stays in memory grows with the partitions
(and the manifest list, one entry per manifest), never with the files; the partition jobs' scan
counts what it does not drop the same way. Exact for consistent metadata; DELETEs without their
ADDs that outnumber the ADDs of a partition leave a negative tally, and the table is reported as
broken, never rounded. A DELETE that pairs with the wrong file is not seen here: the jobs that
change a table check identities (`EntryMerger`), a look at it does not.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from paimon_format.consumers import ConsumerManager
from paimon_format.errors import InvalidTableStateError, SnapshotNotFoundError
from paimon_format.inspect import SIZE_BUCKETS
from paimon_format.manifest.codec import iter_manifest_records
from paimon_format.manifest.entries import ADD, DELETE
from paimon_format.manifest.read_ahead import sized_bytes
from paimon_format.model.options import CoreOptions
from paimon_format.scan.snapshot_scan import data_manifests
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

TAGS_SHOWN = 20  # tags listed by name on the page; the count is always complete


@dataclass
class PartitionTally:
    """Net files, bytes, rows and small files of one partition (ADDs minus DELETEs)."""

    files: int = 0
    bytes: int = 0
    rows: int = 0
    small_files: int = 0


@dataclass
class LiveFiles:
    """The live data files of one snapshot, summed up."""

    snapshot_id: int
    files: int = 0
    bytes: int = 0
    rows: int = 0
    small_files: int = 0
    level0_files: int = 0  # primary-key tables: files no compaction has merged yet
    histogram: dict[str, int] = field(default_factory=dict)  # SIZE_BUCKETS label -> files
    partition_count: int = 0
    top_partitions: list[tuple[str, PartitionTally]] = field(default_factory=list)  # most files first
    manifests: int = 0
    manifests_with_deletes: int = 0


@dataclass(frozen=True)
class TagInfo:
    name: str
    snapshot_id: int
    commit_time_ms: int
    created: str | None  # the tag's own creation time, when its file has one


@dataclass(frozen=True)
class ConsumerInfo:
    consumer_id: str
    next_snapshot: int
    modified_ms: int


@dataclass
class TableHealth:
    """One table on the page: its figures, or the error that kept them from being read."""

    identifier: str
    path: str = ""
    error: str | None = None
    exit_code: int = 0
    schema_id: int | None = None
    field_count: int = 0
    partition_keys: list[str] = field(default_factory=list)
    primary_keys: list[str] = field(default_factory=list)
    options: dict[str, str] = field(default_factory=dict)
    target_file_size: int = 0
    small_file_below: int = 0
    snapshot_count: int = 0
    earliest: Snapshot | None = None
    latest: Snapshot | None = None
    changelog_count: int = 0
    live: LiveFiles | None = None
    tag_count: int = 0
    tags: list[TagInfo] = field(default_factory=list)  # the newest TAGS_SHOWN
    oldest_tag: TagInfo | None = None  # the tag on the lowest snapshot id
    branches: list[str] = field(default_factory=list)
    consumers: list[ConsumerInfo] = field(default_factory=list)
    runs: list[Any] = field(default_factory=list)  # run_records.RunSummary, newest first
    advice: list[str] = field(default_factory=list)


def read_table_health(table: Table, identifier: str, top_partitions: int = 10) -> TableHealth:
    """Everything the page shows of `table` (main branch), from its metadata; a failed read raises."""
    schema = table.schema
    options = CoreOptions(dict(schema.options))
    target = options.target_file_size(bool(schema.primary_keys))
    health = TableHealth(
        identifier=identifier,
        path=table.path,
        schema_id=schema.id,
        field_count=len(schema.fields),
        partition_keys=list(schema.partition_keys),
        primary_keys=list(schema.primary_keys),
        options=dict(schema.options),
        target_file_size=target,
        small_file_below=target // 2,
    )
    # the latest first: the open check's read of it is handed over until snapshots are listed
    health.latest = table.snapshot_manager.latest(reuse_read=True)
    if health.latest is not None:
        ids, health.earliest = _earliest(table, health.latest)
        health.snapshot_count = len(ids)
        health.live = live_files(table, health.latest, health.small_file_below, top_partitions)
    manager = table.snapshot_manager
    health.changelog_count = len(manager.changelog_ids())
    tags = table.tag_manager.tags()
    health.tag_count = len(tags)
    newest = list(tags.items())[-TAGS_SHOWN:]
    health.tags = [_tag_info(name, tag) for name, tag in reversed(newest)]
    health.oldest_tag = _tag_info(*next(iter(tags.items()))) if tags else None
    health.branches = table.branch_manager.branch_names()
    consumers = ConsumerManager(table.file_io, table.path, table.branch)
    times = consumers.modification_times()
    health.consumers = [
        ConsumerInfo(consumer_id, next_snapshot, times.get(consumer_id, 0))
        for consumer_id, next_snapshot in sorted(consumers.consumers().items())
    ]
    return health


def _earliest(table: Table, latest: Snapshot, attempts: int = 3) -> tuple[list[int], Snapshot]:
    """The snapshot ids and the earliest snapshot (`latest` itself when it is the only one). An
    expiry running meanwhile (a page must show a table maintain is working on) deletes the earliest
    between the listing and its read: then list again; a snapshot missing on every attempt is an
    error like any failed read."""
    manager = table.snapshot_manager
    for attempt in range(attempts):
        ids = manager.snapshot_ids() or [latest.id]
        if ids[0] == latest.id:
            return ids, latest
        try:
            return ids, manager.snapshot(ids[0])
        except SnapshotNotFoundError:
            if attempt == attempts - 1:
                raise
    return [latest.id], latest  # attempts < 1: the latest alone


def _tag_info(name: str, tag: Snapshot) -> TagInfo:
    created = tag.tag_create_time
    return TagInfo(name, tag.id, tag.time_millis, None if created is None else created.isoformat(" "))


class _Tally:
    """Net sums over streamed manifest records: per partition, per size bucket, level 0."""

    def __init__(self, small_below: int) -> None:
        self.small_below = small_below
        self.partitions: dict[bytes, PartitionTally] = {}
        self.histogram = [0] * len(SIZE_BUCKETS)
        self.level0 = 0
        self.bounds = [bound for _label, bound in SIZE_BUCKETS]

    def add(self, record: dict[str, Any], path: str) -> bool:
        """Count one manifest record in; True when it is a DELETE."""
        kind = record["_KIND"]
        if kind != ADD and kind != DELETE:
            raise InvalidTableStateError(f"{path}: unknown entry kind {kind}")
        sign = 1 if kind == ADD else -1
        meta = record["_FILE"]
        size = meta["_FILE_SIZE"]
        tally = self.partitions.get(record["_PARTITION"])
        if tally is None:
            tally = self.partitions[record["_PARTITION"]] = PartitionTally()
        tally.files += sign
        tally.bytes += sign * size
        tally.rows += sign * meta["_ROW_COUNT"]
        if size < self.small_below:
            tally.small_files += sign
        self.histogram[next(i for i, bound in enumerate(self.bounds) if size < bound)] += sign
        if meta["_LEVEL"] == 0:
            self.level0 += sign
        return kind == DELETE


def live_files(table: Table, snapshot: Snapshot, small_below: int, top: int = 10) -> LiveFiles:
    """The live files of `snapshot` summed per partition and size bucket, its manifests streamed
    (the next ones read while one is decoded); `InvalidTableStateError` when the net counts show a
    DELETE without its ADD."""
    manifests = data_manifests(table, snapshot)
    files = [(table.manifest_path(meta.file_name), meta.file_size) for meta in manifests]
    tally = _Tally(small_below)
    result = LiveFiles(snapshot.id, manifests=len(manifests))
    for (path, _size), data in zip(files, sized_bytes(table.file_io, files), strict=True):
        deletes = False
        for record in iter_manifest_records(data, path):
            deletes |= tally.add(record, path)
        result.manifests_with_deletes += deletes
    where = f"{table.path} snapshot {snapshot.id}"
    live = {partition: t for partition, t in tally.partitions.items() if t.files or t.bytes or t.rows}
    broken = [p for p, t in live.items() if min(t.files, t.bytes, t.rows, t.small_files) < 0]
    if broken or min(tally.histogram, default=0) < 0 or tally.level0 < 0:
        raise InvalidTableStateError(
            f"{where}: its manifests delete files they never added (net file count below zero"
            + (f" in partition {partition_text(table, broken[0])})" if broken else ")")
        )
    for t in live.values():
        result.files += t.files
        result.bytes += t.bytes
        result.rows += t.rows
        result.small_files += t.small_files
    result.level0_files = tally.level0
    result.histogram = {
        label: count for (label, _b), count in zip(SIZE_BUCKETS, tally.histogram, strict=True)
    }
    result.partition_count = len(live)
    chosen = heapq.nsmallest(top, live.items(), key=lambda item: (-item[1].files, -item[1].bytes, item[0]))
    result.top_partitions = [(partition_text(table, partition), t) for partition, t in chosen]
    return result


def partition_text(table: Table, partition: bytes) -> str:
    """`dt=2024-01-01/hr=3` as `inspect` prints it; '' for an unpartitioned table."""
    if not table.schema.partition_keys:
        return ""
    return "/".join(f"{key}={value}" for key, value in table.partition_spec(partition).items())
