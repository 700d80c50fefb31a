"""The changes of a primary-key table's snapshot, as Paimon's streaming readers deliver them.

Which files a snapshot's changes are depends on the table's `changelog-producer`, as in Paimon's
stream scan (its follow-up scanners):

- `none`: the files an APPEND snapshot added (its delta manifest list): the writer's level-0 files,
  each row with the kind it was written with (`_VALUE_KIND`), not merged with older rows. COMPACT
  and OVERWRITE snapshots deliver nothing.
- `input`, `lookup`, `full-compaction`: the snapshot's changelog files (its changelog manifest list),
  whatever committed it (lookup and full-compaction write theirs with a compaction); a snapshot
  without one, and an OVERWRITE snapshot, delivers nothing.
- with `streaming-read-overwrite` = true (producers none and input): an OVERWRITE snapshot delivers
  the rows it replaced as -D and its new rows (`stream_overwrite.py`).

Paimon reads a streaming split without merging and keeps retractions (`MergeFileSplitRead` for a
streaming split), so every row of these files is delivered with its kind. Row kinds reach Spark the
way Paimon's Spark connector hands them over: with the option `read.changelog` = true the rows carry
a leading `rowkind` column holding Paimon's short strings (+I, -U, +U, -D), as Paimon's audit-log
table; without it the kind is dropped (Paimon's Spark rows carry none), so a -D row looks like any
other row. The first batch of a `latest-full`/`from-snapshot-full` stream is the merged table, every row +I,
read as Paimon's stream scan reads its first snapshot (`full_start`): a table that needs lookup
(deletion vectors, `changelog-producer` lookup, first-row, `force-lookup`) without the level-0
files, whose rows its later changes carry; `full-compaction` its top level only. A deletion-vector
table that produces no lookup changelog then reads that snapshot's own changes too: its level-0
files are in neither the levels above nor any later snapshot's changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

import pyarrow as pa

from jobs.source.location import SourceOptionError
from jobs.source.stream_overwrite import OverwriteSplit, overwrite_rows, overwrite_splits
from paimon_format.commit import APPEND, OVERWRITE
from paimon_format.compaction.settings import CompactionSettingError, CompactionSettings
from paimon_format.data.prefetch import Prefetch
from paimon_format.data.reader import read_data_file
from paimon_format.errors import PaimonFormatError
from paimon_format.manifest.entries import ADD
from paimon_format.model.file_layout import VALUE_KIND
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.scan.snapshot_scan import read_entries, read_list
from paimon_format.scan.splits import Split, plan_splits
from paimon_format.table import Table

ROW_KIND_COLUMN = "rowkind"
"""The column `read.changelog` adds, named as in Paimon's audit-log table. Paimon 1.0 refuses a table
column of this name (a system field); a table from an older Paimon may have one, and then the stream
refuses `read.changelog` (`changelog_columns`) rather than hand Spark two columns of one name."""

_SHORT_KINDS = pa.array(["+I", "-U", "+U", "-D"], pa.string())  # by `_VALUE_KIND` code 0..3


def read_changelog(options: Mapping[str, str]) -> bool:
    """The option `read.changelog` (Paimon's Spark connector's name): whether rows carry `rowkind`."""
    lowered = {key.lower(): str(value).strip().lower() for key, value in options.items()}
    text = lowered.get("read.changelog", "false")
    if text not in ("true", "false"):
        raise SourceOptionError(f"option 'read.changelog' must be true or false, got {text!r}")
    return text == "true"


def changelog_columns(table: str, columns: Sequence[str]) -> None:
    """Refuse `read.changelog` on a table with a column Spark would take for `rowkind` (its names are
    case-insensitive by default): `SourceOptionError` naming the column and the option."""
    clash = [name for name in columns if name.lower() == ROW_KIND_COLUMN]
    if clash:
        raise SourceOptionError(
            f"{table}: option 'read.changelog' = true adds the column {ROW_KIND_COLUMN!r}, but the table "
            f"has a column {clash[0]!r} (Paimon 1.0 reserves the name for the row kind); read this "
            "stream without 'read.changelog' or rename the column"
        )


def full_start(schema: TableSchema) -> tuple[Callable[[int], bool] | None, bool]:
    """How a stream's full first batch reads a primary-key table's snapshot, as the first plan of
    Paimon's stream scan: (the levels it reads, None = all; whether the changes of that snapshot
    itself follow it). Lookup tables leave level 0 out (later changes carry those rows); a
    deletion-vector table without a lookup changelog then also reads the snapshot's own changes,
    so the rows of the level-0 files it added arrive; full-compaction reads its top level only."""
    options = CoreOptions(schema.options)
    try:
        settings = CompactionSettings.of(options, has_primary_key=True)
    except CompactionSettingError as error:
        raise SourceOptionError(f"the table cannot be streamed: {error}") from None
    if settings.needs_lookup:
        return (lambda level: level > 0), (
            settings.deletion_vectors and options.changelog_producer != "lookup"
        )
    if options.changelog_producer == "full-compaction":
        return (lambda level: level == settings.top_level), False
    return None, False


def full_splits(table: Table, schema: TableSchema, snapshot_id: int) -> tuple[list[Split], int]:
    """The splits of the full batch of snapshot `snapshot_id` (merged reads) and the first snapshot
    whose changes follow it (`full_start`)."""
    snapshot = table.snapshot_manager.snapshot(snapshot_id)
    if not schema.primary_keys:
        return plan_splits(table, snapshot), snapshot_id + 1
    levels, replays = full_start(schema)
    keep = None if levels is None else (lambda entry: levels(entry.file.level))
    splits = plan_splits(table, snapshot, all_levels=True, file_filter=keep)
    return splits, snapshot_id if replays else snapshot_id + 1


def delta_splits(
    table: Table, schema: TableSchema, snapshot_id: int, read_overwrite: bool = False
) -> list[Split]:
    """The files holding snapshot `snapshot_id`'s changes (see the module docstring), one split per
    partition and bucket. An append table's changes are the files its APPEND snapshots added; an
    OVERWRITE snapshot's are those of `stream_overwrite` when `read_overwrite`. A snapshot already
    expired is an error: the stream would silently lose its rows."""
    try:
        snapshot = table.snapshot_manager.snapshot(snapshot_id)
    except PaimonFormatError as error:
        raise SourceOptionError(
            f"{table.path}: the stream needs snapshot {snapshot_id}, which cannot be read ({error}); "
            "give the stream a 'consumer-id' so expire-snapshots keeps what it has still to read"
        ) from None
    if read_overwrite and snapshot.commit_kind == OVERWRITE:
        return overwrite_splits(table, schema, snapshot)
    producer = CoreOptions(schema.options).changelog_producer if schema.primary_keys else "none"
    if producer == "none":
        manifest_list = snapshot.delta_manifest_list if snapshot.commit_kind == APPEND else None
    else:
        manifest_list = snapshot.changelog_manifest_list if snapshot.commit_kind != OVERWRITE else None
    if not manifest_list:
        return []
    groups: dict[tuple[bytes, int], Split] = {}
    for entry in read_entries(table, read_list(table, manifest_list)):
        if entry.kind != ADD:
            continue
        key = (entry.partition, entry.bucket)
        if key not in groups:
            groups[key] = Split(entry.partition, entry.bucket, [], entry.total_buckets, {}, True, snapshot_id)
        groups[key].files.append(entry.file)
    return list(groups.values())


def read_changes(
    table: Table, schema: TableSchema, splits: Sequence[Split], target: pa.Schema, prefetch: Prefetch
) -> Iterator[pa.RecordBatch]:
    """The rows of a primary-key table's change splits, each with its kind, unmerged, in the Arrow
    types `target` (Spark's; with `rowkind` first when the stream asked for it)."""
    for split in splits:
        if isinstance(split, OverwriteSplit):
            for rows, kind in overwrite_rows(table, schema, split, prefetch):
                kinds = pa.array([kind] * rows.num_rows, pa.string())
                yield _in_target(rows, kinds, target)
            continue
        for meta in split.files:
            for rows in read_data_file(
                table,
                split.partition,
                split.bucket,
                meta,
                read_schema=schema,
                system_columns=True,
                prefetch=prefetch,
            ):
                yield _in_target(rows, _SHORT_KINDS.take(rows.column(VALUE_KIND)), target)


def _in_target(rows: pa.RecordBatch, kinds: pa.Array, target: pa.Schema) -> pa.RecordBatch:
    """`rows`' columns in the types and order of `target`, `rowkind` (if asked for) from `kinds`."""
    columns = [kinds if field.name == ROW_KIND_COLUMN else rows.column(field.name) for field in target]
    return pa.RecordBatch.from_arrays(
        [column.cast(field.type) for column, field in zip(columns, target, strict=True)], schema=target
    )


def with_insert_kind(rows: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """`rows` (the target's columns but `rowkind`) with `rowkind` = +I first: a merged read's rows."""
    kinds = pa.array(["+I"] * rows.num_rows, target.field(0).type)
    return pa.RecordBatch.from_arrays([kinds, *rows.columns], schema=target)
