"""What a `spark.read.format("paimon")` read plans on the driver, without Spark: the snapshot its
options name, the schema it returns, and its tasks of splits with what the pushed filters skipped.

The reader (`reader.py`) is a thin Spark shell around this module, so the planning is testable and
shared: the snapshot and schema come from `jobs.read.read_schema_at`, the splits from
`paimon_format.scan.splits.plan_splits` and the tasks from `jobs.read.read_task_groups`, exactly as
`read_table` plans. Only the snapshot options (Paimon's names) and the filters are the source's own.

Options that choose the snapshot (at most one): `snapshot-id` / `scan.snapshot-id`, `tag` /
`scan.tag-name`, `timestamp` / `scan.timestamp` (ISO time, UTC unless it says otherwise, or a
duration back from now), `scan.timestamp-millis`; and `scan.mode` as Paimon names its startup modes,
limited to those that mean one snapshot in a batch read. Every mistake is a `SourceOptionError`
naming the option, raised before a task runs.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import fsspec

from jobs.read import read_schema_at, read_task_groups
from jobs.source.location import SourceOptionError, TableLocation, table_location
from paimon_format.errors import PaimonFormatError
from paimon_format.model.instants import instant_ms
from paimon_format.model.schema import TableSchema
from paimon_format.scan.splits import Split, plan_splits, skips_level0
from paimon_format.scan.value_filter import (
    FileSkipping,
    PartitionTerms,
    SkipCounts,
    ValueFilter,
    column_of,
    literal_fits,
)
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table
from paimon_format.tags import latest_snapshot_at_or_before

log = logging.getLogger("jobs.source")

# Paimon's startup modes a batch read can take, and what they need
_LATEST_MODES = ("default", "latest-full", "full", "latest")
_SNAPSHOT_MODES = ("from-snapshot", "from-snapshot-full")
_BATCH_MODES = (*_LATEST_MODES, *_SNAPSHOT_MODES, "from-timestamp", "compacted-full")
_ALIASES = {
    "scan.snapshot-id": "snapshot-id",
    "scan.tag-name": "tag",
    "scan.timestamp": "timestamp",
}
_CHOOSERS = ("snapshot-id", "tag", "timestamp", "scan.timestamp-millis")


@dataclass(frozen=True)
class ReadOptions:
    """A read's options, checked: where the table is and which snapshot it reads."""

    location: TableLocation
    mode: str = "default"
    snapshot_id: int | None = None
    tag: str | None = None
    timestamp_ms: int | None = None
    timestamp_option: str | None = None
    parallelism: int | None = None
    record_path: str | None = None


def read_options(options: Mapping[str, str], now_ms: int | None = None) -> ReadOptions:
    """The checked options of a read; `SourceOptionError` naming the option that is wrong."""
    lowered = {key.lower(): str(value) for key, value in options.items()}
    chosen: dict[str, tuple[str, str]] = {}  # canonical name -> (option as given, value)
    for key, value in lowered.items():
        canonical = _ALIASES.get(key, key)
        if canonical in _CHOOSERS and value != "":
            if canonical in chosen or len(chosen) == 1:
                given = [chosen[c][0] for c in chosen] + [key]
                raise SourceOptionError(
                    f"options {' and '.join(map(repr, given))}: give at most one snapshot"
                )
            chosen[canonical] = (key, value)
    mode = lowered.get("scan.mode", "default").strip().lower()
    if mode not in _BATCH_MODES:
        raise SourceOptionError(
            f"option 'scan.mode' = {mode!r} is not a batch read of one snapshot; "
            f"use one of {', '.join(_BATCH_MODES)}"
        )
    _check_mode(mode, chosen)
    snapshot_id = tag = timestamp_ms = timestamp_option = None
    if "snapshot-id" in chosen:
        key, value = chosen["snapshot-id"]
        snapshot_id = _positive_int(key, value)
    if "tag" in chosen:
        tag = chosen["tag"][1]
    if "timestamp" in chosen:
        timestamp_option, value = chosen["timestamp"]
        try:
            timestamp_ms = instant_ms(value, now_ms if now_ms is not None else int(time.time() * 1000))
        except ValueError as error:
            raise SourceOptionError(f"option {timestamp_option!r}: {error}") from None
    if "scan.timestamp-millis" in chosen:
        timestamp_option, value = chosen["scan.timestamp-millis"]
        timestamp_ms = _positive_int(timestamp_option, value, allow_zero=True)
    parallelism = lowered.get("parallelism")
    return ReadOptions(
        table_location(options),
        mode,
        snapshot_id,
        tag,
        timestamp_ms,
        timestamp_option,
        _positive_int("parallelism", parallelism) if parallelism else None,
        lowered.get("scan-record") or None,
    )


