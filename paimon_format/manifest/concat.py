"""Merging manifests by their Avro blocks: what a manifest merge costs when almost nothing changes.

Why: a manifest merge (compact-manifests, the commit's automatic merge) keeps nearly every entry
as it is; it only drops ADD/DELETE pairs that cancel. Decoding and encoding every entry made a
million-entry merge take half a minute in Python where Paimon's Java takes six seconds. Here a
manifest that no DELETE of the merge can touch is copied block by block (fastavro decompresses and
recompresses each block; no entry is decoded), and only the manifests that may hold a cancelled
ADD, or that hold DELETEs, are read entry by entry, their surviving entries' bytes cut out as they
are (`manifest_raw.iter_source_entries`).

The result equals the entry-level merge (`EntryMerger.merged()`, or `.live()` when `strict`):
the same entries in the same order, in files of about `target_size`:
- The DELETE identifiers of the merged manifests are read first (`read_deletes`, only manifests
  whose list record counts deletes). A manifest without DELETEs whose partition stats admit none of
  the deleted partitions holds no ADD any of them cancels: it is copied.
- Every other manifest streams through one `Canceller` in manifest order, which keeps the k-th
  ADD of a file only if fewer than k DELETEs of it exist, and drops the DELETE that cancels it.

Files: a new manifest takes whole input manifests until it reaches `target_size`, and only inputs
written with the same Avro schema (a table written by Paimon 1.0 and then by us has two; each new
file declares the schema of its entries). A new manifest's list record combines its inputs'
records (copied input: the record the manifest list already holds; filtered input: computed from
its survivors), so no entry is decoded for it either. Memory: the DELETE identifiers, one input
manifest and one output manifest, whatever the table's size, plus the inputs read ahead: the next
inputs (and the DELETE-holding manifests `read_deletes` reads) are read while one is decoded, as many
in flight as the storage's `io_parallelism` allows within a byte budget (`read_ahead`), because on an
object store every read waits a round trip.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import fastavro
import fastavro.write

from paimon_format.errors import InvalidTableStateError
from paimon_format.manifest._blocks import EncodedBlock, partition_order_key
from paimon_format.manifest.codec import SYNC_INTERVAL, codec_and_level, gc_paused
from paimon_format.manifest.entries import DELETE, ManifestFileMeta, SimpleStats
from paimon_format.manifest.files import raw_manifest_file_meta
from paimon_format.manifest.merge import Canceller, Deletes, may_contain_any
from paimon_format.manifest.raw import RawEntry, iter_raw_entries, iter_source_entries
from paimon_format.manifest.read_ahead import manifest_bytes, read_ahead_window, sized_bytes
from paimon_format.model.binary_row import EMPTY_ROW, deserialize_row, serialize_row
from paimon_format.model.types import DataType
from paimon_format.storage.fileio import FileIO

_ENTRIES_PER_BLOCK = 1000


def read_deletes(
    file_io: FileIO, path_of: Callable[[str], str], metas: Sequence[ManifestFileMeta]
) -> Deletes:
    """The DELETEs of `metas`, reading only the manifests whose list record counts any (several in
    flight, decoded here in order: `read_ahead`)."""
    deletes = Deletes()
    files = [(path_of(meta.file_name), meta.file_size) for meta in metas if meta.num_deleted_files > 0]
    for (path, _size), data in zip(files, sized_bytes(file_io, files), strict=True):
        with gc_paused():
            for entry in iter_raw_entries(data, path):
                if entry.kind == DELETE:
                    identifier = entry.identifier()
                    deletes.counts[identifier] = deletes.counts.get(identifier, 0) + 1
                    deletes.partitions.add(entry.partition)
    return deletes


@dataclass
class BlockMergeOps:
    """`manifest_merge.MergeOps` over a table's manifest directory, merging by blocks; `written`
    collects the names of every manifest it wrote (so a failed commit can remove them)."""

    file_io: FileIO
    manifest_dir: str
    name_factory: Callable[[], str]
    target_size: int
    compression: str
    partition_types: Sequence[DataType]
    schema_id: int
    written: list[str] = field(default_factory=list)

    def path_of(self, name: str) -> str:
        return self.file_io.join(self.manifest_dir, name)

    def read_deletes(self, metas: Sequence[ManifestFileMeta]) -> Deletes:
        return read_deletes(self.file_io, self.path_of, metas)

    def merge(self, metas: Sequence[ManifestFileMeta], deletes: Deletes) -> list[ManifestFileMeta]:
        new_metas = merge_by_blocks(
            self.file_io,
            self.path_of,
            metas,
            deletes,
            self.manifest_dir,
            self.name_factory,
            self.target_size,
            self.compression,
            self.partition_types,
            self.schema_id,
        )
        self.written.extend(meta.file_name for meta in new_metas)
        return new_metas


@dataclass
class _Part:
    """What one input contributes to a new manifest: its entries' list record, and their blocks."""

    meta: ManifestFileMeta  # copied: the input's record; filtered: computed from the survivors
    blocks: list[tuple[bytes, int]]  # (uncompressed datums, count) per block


