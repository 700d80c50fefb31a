"""Writing manifest files: the manifest-list record of each (§4.3) and rolling writers.

Kept apart from the codec (`paimon_format.manifest.codec`, records <-> models) because this is what every
writer of manifests shares: the commit, manifest compaction, data-file compaction and partition
drops. Two kinds of input roll into files of `manifest.target-file-size`: model entries
(`ManifestEntry`, encoded here) and raw entries (`manifest_raw.RawEntry`, whose Avro bytes are
copied as they are: the fast path of bulk rewrites).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import fastavro.write

from paimon_format.manifest._blocks import EncodedBlock, partition_order_key
from paimon_format.manifest.codec import (
    PARSED_MANIFEST_ENTRY_SCHEMA,
    SYNC_INTERVAL,
    codec_and_level,
    entry_to_record,
)
from paimon_format.manifest.entries import ADD, ManifestEntry, ManifestFileMeta, SimpleStats
from paimon_format.manifest.raw import RawEntry
from paimon_format.model.binary_row import EMPTY_ROW, deserialize_row, serialize_row
from paimon_format.model.types import DataType
from paimon_format.storage.fileio import FileIO

# What the manifest-list record needs of one entry: kind, bucket, level, schema id, first row id, rows.
EntryFacts = tuple[int, int, int, int, "int | None", int]


def partition_stats(partitions: Iterable[bytes], partition_types: Sequence[DataType]) -> SimpleStats:
    """Min, max and null count per partition column over the given partition rows (one per entry)."""
    if not partition_types:
        return SimpleStats(EMPTY_ROW, EMPTY_ROW, [])
    counts: dict[bytes, int] = {}
    for partition in partitions:  # entries share few distinct partitions: decode each once
        counts[partition] = counts.get(partition, 0) + 1
    arity = len(partition_types)
    minimum: list[Any] = [None] * arity
    maximum: list[Any] = [None] * arity
    min_keys: list[Any] = [None] * arity
    max_keys: list[Any] = [None] * arity
    nulls = [0] * arity
    for partition, count in counts.items():
        for i, value in enumerate(deserialize_row(partition, partition_types)):
            if value is None:
                nulls[i] += count
                continue
            key = partition_order_key(value)
            if minimum[i] is None or key < min_keys[i]:
                minimum[i], min_keys[i] = value, key
            if maximum[i] is None or key > max_keys[i]:
                maximum[i], max_keys[i] = value, key
    return SimpleStats(
        serialize_row(minimum, partition_types),
        serialize_row(maximum, partition_types),
        nulls,  # type: ignore[arg-type]
    )


def manifest_file_meta(
    file_name: str,
    file_size: int,
    entries: Sequence[ManifestEntry],
    schema_id_if_empty: int,
    partition_types: Sequence[DataType],
) -> ManifestFileMeta:
    """The manifest-list record (§4.3) of a manifest holding exactly `entries`."""
    facts = [
        (e.kind, e.bucket, e.file.level, e.file.schema_id, e.file.first_row_id, e.file.row_count)
        for e in entries
    ]
    return _meta_of(
        file_name, file_size, [e.partition for e in entries], facts, schema_id_if_empty, partition_types
    )


def raw_manifest_file_meta(
    file_name: str,
    file_size: int,
    entries: Sequence[RawEntry],
    schema_id_if_empty: int,
    partition_types: Sequence[DataType],
) -> ManifestFileMeta:
    """The manifest-list record of a manifest holding exactly these raw entries."""
    facts = [(e.kind, e.bucket, e.level, e.schema_id, e.first_row_id, e.row_count) for e in entries]
    return _meta_of(
        file_name, file_size, [e.partition for e in entries], facts, schema_id_if_empty, partition_types
    )


def _meta_of(
    file_name: str,
    file_size: int,
    partitions: Sequence[bytes],
    facts: Sequence[EntryFacts],
    schema_id_if_empty: int,
    partition_types: Sequence[DataType],
) -> ManifestFileMeta:
    """Readers prune manifests with these ranges, so they cover every entry, ADD and DELETE alike.
    Row ids are set only when every entry's file has `_FIRST_ROW_ID` (row tracking), as Java does.
    """
    added = 0
    min_bucket = max_bucket = min_level = max_level = None
    schema_id: int | None = None
    min_row_id: int | None = None
    max_row_id: int | None = None
    all_row_ids = True
    for kind, bucket, level, file_schema_id, first, row_count in facts:
        if kind == ADD:
            added += 1
        if min_bucket is None:
            min_bucket = max_bucket = bucket
            min_level = max_level = level
            schema_id = file_schema_id
        else:
            min_bucket = min(min_bucket, bucket)
            max_bucket = max(max_bucket, bucket)  # type: ignore[type-var]
            min_level = min(min_level, level)  # type: ignore[type-var]
            max_level = max(max_level, level)  # type: ignore[type-var]
            schema_id = max(schema_id, file_schema_id)  # type: ignore[type-var]
        if all_row_ids:
            if first is None:
                all_row_ids = False
            else:
                last = first + row_count - 1
                min_row_id = first if min_row_id is None else min(min_row_id, first)
                max_row_id = last if max_row_id is None else max(max_row_id, last)
    if not facts or not all_row_ids:
        min_row_id = max_row_id = None
    return ManifestFileMeta(
        file_name=file_name,
        file_size=file_size,
        num_added_files=added,
        num_deleted_files=len(facts) - added,
        partition_stats=partition_stats(partitions, partition_types),
        schema_id=schema_id_if_empty if schema_id is None else schema_id,
        min_bucket=min_bucket,
        max_bucket=max_bucket,
        min_level=min_level,
        max_level=max_level,
        min_row_id=min_row_id,
        max_row_id=max_row_id,
    )


def rolling_write_manifests(
    file_io: FileIO,
    manifest_dir: str,
    name_factory: Callable[[], str],
    entries: Iterable[ManifestEntry],
    target_size: int,
    compression: str,
    partition_types: Sequence[DataType],
    schema_id: int,
) -> list[ManifestFileMeta]:
    """Write entries, in order, into manifests rolled once a file reaches `target_size` bytes.

    The size is measured on the Avro blocks already flushed (the writer flushes a block every
    sync interval, kept well below the target), so a file ends within one block above the target;
    each meta records the exact size of the bytes written. `entries` may be a stream: only one
    file's entries are held at a time. If a write fails (or the stream raises), the manifests
    written so far are deleted (best effort) so a failed commit leaves no orphans behind.
    """

    def fill(
        writer: fastavro.write.Writer, buffer: io.BytesIO, stream: Iterator[Any], _interval: int
    ) -> list:
        in_file = []
        for entry in stream:
            writer.write(entry_to_record(entry))
            in_file.append(entry)
            if buffer.tell() >= target_size:
                break
        return in_file

    def meta(name: str, size: int, in_file: list) -> ManifestFileMeta:
        return manifest_file_meta(name, size, in_file, schema_id, partition_types)

    return _roll(file_io, manifest_dir, name_factory, entries, target_size, compression, fill, meta)


def rolling_write_raw_manifests(
    file_io: FileIO,
    manifest_dir: str,
    name_factory: Callable[[], str],
    entries: Iterable[RawEntry],
    target_size: int,
    compression: str,
    partition_types: Sequence[DataType],
    schema_id: int,
) -> list[ManifestFileMeta]:
    """`rolling_write_manifests` for raw entries: their Avro bytes (already in this library's manifest
    schema, see `manifest_raw`) go into the new files' blocks as they are, nothing is re-encoded."""

    def fill(writer: fastavro.write.Writer, buffer: io.BytesIO, stream: Iterator[Any], interval: int) -> list:
        in_file: list[RawEntry] = []
        while buffer.tell() < target_size:
            first, size = len(in_file), 0
            for entry in stream:
                in_file.append(entry)
                size += len(entry.datum)
                if size >= interval:
                    break
            if len(in_file) == first:
                break  # the stream is exhausted
            block = in_file[first:]
            writer.write_block(EncodedBlock(b"".join(e.datum for e in block), len(block)))
        return in_file

    def meta(name: str, size: int, in_file: list) -> ManifestFileMeta:
        return raw_manifest_file_meta(name, size, in_file, schema_id, partition_types)

    return _roll(file_io, manifest_dir, name_factory, entries, target_size, compression, fill, meta)


