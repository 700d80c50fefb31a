"""`$files`, `$manifests`, `$partitions` and `$buckets`: what one snapshot's manifests say.

`$files` of a large table has a row per live data file, millions of them, so it is produced as one
Arrow record batch per manifest and never held whole: the driver holds one manifest's entries and
the identifiers of the files some manifest deletes. A file is live when it is added and no later
entry deletes it (Paimon adds a file once and deletes it once), so a first pass reads only the
manifests whose manifest-list record counts deletions (`num_deleted_files`; after a manifest
compaction the base manifests have none) and remembers where each deleted file's last DELETE is; the
second pass streams every manifest and keeps the ADDs no later DELETE cancels. A DELETE found in a
manifest whose record said it had none, or one whose ADD never appears, is broken metadata and
raises `InvalidTableStateError`, as a full merge would, instead of showing a deleted file.

`$partitions` and `$buckets` sum the entries as Paimon does (an ADD counts +1 file, its rows and
bytes, a DELETE -1), keeping the partitions and buckets left with files; their `last_update_time` is
the newest `creation_time` among every entry read, deleted files included, as in Paimon.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from paimon_format.errors import InvalidTableStateError
from paimon_format.manifest.codec import decode_manifest
from paimon_format.manifest.entries import ADD, DELETE, DataFileMeta, ManifestEntry, ManifestFileMeta
from paimon_format.manifest.read_ahead import sized_bytes
from paimon_format.model.binary_row import UnsupportedTypeError, deserialize_row, row_arity
from paimon_format.model.schema import TableSchema
from paimon_format.model.types import DataField, DataType
from paimon_format.scan.snapshot_scan import changelog_manifests, data_manifests
from paimon_format.snapshot import Snapshot
from paimon_format.system_tables.columns import BUCKETS, FILES, MANIFESTS, PARTITIONS
from paimon_format.system_tables.java_text import (
    array_text,
    internal_text,
    partition_path_text,
    row_cast_text,
    tree_map_text,
)
from paimon_format.table import Table

_FILE_SOURCES = {0: "APPEND", 1: "COMPACT"}
_PARTITION_TEXT_CACHE_LIMIT = 100_000  # distinct partitions whose text a scan remembers
Position = tuple[int, int]  # (manifest index, entry index): the order Paimon applies entries in


def manifest_entries(table: Table, manifests: Sequence[ManifestFileMeta]) -> Iterator[list[ManifestEntry]]:
    """The entries of each manifest in order, one list per manifest; the next manifests' bytes are
    read while one is decoded (`sized_bytes`), a truncated manifest is refused by its size."""
    files = [(table.manifest_path(meta.file_name), meta.file_size) for meta in manifests]
    for (path, _size), data in zip(files, sized_bytes(table.file_io, files), strict=True):
        yield decode_manifest(data, path)


def _last_deletes(table: Table, manifests: Sequence[ManifestFileMeta]) -> dict[tuple, Position]:
    """Identifier -> position of its last DELETE, read from the manifests that count deletions."""
    with_deletes = [(i, meta) for i, meta in enumerate(manifests) if meta.num_deleted_files]
    last: dict[tuple, Position] = {}
    chosen = [meta for _, meta in with_deletes]
    for (index, _meta), entries in zip(with_deletes, manifest_entries(table, chosen), strict=True):
        for position, entry in enumerate(entries):
            if entry.kind == DELETE:
                last[entry.identifier()] = (index, position)
    return last


def live_entries_by_manifest(table: Table, snapshot: Snapshot) -> Iterator[list[ManifestEntry]]:
    """The live ADD entries of `snapshot`, one list per data manifest (empty lists skipped).

    Memory: one manifest's entries plus the identifiers of deleted files, never every live file.
    """
    manifests = data_manifests(table, snapshot)
    last_delete = _last_deletes(table, manifests)
    cancelled: set[tuple] = set()
    source = f"{table.path} snapshot {snapshot.id}"
    for index, entries in enumerate(manifest_entries(table, manifests)):
        live = []
        for position, entry in enumerate(entries):
            identifier = entry.identifier()
            if entry.kind == DELETE:
                if not manifests[index].num_deleted_files:
                    raise InvalidTableStateError(
                        f"{source}: manifest {manifests[index].file_name} deletes {entry.describe()} "
                        "but its manifest-list record counts no deleted files"
                    )
                continue
            deleted_at = last_delete.get(identifier)
            if deleted_at is not None and deleted_at > (index, position):
                cancelled.add(identifier)
            else:
                live.append(entry)
        if live:
            yield live
    dangling = [identifier for identifier in last_delete if identifier not in cancelled]
    if dangling:
        raise InvalidTableStateError(
            f"{source}: trying to delete file {dangling[0][3]} (bucket {dangling[0][1]}, level "
            f"{dangling[0][2]}) which is not previously added"
            + (f", and {len(dangling) - 1} more" if len(dangling) > 1 else "")
        )


# -- $files ----------------------------------------------------------------------------------------


@dataclass
class _FileRows:
    """Renders manifest entries as `$files` rows; remembers what every row of a scan shares."""

    table: Table
    partition_texts: dict[bytes, str | None] = field(default_factory=dict)
    stats_fields: dict[tuple[int, tuple[str, ...] | None], list[DataField]] = field(default_factory=dict)
    key_types: dict[int, list[DataType]] = field(default_factory=dict)  # by file schema id
    field_ids: dict[int, set[int]] = field(default_factory=dict)  # by file schema id

    def partition_text(self, partition: bytes) -> str:
        found = self.partition_texts.get(partition)
        if found is None:
            if len(self.partition_texts) >= _PARTITION_TEXT_CACHE_LIMIT:
                self.partition_texts.clear()
            types = self.table.partition_types
            found = self.partition_texts[partition] = row_cast_text(deserialize_row(partition, types), types)
        return found

    def key_text(self, key: bytes, file_schema: TableSchema) -> str | None:
        """`[v1, v2]` of the key's values; None for a file without keys (append tables)."""
        if not key or row_arity(key) == 0:
            return None
        types = self.key_types.get(file_schema.id)
        if types is None:
            names = file_schema.trimmed_primary_keys() or file_schema.field_names()
            types = self.key_types[file_schema.id] = [file_schema.field(name).type for name in names]
        return array_text(deserialize_row(key, types), types)

    def _fields_of_stats(self, file: DataFileMeta) -> list[DataField]:
        """The fields the file's value stats cover, in their order: the dense columns
        (`value_stats_cols`) or every field of the file's schema."""
        key = (file.schema_id, tuple(file.value_stats_cols) if file.value_stats_cols is not None else None)
        found = self.stats_fields.get(key)
        if found is None:
            file_schema = self.table.schema_by_id(file.schema_id)
            if file.value_stats_cols is None:
                found = list(file_schema.fields)
            else:
                found = [file_schema.field(name) for name in file.value_stats_cols]
            self.stats_fields[key] = found
        return found

    def stats_texts(self, file: DataFileMeta) -> tuple[str, str, str]:
        """(null counts, lower bounds, upper bounds) over the table's current fields, matched to the
        file's statistics by field id as Paimon's stats evolution does: a field the file's schema
        lacks is all null (its null count is the row count); one the dense stats leave out is null."""
        fields = self._fields_of_stats(file)
        stats = file.value_stats
        types = [f.type for f in fields]
        minimum = _stats_row(stats.min_values, types)
        maximum = _stats_row(stats.max_values, types)
        by_id = {f.id: i for i, f in enumerate(fields)}
        file_field_ids = self.field_ids.get(file.schema_id)
        if file_field_ids is None:
            file_field_ids = self.field_ids[file.schema_id] = {
                f.id for f in self.table.schema_by_id(file.schema_id).fields
            }
        nulls, lows, highs = [], [], []
        for table_field in self.table.schema.fields:
            index = by_id.get(table_field.id)
            if index is None:
                count = file.row_count if table_field.id not in file_field_ids else None
                low = high = None
            else:
                count = stats.null_counts[index] if index < len(stats.null_counts) else None
                low, high = minimum[index], maximum[index]
            nulls.append((table_field.name, "null" if count is None else str(count)))
            lows.append((table_field.name, internal_text(low, table_field.type)))
            highs.append((table_field.name, internal_text(high, table_field.type)))
        return tree_map_text(nulls), tree_map_text(lows), tree_map_text(highs)

    def batch(self, entries: Sequence[ManifestEntry]) -> pa.RecordBatch:
        values: dict[str, list[Any]] = {name: [] for name in FILES.names}
        for entry in entries:
            file = entry.file
            file_schema = self.table.schema_by_id(file.schema_id)
            null_counts, lows, highs = self.stats_texts(file)
            row = (
                self.partition_text(entry.partition),
                entry.bucket,
                self.table.data_file_path(entry),
                file.file_name.rsplit(".", 1)[-1] if "." in file.file_name else "",
                file.schema_id,
                file.level,
                file.row_count,
                file.file_size,
                self.key_text(file.min_key, file_schema),
                self.key_text(file.max_key, file_schema),
                null_counts,
                lows,
                highs,
                file.min_sequence_number,
                file.max_sequence_number,
                file.creation_time,
                file.delete_row_count,
                None if file.file_source is None else _FILE_SOURCES.get(file.file_source),
                file.first_row_id,
                file.write_cols,
            )
            for name, value in zip(FILES.names, row, strict=True):
                values[name].append(value)
        return pa.RecordBatch.from_pydict(values, schema=FILES)