def merge_by_blocks(
    file_io: FileIO,
    path_of: Callable[[str], str],
    metas: Sequence[ManifestFileMeta],
    deletes: Deletes,
    manifest_dir: str,
    name_factory: Callable[[], str],
    target_size: int,
    compression: str,
    partition_types: Sequence[DataType],
    schema_id: int,
    strict: bool = False,
    source: str = "manifest merge",
    prefetch: int | None = None,
    write: bool = True,
) -> list[ManifestFileMeta]:
    """Merge `metas` (in order) into new manifests; returns their list records, in order.

    `deletes` must be `read_deletes` of these same manifests. `strict`: a DELETE whose ADD is not
    among them is an error (a full compaction of a snapshot), otherwise it is kept (a partial merge).
    If anything fails, the manifests written so far are removed and nothing is returned.
    `write` False (a dry run): everything but the writes; the records returned name no file.
    `prefetch`: inputs in flight at once (default: `read_ahead_window` of their sizes).
    """
    if target_size <= 0:
        raise ValueError(f"manifest target size must be positive, got {target_size}")
    canceller = Canceller(deletes.counts, source)
    deleted_places = _deleted_places(deletes, partition_types)
    writer = _Writer(
        file_io, manifest_dir, name_factory, target_size, compression, partition_types, schema_id, write
    )
    try:
        files = [(path_of(meta.file_name), meta.file_size) for meta in metas]
        window = (
            read_ahead_window(file_io, (meta.file_size for meta in metas)) if prefetch is None else prefetch
        )
        for meta, (path, _size), data in zip(
            metas, files, manifest_bytes(file_io, files, window), strict=True
        ):
            copy = (
                meta.num_deleted_files == 0
                and _stats_readable(meta, partition_types)
                and not _may_hold_any(meta, deleted_places, partition_types)
            )
            with gc_paused():
                schema_text, part = (
                    _copied(data, path, meta) if copy else _filtered(data, path, canceller, partition_types)
                )
            if part is not None:
                writer.add(schema_text, part)
        if strict and canceller.dangling:
            first = canceller.dangling[0]
            more = len(canceller.dangling) - 1
            raise InvalidTableStateError(
                f"{source}: trying to delete {first.describe()} which is not previously added"
                + (f", and {more} more" if more else "")
            )
        writer.finish()
    except BaseException:
        writer.remove_written()
        raise
    return writer.metas


def _deleted_places(deletes: Deletes, partition_types: Sequence[DataType]) -> dict[bytes, tuple[list, set]]:
    """Per deleted partition: its decoded values and the (bucket, level) pairs of its DELETEs (a DELETE
    cancels only the ADD of the same partition, bucket, level and name)."""
    places: dict[bytes, tuple[list, set]] = {}
    for partition, bucket, level, *_rest in deletes.counts:
        if partition not in places:
            places[partition] = (deserialize_row(partition, partition_types), set())
        places[partition][1].add((bucket, level))
    return places


