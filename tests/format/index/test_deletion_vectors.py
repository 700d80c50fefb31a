"""Deletion vectors: our index files read back, read by pypaimon (the official reader applies them),
the 64-bit layout, and errors for damaged index files."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pyarrow as pa
import pytest
from pyroaring import BitMap, BitMap64

from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.reader import read_data_file
from paimon_format.data.writer import write_table_files
from paimon_format.errors import CorruptFileError
from paimon_format.index.deletion_vectors import (
    BITMAP64_MAGIC,
    DeletionFile,
    deletion_vector_entries,
    deletion_vectors,
    drop_deletion_vectors,
    index_file_path,
    read_deletion_vectors,
    snapshot_deletion_files,
)
from paimon_format.model.file_layout import table_arrow_schema
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.table import Table
from tests.interop import oracle
from tests.support.dv_tables import delete_rows
from tests.support.factories import make_table


@pytest.fixture
def dv_table(tmp_path: Path) -> tuple[Table, bytes, list]:
    """An append table (deletion vectors on) with two data files of 5 rows in one partition."""
    table = make_table(
        str(tmp_path / "db.db" / "t"), options={"deletion-vectors.enabled": "true", "bucket": "-1"}
    )
    committer = SnapshotCommit(table)
    for start in (0, 5):
        rows = [{"id": n, "dt": "a", "v": f"v{n}"} for n in range(start, start + 5)]
        data = pa.Table.from_pylist(rows, schema=table_arrow_schema(table.schema))
        ((partition, bucket, files),) = write_table_files(
            table.file_io, table.path, table.schema, data, start
        )
        committer.append([CommitMessage(partition, bucket, -1, files)])
    entries = live_entries(table, table.snapshot_manager.latest())
    return table, partition, sorted((e.file for e in entries), key=lambda f: f.min_sequence_number)


def test_deletion_vectors_round_trip_and_pypaimon_applies_them(dv_table):
    table, partition, (first, second) = dv_table
    snapshot = delete_rows(
        table, partition, 0, {first.file_name: BitMap([0, 4]), second.file_name: BitMap([2])}
    )

    vectors = deletion_vectors(table, snapshot, partition, 0)

    assert vectors == {first.file_name: BitMap([0, 4]), second.file_name: BitMap([2])}
    ours = []
    for meta in (first, second):
        batches = read_data_file(table, partition, 0, meta, deleted_rows=vectors[meta.file_name])
        ours.extend(pa.Table.from_batches(list(batches)).to_pylist())
    assert sorted(r["id"] for r in ours) == [1, 2, 3, 5, 6, 8, 9]
    # The official reader finds and applies the same vectors: our files are in Paimon's format.
    assert oracle.read_rows(table.path) == oracle.sort_rows(ours)
    # Another partition/bucket has none; the older snapshot has none.
    assert deletion_vectors(table, snapshot, partition, 1) == {}
    assert snapshot_deletion_files(table, table.snapshot_manager.snapshot(2)) == {}


def _record64(bitmap: BitMap64) -> bytes:
    body = struct.pack("<i", BITMAP64_MAGIC) + bitmap.serialize()
    return struct.pack(">i", len(body)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def test_64_bit_vectors_are_read(tmp_path: Path):
    table = make_table(str(tmp_path / "t"))
    small, large = BitMap64([1, 7, 70000]), BitMap64([3, 2**33])
    first, second = _record64(small), _record64(large)
    path = tmp_path / "index-x-0"
    path.write_bytes(b"\x01" + first + second)
    files = {
        "a.parquet": DeletionFile(str(path), 1, len(first), 3),
        "b.parquet": DeletionFile(str(path), 1 + len(first), len(second), 2),
    }

    vectors = read_deletion_vectors(table, files)

    assert vectors["a.parquet"] == BitMap([1, 7, 70000])
    assert list(vectors["b.parquet"]) == [3, 2**33]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda data: b"\x02" + data[1:], "version"),
        (lambda data: data[:-3] + bytes([data[-3] ^ 0xFF]) + data[-2:], "checksum"),
        (lambda data: data[:20], "length|truncated"),
    ],
)
def test_damaged_index_files_are_corrupt(dv_table, damage, message: str):
    table, partition, (first, _second) = dv_table
    snapshot = delete_rows(table, partition, 0, {first.file_name: BitMap([0, 4])})
    ((_, files),) = snapshot_deletion_files(table, snapshot).items()
    path = Path(files[first.file_name].path)
    path.write_bytes(damage(path.read_bytes()))

    with pytest.raises(CorruptFileError, match=message) as error:
        deletion_vectors(table, snapshot, partition, 0)
    assert error.value.path == str(path)


def test_cardinality_mismatch_is_corrupt(dv_table):
    table, partition, (first, _second) = dv_table
    snapshot = delete_rows(table, partition, 0, {first.file_name: BitMap([0, 4])})
    ((_, files),) = snapshot_deletion_files(table, snapshot).items()
    wrong = {first.file_name: DeletionFile(files[first.file_name].path, files[first.file_name].offset, 0, 3)}

    with pytest.raises(CorruptFileError, match="2 positions"):
        read_deletion_vectors(table, wrong)


def test_dropping_vectors_of_rewritten_files_keeps_the_others(dv_table):
    table, partition, (first, second) = dv_table
    snapshot = delete_rows(
        table, partition, 0, {first.file_name: BitMap([0, 4]), second.file_name: BitMap([2])}
    )
    (entry,) = deletion_vector_entries(table, snapshot)

    assert drop_deletion_vectors(table, [entry], ["unrelated.parquet"]) == ([], [])
    removed, added = drop_deletion_vectors(table, [entry], [first.file_name])
    assert removed == [entry]
    (replacement,) = added
    assert [r["f0"] for r in replacement.deletion_vector_ranges] == [second.file_name]
    path = index_file_path(table, replacement)
    files = {second.file_name: DeletionFile(path, replacement.deletion_vector_ranges[0]["f1"], 0, 1)}
    assert read_deletion_vectors(table, files) == {second.file_name: BitMap([2])}
    assert drop_deletion_vectors(table, [entry], [first.file_name, second.file_name]) == ([entry], [])
