"""`spark.readStream.format("paimon")`: a table's commits as a stream of micro-batches.

Offsets are snapshot ids: `{"snapshot": s}` means every snapshot up to and including `s` was
delivered. A start may also carry `"full": f` (snapshot `f`, the one after `s`, is delivered as its
whole content instead of its delta): that is how `scan.mode` `latest-full` (the default) and
`from-snapshot-full` begin. A micro-batch (start, end] then reads, for each later snapshot, what it
added, as Paimon's streaming `DeltaFollowUpScanner` does for an append table: the files ADDed by
APPEND snapshots. COMPACT snapshots only rewrite rows already delivered and OVERWRITE snapshots
replace them (Paimon skips both unless `streaming-read-overwrite`), so both deliver nothing.

Primary-key tables are refused for now: their stream needs row kinds (+I/-U/+U/-D), which this
reader does not surface yet.

`consumer-id`: after Spark has committed a micro-batch ending at snapshot `s` (`commit`), the
consumer file `consumer/consumer-<id>` records `nextSnapshot = s + 1`, as Paimon's streaming source
does at a checkpoint, so expire-snapshots keeps every snapshot the stream has still to read. A query
without a checkpoint starts at the consumer's next snapshot when it exists. Crash ordering: Spark
writes its commit log before it calls `commit`; a crash in between leaves the consumer one batch
behind, which only keeps more snapshots (never fewer) alive.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from jobs.read import read_splits_as, read_task_groups
from jobs.source.location import SourceOptionError, TableLocation, table_location
from paimon_format.commit import APPEND
from paimon_format.consumers import ConsumerManager
from paimon_format.errors import PaimonFormatError
from paimon_format.manifest.entries import ADD
from paimon_format.model.schema import TableSchema
from paimon_format.scan.snapshot_scan import read_entries, read_list
from paimon_format.scan.splits import Split, plan_splits
from paimon_format.table import Table

_MODES = ("default", "latest-full", "full", "latest", "from-snapshot", "from-snapshot-full")


@dataclass(frozen=True)
class StreamOptions:
    """A stream's checked options: where the table is, where the stream starts, and its consumer."""

    location: TableLocation
    mode: str
    snapshot_id: int | None
    consumer_id: str | None
    parallelism: int | None


def stream_options(options: Mapping[str, str]) -> StreamOptions:
    """The checked options of a stream; `SourceOptionError` naming the option that is wrong."""
    lowered = {key.lower(): str(value) for key, value in options.items()}
    mode = lowered.get("scan.mode", "default").strip().lower()
    if mode not in _MODES:
        raise SourceOptionError(
            f"option 'scan.mode' = {mode!r} cannot start a stream; use one of {', '.join(_MODES)}"
        )
    given = lowered.get("scan.snapshot-id") or lowered.get("snapshot-id")
    if mode.startswith("from-snapshot") != bool(given):
        raise SourceOptionError(
            f"option 'scan.snapshot-id' goes with 'scan.mode' = from-snapshot or from-snapshot-full "
            f"(given: scan.mode = {mode!r}, scan.snapshot-id = {given!r})"
        )
    snapshot_id = _positive(given, "scan.snapshot-id") if given else None
    consumer = lowered.get("consumer-id") or None
    if consumer is not None and ("/" in consumer or consumer.strip() != consumer):
        raise SourceOptionError(f"option 'consumer-id' = {consumer!r}: no '/' or surrounding spaces")
    parallelism = lowered.get("parallelism")
    return StreamOptions(
        table_location(options),
        mode,
        snapshot_id,
        consumer,
        _positive(parallelism, "parallelism") if parallelism else None,
    )