def _may_hold_any(
    meta: ManifestFileMeta, places: dict[bytes, tuple[list, set]], partition_types: Sequence[DataType]
) -> bool:
    """Whether a manifest may hold an ADD that a DELETE of the merge cancels: judged by its record's
    partition stats, bucket range and level range (an unknown range admits everything)."""

    def within(value: int, low: int | None, high: int | None) -> bool:
        return (low is None or low <= value) and (high is None or value <= high)

    for values, buckets_levels in places.values():
        if not may_contain_any(meta, [values], partition_types):
            continue
        if any(
            within(bucket, meta.min_bucket, meta.max_bucket) and within(level, meta.min_level, meta.max_level)
            for bucket, level in buckets_levels
        ):
            return True
    return False


def _copied(data: bytes, path: str, meta: ManifestFileMeta) -> tuple[str, _Part]:
    reader = fastavro.block_reader(io.BytesIO(data))
    blocks = [(block.bytes_.getvalue(), block.num_records) for block in reader]
    if sum(count for _data, count in blocks) != meta.num_added_files + meta.num_deleted_files:
        raise InvalidTableStateError(
            f"{path}: holds {sum(c for _d, c in blocks)} entries but its manifest list record counts "
            f"{meta.num_added_files + meta.num_deleted_files}"
        )
    return reader.metadata.get("avro.schema", ""), _Part(meta, blocks)


def _filtered(
    data: bytes, path: str, canceller: Canceller, partition_types: Sequence[DataType]
) -> tuple[str, _Part | None]:
    schema_text, entries = iter_source_entries(data, path)
    survivors: list[RawEntry] = [entry for entry in entries if canceller.keeps(entry)]
    if not survivors:
        return schema_text, None
    blocks = []
    for start in range(0, len(survivors), _ENTRIES_PER_BLOCK):
        chunk = survivors[start : start + _ENTRIES_PER_BLOCK]
        blocks.append((b"".join(e.datum for e in chunk), len(chunk)))
    return schema_text, _Part(raw_manifest_file_meta("", 0, survivors, 0, partition_types), blocks)


class _Writer:
    """New manifests filled with whole inputs of one schema, rolled at the target size."""

    def __init__(
        self,
        file_io: FileIO,
        manifest_dir: str,
        name_factory: Callable[[], str],
        target_size: int,
        compression: str,
        partition_types: Sequence[DataType],
        schema_id: int,
        write: bool = True,
    ) -> None:
        self._write = write
        self._file_io = file_io
        self._dir = manifest_dir
        self._names = name_factory
        self._target = target_size
        self._codec, self._level = codec_and_level(compression)
        self._partition_types = partition_types
        self._schema_id = schema_id
        self._schema_text: str | None = None
        self._buffer: io.BytesIO | None = None
        self._avro: Any = None
        self._parts: list[_Part] = []
        self.metas: list[ManifestFileMeta] = []
        self._written: list[str] = []

    def add(self, schema_text: str, part: _Part) -> None:
        if self._avro is not None and schema_text != self._schema_text:
            self.finish()
        if self._avro is None:
            self._schema_text = schema_text
            self._buffer = io.BytesIO()
            self._avro = fastavro.write.Writer(
                self._buffer,
                fastavro.parse_schema(json.loads(schema_text)),
                codec=self._codec,
                sync_interval=SYNC_INTERVAL,
                compression_level=self._level,
            )
        for data, count in part.blocks:
            self._avro.write_block(EncodedBlock(data, count))
        part.blocks = []  # written: only its list record is kept, for the new file's record
        self._parts.append(part)
        if self._buffer.tell() >= self._target:  # type: ignore[union-attr]
            self.finish()

    def finish(self) -> None:
        if self._avro is None:
            return
        self._avro.flush()
        data = self._buffer.getvalue()  # type: ignore[union-attr]
        name = self._names() if self._write else ""
        if self._write:
            path = self._file_io.join(self._dir, name)
            self._written.append(path)
            self._file_io.write_bytes(path, data)
        self.metas.append(_combined(name, len(data), self._parts, self._partition_types, self._schema_id))
        self._avro, self._buffer, self._parts = None, None, []

    def remove_written(self) -> None:
        for path in self._written:
            with contextlib.suppress(Exception):
                self._file_io.delete(path)