def _stats_row(data: bytes, types: list[DataType]) -> list[Any]:
    """A stats row's values; all null when the file keeps no stats (an empty row) or the stats are
    of a type this reader cannot decode (nested columns keep no min/max)."""
    if not data or row_arity(data) != len(types):
        return [None] * len(types)
    try:
        return deserialize_row(data, types)
    except UnsupportedTypeError:
        return [None] * len(types)


def files_batches(table: Table, snapshot: Snapshot | None) -> Iterator[pa.RecordBatch]:
    """`$files` of `snapshot`, a record batch per data manifest with live files."""
    if snapshot is None:
        return
    rows = _FileRows(table)
    for entries in live_entries_by_manifest(table, snapshot):
        yield rows.batch(entries)


# -- $manifests --------------------------------------------------------------------------------------


def manifests_table(table: Table, snapshot: Snapshot | None) -> pa.Table:
    """Every manifest of `snapshot`: its data manifests (base, then delta) and changelog manifests."""
    if snapshot is None:
        return MANIFESTS.empty_table()
    metas = data_manifests(table, snapshot) + changelog_manifests(table, snapshot)
    types = table.partition_types
    values: dict[str, list[Any]] = {name: [] for name in MANIFESTS.names}
    for meta in metas:
        stats = meta.partition_stats
        row = (
            meta.file_name,
            meta.file_size,
            meta.num_added_files,
            meta.num_deleted_files,
            meta.schema_id,
            _partition_stats_text(stats.min_values, types),
            _partition_stats_text(stats.max_values, types),
            meta.min_row_id,
            meta.max_row_id,
        )
        for name, value in zip(MANIFESTS.names, row, strict=True):
            values[name].append(value)
    return pa.Table.from_pydict(values, schema=MANIFESTS)


