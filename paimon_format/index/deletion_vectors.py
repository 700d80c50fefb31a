"""Deletion vectors: which rows of a data file are deleted (Paimon `deletion-vectors.enabled`).

A snapshot's index manifest lists `DELETION_VECTORS` index files per partition and bucket. Each
entry names, for every data file that has deletes, where its vector sits in the index file
(`_DELETIONS_VECTORS_RANGES`: data file name, offset, length, cardinality). A reader skips those
row positions (`read.read_data_file(deleted_rows=...)`); compaction drops the vectors of the files
it rewrites.

File layout (facts from Paimon's `DeletionVectorsIndexFile`, `DeletionVector`,
`BitmapDeletionVector`, `Bitmap64DeletionVector`; pypaimon 2.1 reads and writes the same):

* byte 0: version 1; then the vectors back to back, each at its recorded offset;
* a vector = 4-byte big-endian length N (magic + bitmap), the 4-byte magic, the bitmap,
  4-byte big-endian CRC-32 of magic + bitmap;
* 32-bit vectors: magic 1581511376 big-endian, bitmap = RoaringBitmap portable format, and the
  recorded length is N;
* 64-bit vectors (`deletion-vectors.bitmap64`, Iceberg's layout): magic 1681511377
  little-endian, bitmap = 64-bit portable Roaring (little-endian), recorded length N + 8.

Index files live in `<table>/index/`, in the bucket directory with
`index-file-in-data-file-dir=true`, or at the entry's `_EXTERNAL_PATH`.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyroaring import BitMap, BitMap64

from paimon_format.errors import CorruptFileError
from paimon_format.manifest.entries import ADD, IndexManifestEntry
from paimon_format.scan.snapshot_scan import index_entries
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

DELETION_VECTORS_INDEX = "DELETION_VECTORS"
INDEX_FILE_VERSION = 1
BITMAP32_MAGIC = 1581511376
BITMAP64_MAGIC = 1681511377
_MAX_32 = 2**32


@dataclass(frozen=True)
class DeletionFile:
    """Where one data file's deletion vector is stored: small and picklable, for Spark tasks."""

    path: str
    offset: int
    length: int
    cardinality: int | None = None


def index_file_path(table: Table, entry: IndexManifestEntry) -> str:
    """Full path of an index file (external path, bucket directory, or `<table>/index/`)."""
    if entry.external_path:
        return entry.external_path
    in_data_dir = table.options.get("index-file-in-data-file-dir", "false").strip().lower() == "true"
    if in_data_dir:
        return table.file_io.join(
            table.path, table.bucket_relpath(entry.partition, entry.bucket), entry.file_name
        )
    return table.index_path(entry.file_name)


def write_new_index_file(
    table: Table,
    partition: bytes,
    bucket: int,
    index_type: str,
    data: bytes,
    row_count: int,
    deletion_vector_ranges: list[dict[str, Any]] | None = None,
    file_uuid: str | None = None,
) -> IndexManifestEntry:
    """Write `data` as a new index file of `index_type` (a random name, `index-<uuid>-0`, where
    readers look for it; `file_uuid`: the caller's uuid instead); return its ADD index entry.

    The name is new, so a crash leaves at most an orphan for orphan cleaning; the file takes effect
    only when a commit puts the entry into an index manifest.
    """
    entry = IndexManifestEntry(
        kind=ADD,
        partition=partition,
        bucket=bucket,
        index_type=index_type,
        file_name=f"index-{file_uuid or uuid.uuid4()}-0",
        file_size=len(data),
        row_count=row_count,
        deletion_vector_ranges=deletion_vector_ranges,
    )
    table.file_io.write_bytes(index_file_path(table, entry), data)
    return entry


def deletion_vector_entries(table: Table, snapshot: Snapshot) -> list[IndexManifestEntry]:
    """The `DELETION_VECTORS` entries of a snapshot's index manifest."""
    return [
        entry
        for entry in index_entries(table, snapshot)
        if entry.kind == ADD and entry.index_type == DELETION_VECTORS_INDEX
    ]


def deletion_files(
    table: Table, entries: Iterable[IndexManifestEntry]
) -> dict[tuple[bytes, int], dict[str, DeletionFile]]:
    """(partition, bucket) -> data file name -> its DeletionFile, for the given index entries."""
    result: dict[tuple[bytes, int], dict[str, DeletionFile]] = {}
    for entry in entries:
        path = index_file_path(table, entry)
        files = result.setdefault((entry.partition, entry.bucket), {})
        for item in entry.deletion_vector_ranges or ():
            files[item["f0"]] = DeletionFile(path, item["f1"], item["f2"], item.get("_CARDINALITY"))
    return result


def snapshot_deletion_files(
    table: Table, snapshot: Snapshot
) -> dict[tuple[bytes, int], dict[str, DeletionFile]]:
    """Every deletion file of a snapshot, by (partition, bucket) and data file name."""
    return deletion_files(table, deletion_vector_entries(table, snapshot))


