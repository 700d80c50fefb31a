"""`spark.readStream.format("paimon")`: a table's commits as a stream of micro-batches.

Offsets are snapshot ids: `{"snapshot": s}` means every snapshot up to and including `s` was
delivered. A start may also carry `"full": f` (snapshot `f`, the one after `s`, is delivered as its
whole content instead of its delta): that is how `scan.mode` `latest-full` (the default) and
`from-snapshot-full` begin. A micro-batch (start, end] then reads, for each later snapshot, what it
added, as Paimon's streaming `DeltaFollowUpScanner` does for an append table: the files ADDed by
APPEND snapshots. COMPACT snapshots only rewrite rows already delivered and OVERWRITE snapshots
replace them, so both deliver nothing (Paimon's default; a primary-key table's stream delivers an
overwrite's changes with `streaming-read-overwrite` = true: stream_overwrite.py).
A primary-key table's changes are its delta or changelog files with their row kinds, as its
`changelog-producer` says (stream_pk.py); `read.changelog` = true adds the `rowkind` column.

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
from jobs.source.stream_overwrite import read_overwrite_option, reads_overwrite
from jobs.source.stream_pk import delta_splits, full_splits, read_changelog, read_changes, with_insert_kind
from paimon_format.consumers import ConsumerManager
from paimon_format.data.reader import prefetch_data_files
from paimon_format.model.schema import TableSchema
from paimon_format.scan.split_read import split_files
from paimon_format.scan.splits import Split
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
    read_changelog: bool = False
    read_overwrite: bool | None = None  # `streaming-read-overwrite`; None: the table's option


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
        read_changelog(options),
        read_overwrite_option(options),
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

    def __init__(self, index: int, splits: list[Split], changes: bool = False) -> None:
        super().__init__(index)
        self.splits = splits
        self.changes = changes  # changes of later snapshots (with row kinds), else a full snapshot


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


def batch_parts(
    table: Table,
    schema: TableSchema,
    start: Mapping[str, int],
    end: Mapping[str, int],
    read_overwrite: bool = False,
) -> tuple[list[Split], list[Split]]:
    """The micro-batch (start, end]: the splits of the full snapshot `start` asks for first (read
    merged, `stream_pk.full_splits`) and those of each later snapshot's changes (`delta_splits`;
    OVERWRITE snapshots' too when `read_overwrite`)."""
    merged: list[Split] = []
    first = int(start["snapshot"]) + 1
    full = start.get("full")
    if full is not None and int(full) <= int(end["snapshot"]):
        merged, first = full_splits(table, schema, int(full))
    changes = [
        split
        for sid in range(first, int(end["snapshot"]) + 1)
        for split in delta_splits(table, schema, sid, read_overwrite)
    ]
    return merged, changes


def batch_splits(table: Table, start: Mapping[str, int], end: Mapping[str, int]) -> list[Split]:
    """Every split the micro-batch (start, end] reads, in the table's latest schema."""
    full_splits, changes = batch_parts(table, table.schema, start, end)
    return full_splits + changes


class PaimonStreamReader(DataSourceStreamReader):
    """Spark's stream reader over a table (see the module docstring for offsets and consumers)."""

    def __init__(
        self, options: StreamOptions, table: Table, read_schema: TableSchema, schema: StructType
    ) -> None:
        self._options = options
        self._table = table
        self._read_schema = read_schema
        self._schema = schema
        self._parallelism = options.parallelism or os.cpu_count() or 1
        self._read_overwrite = reads_overwrite(table.path, read_schema, options.read_overwrite)

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
        full_splits, changes = batch_parts(self._table, self._read_schema, start, end, self._read_overwrite)
        merged = [(group, False) for group in read_task_groups(full_splits, self._parallelism)]
        delta = [(group, True) for group in read_task_groups(changes, self._parallelism)]
        return [StreamTask(index, group, kinds) for index, (group, kinds) in enumerate(merged + delta)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, StreamTask):
            return
        target = to_arrow_schema(self._schema, timezone="UTC")
        if partition.changes and self._read_schema.primary_keys:
            with prefetch_data_files(self._table, split_files(partition.splits)) as prefetch:
                yield from read_changes(self._table, self._read_schema, partition.splits, target, prefetch)
            return
        kinds = self._options.read_changelog  # an append table's rows, a full snapshot's: all +I
        plain = pa.schema(list(target)[1:]) if kinds else target
        for rows in read_splits_as(self._table, self._read_schema, None, partition.splits, plain):
            yield with_insert_kind(rows, target) if kinds else rows

    def commit(self, end: dict) -> None:
        """Record the consumer's next snapshot (written after Spark's own commit log: see the module
        docstring for what a crash in between means)."""
        self._record_consumer(int(end["snapshot"]) + 1)

    def _record_consumer(self, next_snapshot: int) -> None:
        if self._options.consumer_id is not None:
            consumers(self._table).reset_consumer(self._options.consumer_id, next_snapshot)