def _check_mode(mode: str, chosen: Mapping[str, tuple[str, str]]) -> None:
    given = next(iter(chosen.values()), None)
    if mode in ("latest-full", "full", "latest", "compacted-full") and given:
        raise SourceOptionError(
            f"option {given[0]!r} contradicts 'scan.mode' = {mode!r} (it reads the latest)"
        )
    if mode in _SNAPSHOT_MODES and (
        not given or given[0] not in ("snapshot-id", "scan.snapshot-id", "tag", "scan.tag-name")
    ):
        raise SourceOptionError(
            f"'scan.mode' = {mode!r} needs option 'snapshot-id' (or 'scan.snapshot-id') or 'tag'"
        )
    if mode == "from-timestamp" and (
        not given or given[0] not in ("timestamp", "scan.timestamp", "scan.timestamp-millis")
    ):
        raise SourceOptionError(f"'scan.mode' = {mode!r} needs option 'timestamp' or 'scan.timestamp-millis'")


def _positive_int(key: str, value: str, allow_zero: bool = False) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        number = -1
    if number < (0 if allow_zero else 1):
        raise SourceOptionError(
            f"option {key!r} must be a {'non-negative' if allow_zero else 'positive'} integer, got {value!r}"
        )
    return number


# -- the table, its snapshot and schema --------------------------------------------------------------


@dataclass(frozen=True)
class OpenedRead:
    """The table a read opened, the snapshot it reads (None: the table has none yet) and its schema."""

    table: Table
    snapshot: Snapshot | None
    schema: TableSchema


def open_read(options: ReadOptions) -> OpenedRead:
    """Open the table and resolve the snapshot; `SourceOptionError` naming the option on bad input."""
    location = options.location
    table = location.open()
    try:
        table.check_metadata()
    except PaimonFormatError as error:
        where = f" (option 'branch' = {location.branch!r})" if location.branch else ""
        raise SourceOptionError(
            f"option 'path': no Paimon table at {location.root}{where}: {error}"
        ) from None
    snapshot = _snapshot(table, options)
    try:
        schema = read_schema_at(table, snapshot)
    except (ValueError, PaimonFormatError) as error:
        raise SourceOptionError(f"{location.root}: cannot be read: {error}") from None
    return OpenedRead(table, snapshot, schema)


def _snapshot(table: Table, options: ReadOptions) -> Snapshot | None:
    manager = table.snapshot_manager
    try:
        if options.snapshot_id is not None:
            return manager.snapshot(options.snapshot_id)
    except PaimonFormatError as error:
        raise SourceOptionError(f"option 'snapshot-id' = {options.snapshot_id}: {error}") from None
    try:
        if options.tag is not None:
            return table.tag_manager.tag(options.tag)
    except PaimonFormatError as error:
        raise SourceOptionError(f"option 'tag' = {options.tag!r}: {error}") from None
    if options.timestamp_ms is not None:
        found = latest_snapshot_at_or_before(manager, time_ms=options.timestamp_ms)
        if found is None:
            raise SourceOptionError(
                f"option {options.timestamp_option!r}: no retained snapshot of {table.path} was committed "
                f"at or before {options.timestamp_ms} ms (earliest retained: {manager.earliest_id()})"
            )
        return found
    if options.mode == "compacted-full":
        return _latest_compacted(table)
    return manager.latest(reuse_read=True)


def _latest_compacted(table: Table) -> Snapshot:
    """Paimon's `compacted-full` batch read: the newest snapshot a compaction committed."""
    manager = table.snapshot_manager
    for snapshot_id in reversed(manager.snapshot_ids()):
        snapshot = manager.snapshot(snapshot_id)
        if snapshot.commit_kind == "COMPACT":
            return snapshot
    raise SourceOptionError(f"'scan.mode' = 'compacted-full': {table.path} has no retained COMPACT snapshot")