def _roll(
    file_io: FileIO,
    manifest_dir: str,
    name_factory: Callable[[], str],
    entries: Iterable[Any],
    target_size: int,
    compression: str,
    fill: Callable[[fastavro.write.Writer, io.BytesIO, Iterator[Any], int], list],
    meta: Callable[[str, int, list], ManifestFileMeta],
) -> list[ManifestFileMeta]:
    """Open manifest after manifest, `fill` each from the stream until it reaches the target, write it."""
    if target_size <= 0:
        raise ValueError(f"manifest target size must be positive, got {target_size}")
    codec, level = codec_and_level(compression)
    sync_interval = max(4096, min(SYNC_INTERVAL, target_size // 8))
    metas: list[ManifestFileMeta] = []
    written: list[str] = []
    stream = iter(entries)
    try:
        while True:
            buffer = io.BytesIO()
            writer = fastavro.write.Writer(
                buffer,
                PARSED_MANIFEST_ENTRY_SCHEMA,
                codec=codec,
                sync_interval=sync_interval,
                compression_level=level,
            )
            in_file = fill(writer, buffer, stream, sync_interval)
            if not in_file:
                return metas
            writer.flush()
            data = buffer.getvalue()
            name = name_factory()
            path = file_io.join(manifest_dir, name)
            written.append(path)
            file_io.write_bytes(path, data)
            metas.append(meta(name, len(data), in_file))
    except BaseException:
        for path in written:
            with contextlib.suppress(Exception):
                file_io.delete(path)
        raise