def _combined(
    name: str, size: int, parts: list[_Part], partition_types: Sequence[DataType], schema_id_if_empty: int
) -> ManifestFileMeta:
    """The list record of a manifest holding exactly these parts' entries, from their records."""
    metas = [part.meta for part in parts]
    added = sum(m.num_added_files for m in metas)
    deleted = sum(m.num_deleted_files for m in metas)

    def span(low: str, high: str) -> tuple[Any, Any]:
        lows, highs = [getattr(m, low) for m in metas], [getattr(m, high) for m in metas]
        if any(v is None for v in lows + highs):
            return None, None
        return min(lows), max(highs)

    min_bucket, max_bucket = span("min_bucket", "max_bucket")
    min_level, max_level = span("min_level", "max_level")
    min_row_id, max_row_id = span("min_row_id", "max_row_id")
    return ManifestFileMeta(
        file_name=name,
        file_size=size,
        num_added_files=added,
        num_deleted_files=deleted,
        partition_stats=_combined_stats(parts, partition_types),
        schema_id=max(m.schema_id for m in metas) if metas else schema_id_if_empty,
        min_bucket=min_bucket,
        max_bucket=max_bucket,
        min_level=min_level,
        max_level=max_level,
        min_row_id=min_row_id,
        max_row_id=max_row_id,
    )


def _combined_stats(parts: list[_Part], partition_types: Sequence[DataType]) -> SimpleStats:
    """Min, max and null counts per partition column over every part (Java's value order); a null
    count any part leaves unknown stays unknown."""
    if not partition_types:
        return SimpleStats(EMPTY_ROW, EMPTY_ROW, [])
    arity = len(partition_types)
    minimum: list[Any] = [None] * arity
    maximum: list[Any] = [None] * arity
    nulls: list[int | None] = [0] * arity
    for part in parts:
        low, high, counts = _decoded_stats(part.meta.partition_stats, partition_types)
        for i in range(arity):
            count, total = counts[i] if i < len(counts) else None, nulls[i]
            nulls[i] = None if count is None or total is None else total + count
            if low[i] is not None and (
                minimum[i] is None or partition_order_key(low[i]) < partition_order_key(minimum[i])
            ):
                minimum[i] = low[i]
            if high[i] is not None and (
                maximum[i] is None or partition_order_key(high[i]) > partition_order_key(maximum[i])
            ):
                maximum[i] = high[i]
    return SimpleStats(
        serialize_row(minimum, partition_types), serialize_row(maximum, partition_types), nulls
    )


def _decoded_stats(stats: SimpleStats, partition_types: Sequence[DataType]) -> tuple[list, list, list]:
    return (
        deserialize_row(stats.min_values, partition_types),
        deserialize_row(stats.max_values, partition_types),
        list(stats.null_counts or []),
    )


def _stats_readable(meta: ManifestFileMeta, partition_types: Sequence[DataType]) -> bool:
    """Whether a manifest's list record has partition stats to combine; otherwise its entries are
    read (a new manifest's stats must cover every entry: readers skip manifests by them)."""
    if not partition_types:
        return True
    try:
        low, high, _counts = _decoded_stats(meta.partition_stats, partition_types)
    except Exception:  # noqa: BLE001 - missing or foreign stats: read the entries instead
        return False
    return len(low) == len(high) == len(partition_types)