# -- filters and the plan ---------------------------------------------------------------------------


@dataclass
class PushedTerms:
    """Which pushed terms prune partitions (applied exactly) and which skip files (by stats)."""

    partition: list[tuple[int, ValueFilter]] = field(default_factory=list)
    files: list[ValueFilter] = field(default_factory=list)
    exact: set[int] = field(default_factory=set)  # positions (in the pushed list) applied exactly


def sort_terms(opened: OpenedRead, terms: Sequence[ValueFilter | None]) -> PushedTerms:
    """Terms on a partition column whose literals fit its type prune partitions exactly; terms on
    columns a file skip may use (any column of an append table or of a table whose batch reads skip
    level 0; key columns where reads merge) skip files; the rest only Spark applies."""
    pushed = PushedTerms()
    schema = opened.schema
    partition_keys = list(schema.partition_keys)
    partition_types = schema.partition_types()
    types = {f.name: f.type for f in schema.fields}
    merges = bool(schema.primary_keys) and not skips_level0(opened.table)
    for position, term in enumerate(terms):
        if term is None or column_of(term) not in types:
            continue
        column = column_of(term)
        if column in partition_keys:
            index = partition_keys.index(column)
            if literal_fits(term, partition_types[index]):
                pushed.partition.append((index, term))
                pushed.exact.add(position)
            continue
        if not merges or column in schema.primary_keys:
            pushed.files.append(term)
    return pushed


@dataclass
class ReadPlan:
    """The tasks of one read (each a list of splits) and its record (what was planned and skipped)."""

    opened: OpenedRead
    tasks: list[list[Split]]
    record: dict[str, Any]


def plan_read(opened: OpenedRead, pushed: PushedTerms, parallelism: int) -> ReadPlan:
    """The splits of the read, pruned by the pushed terms, cut into tasks as `read_table` cuts them."""
    table, snapshot, schema = opened.table, opened.snapshot, opened.schema
    record: dict[str, Any] = {"table": table.path, "branch": table.branch, "snapshot": None}
    if snapshot is None:
        log.info("read %s: no snapshot yet, empty result", table.path)
        return ReadPlan(opened, [], {**record, "splits": 0, "tasks": 0, "files": 0})
    counts = SkipCounts()
    partitions = (
        PartitionTerms(pushed.partition, schema.partition_types(), counts) if pushed.partition else None
    )
    skipping = FileSkipping(schema, pushed.files, table.schema_by_id) if pushed.files else None

    def accepts(partition: bytes) -> bool:
        if partitions is None or partitions.accepts(table.partition_values(partition)):
            return True
        counts.partitions_skipped.add(partition)
        return False

    splits = plan_splits(
        table,
        snapshot,
        accepts if partitions is not None else None,
        manifest_filter=partitions.manifest_may_match if partitions is not None else None,
        file_filter=skipping.keeps if skipping is not None else None,
    )
    tasks = read_task_groups(splits, parallelism)
    record.update(
        snapshot=snapshot.id,
        schema_id=schema.id,
        splits=len(splits),
        tasks=len(tasks),
        files=sum(len(s.files) for s in splits),
        partitions_skipped=len(counts.partitions_skipped),
        manifests_skipped=counts.manifests_skipped,
        files_skipped_by_stats=skipping.counts.files_skipped if skipping is not None else 0,
        partition_terms=len(pushed.partition),
        file_terms=len(pushed.files),
    )
    log.info(
        "read %s: snapshot %d, %d split(s) in %d task(s), %d file(s); skipped %d partition(s), "
        "%d manifest(s), %d file(s) by stats",
        table.path,
        snapshot.id,
        len(splits),
        len(tasks),
        record["files"],
        record["partitions_skipped"],
        record["manifests_skipped"],
        record["files_skipped_by_stats"],
    )
    return ReadPlan(opened, tasks, record)


def write_record(path: str, record: Mapping[str, Any]) -> None:
    """The plan's record as JSON at `path` (`scan-record`): how a caller sees what planning skipped."""
    with fsspec.open(path, "w", encoding="utf-8") as out:
        json.dump(record, out, indent=2, sort_keys=True)
