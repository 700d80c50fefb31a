"""The data-file writer: exact sizes, stats, primary-key dedupe/sort/sequence numbers, formats, rolling."""

from __future__ import annotations

import io

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from paimon_format.binary_row import deserialize_row
from paimon_format.fileio import FileIO
from paimon_format.schema import new_table_schema
from paimon_format.types import parse_type
from paimon_format.writer import DataWriteError, write_table_files

COLUMNS = [("id", parse_type("BIGINT")), ("dt", parse_type("STRING")), ("v", parse_type("STRING"))]


def written(tmp_path, data, partition_keys=("dt",), primary_keys=(), options=None):
    schema = new_table_schema(
        COLUMNS, partition_keys=partition_keys, primary_keys=primary_keys, options=options or {}
    )
    root = str(tmp_path / "db.db" / "t")
    return (
        root,
        schema,
        write_table_files(FileIO.for_path(root), root, schema, data, first_sequence_number=10),
    )


def test_append_files_have_exact_sizes_and_partition_dirs(tmp_path):
    data = pa.table({"id": [1, 2, 3], "dt": ["a", "b", "a"], "v": ["x", "y", None]})
    root, _schema, results = written(tmp_path, data)
    by_partition = {}
    for _partition, bucket, files in results:
        assert bucket == 0
        for f in files:
            path = next((tmp_path / "db.db" / "t").glob(f"dt=*/bucket-0/{f.file_name}"))
            assert path.stat().st_size == f.file_size
            by_partition[path.parent.parent.name] = pq.ParquetFile(path).read().column("id").to_pylist()
    assert by_partition == {"dt=a": [1, 3], "dt=b": [2]}


def test_value_stats_truncate_long_strings_and_count_nulls(tmp_path):
    long = "k" * 20
    data = pa.table({"id": [5, 7], "dt": ["a", "a"], "v": [long, None]})
    _root, schema, results = written(tmp_path, data)
    meta = results[0][2][0]
    types = [f.type for f in schema.fields]
    low = deserialize_row(meta.value_stats.min_values, types)
    high = deserialize_row(meta.value_stats.max_values, types)
    assert low == [5, "a", "k" * 16] and high == [7, "a", "k" * 15 + "l"]
    assert meta.value_stats.null_counts == [0, 0, 1]
    assert (meta.min_sequence_number, meta.max_sequence_number) == (10, 11)


def test_primary_key_rows_are_deduplicated_sorted_and_keyed(tmp_path):
    data = pa.table({"id": [3, 1, 3, 2], "dt": ["a"] * 4, "v": ["old", "one", "new", "two"]})
    root, schema, results = written(tmp_path, data, primary_keys=("id", "dt"), options={"bucket": "1"})
    ((_partition, bucket, files),) = results
    meta = files[0]
    rows = pq.ParquetFile(next((tmp_path / "db.db" / "t").glob(f"dt=a/bucket-0/{meta.file_name}"))).read()
    assert rows.column_names == ["_KEY_id", "_SEQUENCE_NUMBER", "_VALUE_KIND", "id", "dt", "v"]
    assert rows.column("id").to_pylist() == [1, 2, 3]
    assert rows.column("v").to_pylist() == ["one", "two", "new"]
    assert rows.column("_SEQUENCE_NUMBER").to_pylist() == [11, 13, 12]
    key_type = [schema.field("id").type]
    assert deserialize_row(meta.min_key, key_type) == [1] and deserialize_row(meta.max_key, key_type) == [3]
    assert (meta.row_count, meta.delete_row_count) == (3, 0)
    field_ids = [
        rows.schema.field(n).metadata[b"PARQUET:field_id"] for n in ("_KEY_id", "_SEQUENCE_NUMBER", "v")
    ]
    assert field_ids == [b"1073741823", b"2147483646", b"2"]


def test_orc_and_avro_files_are_readable(tmp_path):
    data = pa.table({"id": [1, 2], "dt": ["a", "a"], "v": ["x", "y"]})
    for file_format in ("orc", "avro"):
        _root, _schema, results = written(tmp_path / file_format, data, options={"file.format": file_format})
        meta = results[0][2][0]
        assert meta.file_name.endswith(f".{file_format}")
        payload = next((tmp_path / file_format).rglob(meta.file_name)).read_bytes()
        assert len(payload) == meta.file_size
        if file_format == "orc":
            assert orc.read_table(io.BytesIO(payload)).column("id").to_pylist() == [1, 2]
        else:
            assert [r["id"] for r in fastavro.reader(io.BytesIO(payload))] == [1, 2]


def test_tiny_target_file_size_rolls_files(tmp_path):
    data = pa.table({"id": list(range(1000)), "dt": ["a"] * 1000, "v": ["x" * 10] * 1000})
    _root, _schema, results = written(tmp_path, data, options={"target-file-size": "4 kb"})
    files = results[0][2]
    assert len(files) > 3
    assert sum(f.row_count for f in files) == 1000
    assert [f.min_sequence_number for f in files] == sorted(f.min_sequence_number for f in files)


def test_a_column_that_cannot_be_cast_is_named(tmp_path):
    data = pa.table({"id": ["not a number"], "dt": ["a"], "v": ["x"]})
    with pytest.raises(DataWriteError, match="column id"):
        written(tmp_path, data)