def _partition_stats_text(data: bytes, types: list[DataType]) -> str | None:
    if data is None:
        return None
    if row_arity(data) != len(types):  # stats written without partition values (an empty row)
        return "{}" if not types else None
    return row_cast_text(deserialize_row(data, types), types)


# -- $partitions and $buckets --------------------------------------------------------------------


@dataclass
class _Totals:
    """Rows, bytes and files of a partition or bucket, and the newest creation time seen."""

    records: int = 0
    bytes: int = 0
    files: int = 0
    last_creation: dt.datetime | None = None

    def add(self, entry: ManifestEntry) -> None:
        sign = 1 if entry.kind == ADD else -1
        self.records += sign * entry.file.row_count
        self.bytes += sign * entry.file.file_size
        self.files += sign
        created = entry.file.creation_time
        if created is not None and (self.last_creation is None or created > self.last_creation):
            self.last_creation = created


def _totals(table: Table, snapshot: Snapshot, by_bucket: bool) -> dict[tuple[bytes, int], _Totals]:
    """Totals per (partition, bucket) or per (partition, 0), over every entry of every manifest."""
    totals: dict[tuple[bytes, int], _Totals] = {}
    for entries in manifest_entries(table, data_manifests(table, snapshot)):
        for entry in entries:
            key = (entry.partition, entry.bucket if by_bucket else 0)
            found = totals.get(key)
            if found is None:
                found = totals[key] = _Totals()
            found.add(entry)
    return {key: value for key, value in totals.items() if value.files > 0}


def partitions_table(table: Table, snapshot: Snapshot | None) -> pa.Table:
    """`$partitions`: a row per partition with files, sorted by its `k=v/...` text."""
    if snapshot is None:
        return PARTITIONS.empty_table()
    keys = list(table.schema.partition_keys)
    types = table.partition_types
    default_name = table.options.partition_default_name
    rows = []
    for (partition, _), totals in _totals(table, snapshot, by_bucket=False).items():
        text = partition_path_text(deserialize_row(partition, types), keys, types, default_name)
        rows.append((text, totals.records, totals.bytes, totals.files, totals.last_creation))
    rows.sort(key=lambda row: row[0])
    values: dict[str, list[Any]] = {name: [] for name in PARTITIONS.names}
    for row in rows:
        for name, value in zip(PARTITIONS.names, (*row, None, None, None, None), strict=True):
            values[name].append(value)
    return pa.Table.from_pydict(values, schema=PARTITIONS)


def buckets_table(table: Table, snapshot: Snapshot | None) -> pa.Table:
    """`$buckets`: a row per (partition, bucket) with files, sorted by partition text, then bucket."""
    if snapshot is None:
        return BUCKETS.empty_table()
    types = table.partition_types
    rows = []
    for (partition, bucket), totals in _totals(table, snapshot, by_bucket=True).items():
        text = row_cast_text(deserialize_row(partition, types), types)
        rows.append((text, bucket, totals.records, totals.bytes, totals.files, totals.last_creation))
    rows.sort(key=lambda row: (row[0], row[1]))
    values: dict[str, list[Any]] = {name: [] for name in BUCKETS.names}
    for row in rows:
        for name, value in zip(BUCKETS.names, row, strict=True):
            values[name].append(value)
    return pa.Table.from_pydict(values, schema=BUCKETS)