def _decode_vector(record: bytes, path: str, offset: int) -> BitMap | BitMap64:
    where = f"deletion vector at offset {offset}"
    if len(record) < 12:
        raise CorruptFileError(path, f"{where}: truncated ({len(record)} bytes)")
    (length,) = struct.unpack_from(">i", record, 0)
    if length < 4 or len(record) < 8 + length:
        raise CorruptFileError(path, f"{where}: length {length} does not fit the file")
    body = record[4 : 4 + length]
    (expected_crc,) = struct.unpack_from(">I", record, 4 + length)
    if zlib.crc32(body) & 0xFFFFFFFF != expected_crc:
        raise CorruptFileError(path, f"{where}: checksum mismatch")
    try:
        if struct.unpack_from(">i", body, 0)[0] == BITMAP32_MAGIC:
            return BitMap.deserialize(body[4:])
        if struct.unpack_from("<i", body, 0)[0] == BITMAP64_MAGIC:
            bitmap = BitMap64.deserialize(body[4:])
            return BitMap(bitmap) if not bitmap or bitmap.max() < _MAX_32 else bitmap
    except (ValueError, OverflowError) as error:
        raise CorruptFileError(path, f"{where}: bad bitmap: {error}") from None
    raise CorruptFileError(path, f"{where}: unknown magic number {body[:4].hex()}")


def read_deletion_vectors(table: Table, files: Mapping[str, DeletionFile]) -> dict[str, BitMap]:
    """Data file name -> deleted row positions, reading each index file once.

    `MissingFileError` when an index file is gone, `CorruptFileError` for a bad version byte,
    length, magic number or checksum: a vector that cannot be read must fail the read, never
    resurrect deleted rows.
    """
    result: dict[str, BitMap] = {}
    by_path: dict[str, list[tuple[str, DeletionFile]]] = {}
    for name, deletion_file in files.items():
        by_path.setdefault(deletion_file.path, []).append((name, deletion_file))
    for path, items in by_path.items():
        with table.file_io.open_input(path) as handle:
            version = handle.read(1)
            if version != bytes([INDEX_FILE_VERSION]):
                raise CorruptFileError(path, f"deletion vector index version {version.hex() or 'missing'}")
            for name, deletion_file in sorted(items, key=lambda item: item[1].offset):
                handle.seek(deletion_file.offset)
                head = handle.read(4)
                if len(head) < 4:
                    raise CorruptFileError(
                        path, f"deletion vector at offset {deletion_file.offset}: truncated"
                    )
                (length,) = struct.unpack(">i", head)
                record = head + handle.read(max(length, 0) + 4)
                bitmap = _decode_vector(record, path, deletion_file.offset)
                if deletion_file.cardinality is not None and len(bitmap) != deletion_file.cardinality:
                    raise CorruptFileError(
                        path,
                        f"deletion vector of {name}: {len(bitmap)} positions, "
                        f"the index manifest says {deletion_file.cardinality}",
                    )
                result[name] = bitmap
    return result


def deletion_vectors(table: Table, snapshot: Snapshot, partition: bytes, bucket: int) -> dict[str, BitMap]:
    """Data file name -> deleted row positions, for one partition and bucket of a snapshot."""
    files = snapshot_deletion_files(table, snapshot).get((partition, bucket), {})
    return read_deletion_vectors(table, files)


# -- writing -----------------------------------------------------------------------------------


def encode_vector(bitmap: BitMap) -> bytes:
    """One 32-bit vector record (length, magic, portable bitmap, CRC), as Paimon writes it."""
    bitmap = BitMap(bitmap)
    bitmap.run_optimize()
    body = struct.pack(">i", BITMAP32_MAGIC) + bitmap.serialize()
    return struct.pack(">i", len(body)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def encode_index_file(vectors: Mapping[str, BitMap]) -> tuple[bytes, list[dict]]:
    """An index file holding `vectors` and its `_DELETIONS_VECTORS_RANGES` (sorted by data file)."""
    chunks = [bytes([INDEX_FILE_VERSION])]
    ranges = []
    position = 1
    for name in sorted(vectors):
        record = encode_vector(vectors[name])
        ranges.append({"f0": name, "f1": position, "f2": len(record) - 8, "_CARDINALITY": len(vectors[name])})
        chunks.append(record)
        position += len(record)
    return b"".join(chunks), ranges


def write_index_file(
    table: Table, partition: bytes, bucket: int, vectors: Mapping[str, BitMap]
) -> IndexManifestEntry:
    """Write a new deletion-vector index file where readers look for it; return its (ADD) index entry.

    The file is new (random name), so a crash leaves at most an orphan for orphan cleaning; the
    entry becomes visible only when a commit puts it into an index manifest.
    """
    data, ranges = encode_index_file(vectors)
    return write_new_index_file(
        table, partition, bucket, DELETION_VECTORS_INDEX, data, len(ranges), deletion_vector_ranges=ranges
    )


def drop_deletion_vectors(
    table: Table, entries: Iterable[IndexManifestEntry], data_files: Iterable[str]
) -> tuple[list[IndexManifestEntry], list[IndexManifestEntry]]:
    """The index changes when `data_files` leave the table (compaction rewrote them):
    (entries to remove, entries to add).

    An index file naming only such data files is removed; one that also names other files is
    replaced by a new index file holding the others' vectors (written here, before the commit
    that would reference it: a crash leaves an orphan, never a snapshot naming a missing file).
    Entries not naming any of `data_files` are untouched and not returned.
    """
    gone = set(data_files)
    removed: list[IndexManifestEntry] = []
    added: list[IndexManifestEntry] = []
    for entry in entries:
        if entry.index_type != DELETION_VECTORS_INDEX:
            continue
        ranges = entry.deletion_vector_ranges or []
        if not any(item["f0"] in gone for item in ranges):
            continue
        removed.append(entry)
        path = index_file_path(table, entry)
        kept = {
            item["f0"]: DeletionFile(path, item["f1"], item["f2"], item.get("_CARDINALITY"))
            for item in ranges
            if item["f0"] not in gone
        }
        if kept:
            added.append(
                write_index_file(table, entry.partition, entry.bucket, read_deletion_vectors(table, kept))
            )
    return removed, added