def _positive(text: str, key: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise SourceOptionError(f"option {key!r} must be a positive integer, got {text!r}")
    return value


class StreamTask(InputPartition):
    """One Spark task of a micro-batch: its splits (file metadata only, small and picklable)."""

    def __init__(self, index: int, splits: list[Split]) -> None:
        super().__init__(index)
        self.splits = splits


def initial_offset(table: Table, options: StreamOptions) -> dict[str, int]:
    """Where a stream without a checkpoint starts: at its consumer's next snapshot when it has one,
    else as `scan.mode` says."""
    if options.consumer_id is not None:
        next_snapshot = consumers(table).consumer(options.consumer_id)
        if next_snapshot is not None:
            return {"snapshot": next_snapshot - 1}
    latest = table.snapshot_manager.latest_id() or 0
    if options.mode == "latest":
        return {"snapshot": latest}
    if options.snapshot_id is not None:
        first = options.snapshot_id
        if options.mode == "from-snapshot-full":
            return {"snapshot": first - 1, "full": first}
        return {"snapshot": first - 1}
    return {"snapshot": latest - 1, "full": latest} if latest else {"snapshot": 0}


def latest_offset_of(table: Table, start: Mapping[str, int] | None) -> dict[str, int]:
    """The latest snapshot now; `start` itself while there is none newer (Spark then runs no batch)."""
    latest = table.snapshot_manager.latest_id() or 0
    if start is not None and latest <= int(start["snapshot"]) and "full" not in start:
        return dict(start)
    return {"snapshot": max(latest, int(start["snapshot"]) if start else 0)}


def consumers(table: Table) -> ConsumerManager:
    return ConsumerManager(table.file_io, table.path, table.branch)


def delta_splits(table: Table, snapshot_id: int) -> list[Split]:
    """The files snapshot `snapshot_id` appended, one split per partition and bucket; nothing for a
    COMPACT or OVERWRITE snapshot (see the module docstring). A snapshot already expired is an error:
    the stream would silently lose its rows."""
    try:
        snapshot = table.snapshot_manager.snapshot(snapshot_id)
    except PaimonFormatError as error:
        raise SourceOptionError(
            f"{table.path}: the stream needs snapshot {snapshot_id}, which cannot be read ({error}); "
            "give the stream a 'consumer-id' so expire-snapshots keeps what it has still to read"
        ) from None
    if snapshot.commit_kind != APPEND:
        return []
    groups: dict[tuple[bytes, int], Split] = {}
    for entry in read_entries(table, read_list(table, snapshot.delta_manifest_list)):
        if entry.kind != ADD:
            continue
        key = (entry.partition, entry.bucket)
        if key not in groups:
            groups[key] = Split(entry.partition, entry.bucket, [], entry.total_buckets, {}, True, snapshot_id)
        groups[key].files.append(entry.file)
    return list(groups.values())


def batch_splits(table: Table, start: Mapping[str, int], end: Mapping[str, int]) -> list[Split]:
    """The splits of the micro-batch (start, end]: a full snapshot first if `start` asks for one."""
    splits: list[Split] = []
    first = int(start["snapshot"]) + 1
    full = start.get("full")
    if full is not None and int(full) <= int(end["snapshot"]):
        splits.extend(plan_splits(table, table.snapshot_manager.snapshot(int(full))))
        first = int(full) + 1
    for snapshot_id in range(first, int(end["snapshot"]) + 1):
        splits.extend(delta_splits(table, snapshot_id))
    return splits


class PaimonStreamReader(DataSourceStreamReader):
    """Spark's stream reader over a table (see the module docstring for offsets and consumers)."""

    def __init__(self, options: StreamOptions, table: Table, read_schema: TableSchema, schema: StructType):
        if read_schema.primary_keys:
            raise SourceOptionError(
                f"{table.path}: streaming reads of primary-key tables are not supported yet (they need "
                "row kinds); read it in batches with spark.read.format('paimon')"
            )
        self._options = options
        self._table = table
        self._read_schema = read_schema
        self._schema = schema
        self._parallelism = options.parallelism or os.cpu_count() or 1

    def initialOffset(self) -> dict:  # noqa: N802 - Spark's name
        return initial_offset(self._table, self._options)

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:  # noqa: N802 - Spark's name
        """Spark asks from `start` only once everything up to `start` is in its commit log, so the
        consumer moves to `start`'s next snapshot here: Spark calls `commit` a batch late (when it
        plans the next one), and never for the last batch of a run. A start still to read a full
        snapshot is not recorded: the consumer would resume with that snapshot's delta only."""
        if start is not None and "full" not in start:
            self._record_consumer(int(start["snapshot"]) + 1)
        return latest_offset_of(self._table, start)

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """The micro-batch's tasks; first the consumer moves to the first snapshot they read (the
        first batch of a run that reads one batch would record nothing otherwise)."""
        self._record_consumer(int(start.get("full", int(start["snapshot"]) + 1)))
        splits = batch_splits(self._table, start, end)
        groups = read_task_groups(splits, self._parallelism)
        return [StreamTask(index, group) for index, group in enumerate(groups)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, StreamTask):
            return
        target = to_arrow_schema(self._schema, timezone="UTC")
        yield from read_splits_as(self._table, self._read_schema, None, partition.splits, target)

    def commit(self, end: dict) -> None:
        """Record the consumer's next snapshot (written after Spark's own commit log: see the module
        docstring for what a crash in between means)."""
        self._record_consumer(int(end["snapshot"]) + 1)

    def _record_consumer(self, next_snapshot: int) -> None:
        if self._options.consumer_id is not None:
            consumers(self._table).reset_consumer(self._options.consumer_id, next_snapshot)
