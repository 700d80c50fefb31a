"""The data-file writer: exact sizes, stats, primary-key dedupe/sort/sequence numbers, formats, rolling.

Files are written to tmp_path and read back with pyarrow / fastavro; the end-to-end tests commit
them with SnapshotCommit and read the table with pypaimon (the official reader) as the oracle.
"""

from __future__ import annotations

import datetime as dt
import io
from decimal import Decimal
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.bucket import bucket_of
from paimon_format.data.bucket_slices import split_by_partition_and_bucket
from paimon_format.data.conform import fit_string_lengths
from paimon_format.data.stats import truncate_max, truncate_min
from paimon_format.data.writer import write_bucket_files, write_bucket_outputs, write_table_files
from paimon_format.errors import DataWriteError, UnsupportedOperationError
from paimon_format.manifest.entries import DataFileMeta
from paimon_format.model.binary_row import EMPTY_ROW, deserialize_row
from paimon_format.model.file_layout import table_arrow_schema
from paimon_format.model.schema import TableSchema, new_table_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.storage.fileio import FileIO

COLUMNS = [("id", "BIGINT"), ("dt", "STRING"), ("v", "STRING")]


def make_schema(columns=COLUMNS, partition_keys=("dt",), primary_keys=(), options=None) -> TableSchema:
    return new_table_schema(
        [(name, parse_type(type_json)) for name, type_json in columns],
        partition_keys=partition_keys,
        primary_keys=primary_keys,
        options=options or {},
    )


def write(tmp_path: Path, data: pa.Table, first_sequence_number: int = 10, **schema_args):
    """(table root, schema, [(partition bytes, bucket, files)]) after writing `data`."""
    schema = make_schema(**schema_args)
    root = str(tmp_path / "db.db" / "t")
    results = write_table_files(FileIO.for_path(root), root, schema, data, first_sequence_number)
    return root, schema, results


def file_path(root: str, meta: DataFileMeta) -> Path:
    (path,) = Path(root).rglob(meta.file_name)
    return path


def read_parquet(path: Path) -> pa.Table:
    """One file's rows (pq.read_table would add hive partition columns from the path)."""
    return pq.ParquetFile(path).read()


def all_files(results) -> list[DataFileMeta]:
    return [meta for _partition, _bucket, files in results for meta in files]


def stats_rows(meta: DataFileMeta, schema: TableSchema) -> tuple[list, list]:
    types = [f.type for f in schema.fields]
    return (
        deserialize_row(meta.value_stats.min_values, types),
        deserialize_row(meta.value_stats.max_values, types),
    )


# -- append tables ------------------------------------------------------------------------------------


def test_append_files_land_in_partition_dirs_with_exact_sizes(tmp_path):
    data = pa.table({"id": [1, 2, 3, 4], "dt": ["a", "b", "a", None], "v": ["x", "y", None, "z"]})
    root, _schema, results = write(tmp_path, data)
    by_dir = {}
    for _partition, bucket, files in results:
        assert bucket == 0
        for meta in files:
            path = file_path(root, meta)
            assert path.stat().st_size == meta.file_size
            assert path.name.startswith("data-") and path.name.endswith(".parquet")
            rows = read_parquet(path).column("id").to_pylist()
            by_dir[str(path.parent.relative_to(root))] = rows
            assert meta.row_count == len(rows)
            assert (meta.level, meta.delete_row_count, meta.file_source) == (0, 0, 0)
            assert meta.min_key == meta.max_key == EMPTY_ROW
            assert meta.key_stats.null_counts == [] and meta.value_stats_cols is None
            assert meta.max_sequence_number - meta.min_sequence_number == meta.row_count - 1
            assert meta.creation_time is not None and meta.creation_time.tzinfo is None
    assert by_dir == {"dt=a/bucket-0": [1, 3], "dt=b/bucket-0": [2], "dt=__DEFAULT_PARTITION__/bucket-0": [4]}


def test_append_file_columns_are_exactly_the_table_columns_with_field_ids(tmp_path):
    data = pa.table({"v": ["x"], "id": [1], "dt": ["a"], "extra": [1.5]})  # order and extras do not matter
    root, schema, results = write(tmp_path, data)
    file_schema = pq.read_schema(file_path(root, all_files(results)[0]))
    assert file_schema.names == ["id", "dt", "v"]
    assert [file_schema.field(f.name).metadata[b"PARQUET:field_id"] for f in schema.fields] == [
        str(f.id).encode() for f in schema.fields
    ]


def test_sequence_numbers_continue_across_rolled_files(tmp_path):
    rows = 3000
    data = pa.table(
        {"id": list(range(rows)), "dt": ["a"] * rows, "v": [f"value-{i:06d}" for i in range(rows)]}
    )
    root, _schema, results = write(
        tmp_path, data, first_sequence_number=100, options={"target-file-size": "2 kb"}
    )
    files = all_files(results)
    assert len(files) > 3
    assert sum(f.row_count for f in files) == rows
    assert files[0].min_sequence_number == 100
    for before, after in zip(files, files[1:], strict=False):
        assert after.min_sequence_number == before.max_sequence_number + 1
    assert files[-1].max_sequence_number == 100 + rows - 1
    assert len({f.file_name for f in files}) == len(files)
    read = []
    for meta in files:
        path = file_path(root, meta)
        assert path.stat().st_size == meta.file_size
        read += read_parquet(path).column("id").to_pylist()
    assert read == list(range(rows))


def test_value_stats_truncate_long_strings_and_count_nulls(tmp_path):
    long = "k" * 20
    data = pa.table({"id": [5, 7, None], "dt": ["a", "a", "a"], "v": [long, None, "b"]})
    _root, schema, results = write(tmp_path, data)
    meta = all_files(results)[0]
    low, high = stats_rows(meta, schema)
    assert low == [5, "a", "b"] and high == [7, "a", "k" * 15 + "l"]
    assert meta.value_stats.null_counts == [1, 0, 1]
    assert (meta.min_sequence_number, meta.max_sequence_number) == (10, 12)


def test_truncated_max_is_rounded_up_or_dropped():
    assert truncate_min("abcdef", 3) == "abc"
    assert truncate_max("abc", 3) == "abc"
    assert truncate_max("abcdef", 3) == "abd"
    assert truncate_max("ab\U0010ffffzz", 3) == "ac"
    assert truncate_max("\U0010ffff" * 4, 3) is None
    assert truncate_max("a\ud7ffzz", 2) == "a\ue000"  # the next encodable code point


def test_min_max_is_dropped_when_the_max_cannot_be_rounded_up(tmp_path):
    top = "\U0010ffff" * 17
    data = pa.table({"id": [1, 2], "dt": ["a", "a"], "v": [top, "b"]})
    _root, schema, results = write(tmp_path, data)
    low, high = stats_rows(all_files(results)[0], schema)
    assert low[2] is None and high[2] is None
    assert low[0] == 1 and high[0] == 2


def test_stats_by_type(tmp_path):
    columns = [
        ("i", "INT"),
        ("b", "BOOLEAN"),
        ("d", "DOUBLE"),
        ("nan", "DOUBLE"),
        ("dec", "DECIMAL(10, 2)"),
        ("big", "DECIMAL(30, 4)"),
        ("day", "DATE"),
        ("ts3", "TIMESTAMP(3)"),
        ("ts6", "TIMESTAMP(6)"),
        ("ts9", "TIMESTAMP(9)"),
        ("ltz", "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
        ("raw", "BYTES"),
        ("arr", {"type": "ARRAY", "element": "INT"}),
        ("s", "STRING"),
    ]
    t0 = dt.datetime(2024, 1, 1, 10, 0, 0, 123456)
    data = pa.table(
        {
            "i": pa.array([3, -1], pa.int32()),
            "b": [True, False],
            "d": [1.5, -2.5],
            "nan": [1.0, float("nan")],
            "dec": pa.array([Decimal("1.25"), Decimal("-3.50")], pa.decimal128(10, 2)),
            "big": pa.array([Decimal("12345678901234567890.1234"), None], pa.decimal128(30, 4)),
            "day": [dt.date(2024, 1, 2), dt.date(2023, 5, 6)],
            "ts3": pa.array([t0, t0 + dt.timedelta(days=1)], pa.timestamp("us")),  # truncated to millis
            "ts6": pa.array([t0, None], pa.timestamp("us")),
            "ts9": pa.array([t0, t0], pa.timestamp("ns")),
            "ltz": pa.array([t0, t0], pa.timestamp("us", tz="UTC")),
            "raw": [b"\x01", b"\x02"],
            "arr": [[1], None],
            "s": ["", "z"],
        }
    )
    root, schema, results = write(tmp_path, data, columns=columns, partition_keys=())
    meta = all_files(results)[0]
    low, high = stats_rows(meta, schema)
    names = [f.name for f in schema.fields]
    low, high = dict(zip(names, low, strict=True)), dict(zip(names, high, strict=True))
    assert (low["i"], high["i"]) == (-1, 3)
    assert (low["b"], high["b"]) == (False, True)
    assert (low["d"], high["d"]) == (-2.5, 1.5)
    assert low["nan"] is None and high["nan"] is None
    assert (low["dec"], high["dec"]) == (Decimal("-3.50"), Decimal("1.25"))
    assert low["big"] == high["big"] == Decimal("12345678901234567890.1234")
    assert (low["day"], high["day"]) == (dt.date(2023, 5, 6), dt.date(2024, 1, 2))
    assert low["ts3"] == dt.datetime(2024, 1, 1, 10, 0, 0, 123000)
    assert low["ts6"] == high["ts6"] == t0
    assert low["ts9"] is None and high["ts9"] is None  # Java records no bounds above micros
    assert low["ltz"] == t0
    assert low["raw"] is None and low["arr"] is None  # no bounds for binary and nested columns
    assert (low["s"], high["s"]) == ("", "z")
    assert meta.value_stats.null_counts == [0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0]
    physical = {
        column.name: (column.physical_type, str(column.logical_type))
        for column in pq.ParquetFile(file_path(root, meta)).schema
    }
    assert physical["ts9"][0] == "INT96"  # Java's layout for precision > 6
    assert physical["dec"][0] == "INT64"  # precision 10 and physical["big"][0] == "FIXED_LEN_BYTE_ARRAY"
    assert read_parquet(file_path(root, meta)).column("ts3").to_pylist()[0] == dt.datetime(
        2024, 1, 1, 10, 0, 0, 123000
    )


def test_microsecond_and_millisecond_timestamps_keep_int64_units(tmp_path):
    columns = [("ts3", "TIMESTAMP(3)"), ("ts6", "TIMESTAMP(6)"), ("t", "TIME"), ("ltz", "TIMESTAMP_LTZ(3)")]
    t0 = dt.datetime(2024, 1, 1, 10, 0, 0, 123456)
    data = pa.table(
        {
            "ts3": pa.array([t0], pa.timestamp("us")),
            "ts6": pa.array([t0], pa.timestamp("us")),
            "t": pa.array([dt.time(1, 2, 3, 4000)], pa.time64("us")),
            "ltz": pa.array([t0], pa.timestamp("us", tz="UTC")),
        }
    )
    root, _schema, results = write(tmp_path, data, columns=columns, partition_keys=())
    parquet_schema = pq.ParquetFile(file_path(root, all_files(results)[0])).schema
    described = {c.name: (c.physical_type, str(c.logical_type)) for c in parquet_schema}
    assert described["ts3"][0] == "INT64" and "milliseconds" in described["ts3"][1]
    assert "isAdjustedToUTC=false" in described["ts3"][1]
    assert described["ts6"][0] == "INT64" and "microseconds" in described["ts6"][1]
    assert described["t"][0] == "INT32" and "milliseconds" in described["t"][1]
    assert "isAdjustedToUTC=true" in described["ltz"][1]


def test_stats_modes_none_counts_full_and_per_field(tmp_path):
    long = "x" * 30
    data = pa.table({"id": [1, 2], "dt": ["a", "a"], "v": [long, "b"]})
    _root, schema, results = write(
        tmp_path / "full", data, options={"metadata.stats-mode": "full", "fields.id.stats-mode": "counts"}
    )
    meta = all_files(results)[0]
    low, high = stats_rows(meta, schema)
    assert low == [None, "a", "b"] and high == [None, "a", long]
    assert meta.value_stats.null_counts == [0, 0, 0]

    _root, schema, results = write(tmp_path / "none", data, options={"fields.v.stats-mode": "none"})
    meta = all_files(results)[0]
    assert meta.value_stats_cols == ["id", "dt"]  # dense store leaves the column out
    types = [schema.field("id").type, schema.field("dt").type]
    assert deserialize_row(meta.value_stats.min_values, types) == [1, "a"]
    assert meta.value_stats.null_counts == [0, 0]

    _root, schema, results = write(tmp_path / "all-none", data, options={"metadata.stats-mode": "none"})
    meta = all_files(results)[0]
    assert meta.value_stats_cols == [] and meta.value_stats.null_counts == []


# -- primary-key tables -------------------------------------------------------------------------------


def pk_options(**extra) -> dict[str, str]:
    return {"bucket": "1", **extra}


def test_primary_key_rows_are_deduplicated_sorted_and_keyed(tmp_path):
    data = pa.table({"id": [3, 1, 3, 2], "dt": ["a"] * 4, "v": ["old", "one", "new", "two"]})
    root, schema, results = write(tmp_path, data, primary_keys=("id", "dt"), options=pk_options())
    ((_partition, bucket, (meta,)),) = results
    path = file_path(root, meta)
    assert path.parent.name == f"bucket-{bucket}" and path.parent.parent.name == "dt=a"
    rows = read_parquet(path)
    assert rows.column_names == ["_KEY_id", "_SEQUENCE_NUMBER", "_VALUE_KIND", "id", "dt", "v"]
    assert rows.column("_KEY_id").to_pylist() == rows.column("id").to_pylist() == [1, 2, 3]
    assert rows.column("v").to_pylist() == ["one", "two", "new"]
    assert rows.column("_SEQUENCE_NUMBER").to_pylist() == [11, 13, 12]
    assert rows.column("_VALUE_KIND").to_pylist() == [0, 0, 0]
    assert (meta.min_sequence_number, meta.max_sequence_number) == (11, 13)
    key_type = [schema.field("id").type]
    assert deserialize_row(meta.min_key, key_type) == [1] and deserialize_row(meta.max_key, key_type) == [3]
    assert deserialize_row(meta.key_stats.min_values, key_type) == [1]
    assert deserialize_row(meta.key_stats.max_values, key_type) == [3]
    assert meta.key_stats.null_counts == [0]
    assert (meta.row_count, meta.delete_row_count, meta.level) == (3, 0, 0)
    file_schema = rows.schema
    assert not file_schema.field("_KEY_id").nullable and not file_schema.field("_SEQUENCE_NUMBER").nullable
    field_ids = [file_schema.field(n).metadata[b"PARQUET:field_id"] for n in file_schema.names]
    id_field = schema.field("id").id
    assert field_ids[:3] == [str(id_field + 1073741823).encode(), b"2147483646", b"2147483645"]
    assert field_ids[3:] == [str(f.id).encode() for f in schema.fields]
    assert pq.ParquetFile(path).schema.column(1).physical_type == "INT64"
    assert str(pq.ParquetFile(path).schema.column(2).logical_type) == "Int(bitWidth=8, isSigned=true)"


def test_string_keys_sort_by_utf8_bytes_and_long_keys_are_not_truncated(tmp_path):
    keys = ["b", "a", "é", "Z", "\U0001f600", "\uffff", "a" * 40]
    columns = [("k", "STRING"), ("v", "INT")]
    data = pa.table({"k": keys, "v": list(range(len(keys)))})
    root, schema, results = write(
        tmp_path, data, columns=columns, partition_keys=(), primary_keys=("k",), options=pk_options()
    )
    meta = all_files(results)[0]
    stored = read_parquet(file_path(root, meta)).column("_KEY_k").to_pylist()
    assert stored == sorted(keys, key=lambda s: s.encode("utf-8"))
    key_type = [schema.field("k").type]
    assert deserialize_row(meta.max_key, key_type) == ["\U0001f600"]
    assert deserialize_row(meta.key_stats.min_values, key_type) == ["Z"]
    value_low, value_high = stats_rows(meta, schema)
    assert value_high[0] == "\U0001f600" and value_low[0] == "Z"


def test_sequence_field_picks_the_winner_and_ties_go_to_the_last_write(tmp_path):
    columns = [("id", "INT"), ("ver", "INT"), ("v", "STRING")]
    data = pa.table({"id": [1, 1, 1, 2, 2], "ver": [5, 9, 2, 1, 1], "v": ["a", "b", "c", "x", "y"]})
    root, _schema, results = write(
        tmp_path,
        data,
        columns=columns,
        partition_keys=(),
        primary_keys=("id",),
        first_sequence_number=0,
        options=pk_options(**{"sequence.field": "ver"}),
    )
    rows = read_parquet(file_path(root, all_files(results)[0]))
    assert rows.column("v").to_pylist() == ["b", "y"]
    assert rows.column("_SEQUENCE_NUMBER").to_pylist() == [1, 4]


def test_row_kind_column_writes_deletes(tmp_path):
    data = pa.table(
        {
            "id": [1, 2, 3, 2],
            "dt": ["a"] * 4,
            "v": ["x", "y", "z", None],
            "__row_kind": ["+I", "+I", "+I", "-D"],
        }
    )
    root, _schema, results = write(tmp_path, data, primary_keys=("id", "dt"), options=pk_options())
    meta = all_files(results)[0]
    rows = read_parquet(file_path(root, meta))
    assert rows.column("_VALUE_KIND").to_pylist() == [0, 3, 0]
    assert meta.delete_row_count == 1 and meta.row_count == 3
    assert "__row_kind" not in rows.column_names


def test_append_tables_refuse_retractions(tmp_path):
    data = pa.table({"id": [1], "dt": ["a"], "v": ["x"], "_VALUE_KIND": pa.array([3], pa.int8())})
    with pytest.raises(DataWriteError, match="append table"):
        write(tmp_path, data)


def test_primary_key_rows_go_to_their_hash_bucket(tmp_path):
    rows = 200
    data = pa.table({"id": list(range(rows)), "dt": ["a", "b"] * (rows // 2), "v": ["v"] * rows})
    root, schema, results = write(tmp_path, data, primary_keys=("id", "dt"), options={"bucket": "4"})
    seen = 0
    for _partition, bucket, files in results:
        for meta in files:
            path = file_path(root, meta)
            assert path.parent.name == f"bucket-{bucket}"
            ids = read_parquet(path).column("id").to_pylist()
            assert ids == sorted(ids)
            assert all(bucket_of([i], [schema.field("id").type], 4) == bucket for i in ids)
            seen += len(ids)
    assert seen == rows


def test_primary_key_files_roll_with_disjoint_key_ranges(tmp_path):
    rows = 4000
    data = pa.table(
        {"id": list(range(rows))[::-1], "dt": ["a"] * rows, "v": [f"v{i:08d}" for i in range(rows)]}
    )
    root, schema, results = write(
        tmp_path, data, primary_keys=("id", "dt"), options=pk_options(**{"target-file-size": "4 kb"})
    )
    files = all_files(results)
    assert len(files) > 2
    key_type = [schema.field("id").type]
    ranges = [
        (deserialize_row(f.min_key, key_type)[0], deserialize_row(f.max_key, key_type)[0]) for f in files
    ]
    assert ranges == sorted(ranges)
    for (_, high), (low, _) in zip(ranges, ranges[1:], strict=False):
        assert high < low
    assert sum(f.row_count for f in files) == rows
    for meta in files:
        assert file_path(root, meta).stat().st_size == meta.file_size


def test_first_row_engine_keeps_the_first_write(tmp_path):
    data = pa.table({"id": [1, 1, 2], "dt": ["a"] * 3, "v": ["first", "second", "x"]})
    options = pk_options(**{"merge-engine": "first-row"})
    root, _schema, results = write(tmp_path, data, primary_keys=("id", "dt"), options=options)
    rows = read_parquet(file_path(root, all_files(results)[0]))
    assert rows.column("v").to_pylist() == ["first", "x"]
    assert rows.column("_SEQUENCE_NUMBER").to_pylist() == [10, 12]


def test_thin_mode_files_have_no_key_columns(tmp_path):
    data = pa.table({"id": [2, 1], "dt": ["a", "a"], "v": ["x", "y"]})
    options = pk_options(**{"data-file.thin-mode": "true"})
    root, schema, results = write(tmp_path, data, primary_keys=("id", "dt"), options=options)
    meta = all_files(results)[0]
    rows = read_parquet(file_path(root, meta))
    assert rows.column_names == ["_SEQUENCE_NUMBER", "_VALUE_KIND", "id", "dt", "v"]
    assert deserialize_row(meta.max_key, [schema.field("id").type]) == [2]


def test_empty_input_writes_nothing(tmp_path):
    data = pa.table(
        {"id": pa.array([], pa.int64()), "dt": pa.array([], pa.string()), "v": pa.array([], pa.string())}
    )
    root, _schema, results = write(tmp_path, data, primary_keys=("id", "dt"), options=pk_options())
    assert results == [] and not Path(root).exists()


def test_repeated_keys_merge_by_the_engine_as_javas_write_buffer(tmp_path):
    """partial-update and aggregation merge a key's rows of one write into one row (no longer refused)."""
    data = pa.table({"id": [1, 1, 2], "dt": ["a", "a", "a"], "v": ["x", None, "z"]})
    options = pk_options(**{"merge-engine": "partial-update"})
    root, _schema, results = write(tmp_path, data, primary_keys=("id", "dt"), options=options)
    rows = read_parquet(file_path(root, all_files(results)[0]))
    assert rows.select(["id", "v", "_SEQUENCE_NUMBER"]).to_pylist() == [
        {"id": 1, "v": "x", "_SEQUENCE_NUMBER": 11},
        {"id": 2, "v": "z", "_SEQUENCE_NUMBER": 12},
    ]
    options = pk_options(**{"merge-engine": "aggregation", "fields.v.aggregate-function": "listagg"})
    root, _schema, results = write(tmp_path / "agg", data, primary_keys=("id", "dt"), options=options)
    rows = read_parquet(file_path(root, all_files(results)[0]))
    assert rows.column("v").to_pylist() == ["x", "z"]


def test_engine_this_writer_cannot_merge_is_refused_only_for_repeated_keys(tmp_path):
    options = pk_options(**{"merge-engine": "aggregation", "fields.v.aggregate-function": "collect"})
    single = pa.table({"id": [1, 2], "dt": ["a", "a"], "v": ["x", "y"]})
    write(tmp_path, single, primary_keys=("id", "dt"), options=options)
    repeated = pa.table({"id": [1, 1], "dt": ["a", "a"], "v": ["x", "y"]})
    with pytest.raises(UnsupportedOperationError, match="collect"):
        write(tmp_path / "repeated", repeated, primary_keys=("id", "dt"), options=options)


def test_dynamic_bucket_primary_key_tables_are_refused(tmp_path):
    data = pa.table({"id": [1], "dt": ["a"], "v": ["x"]})
    with pytest.raises(UnsupportedOperationError, match="bucket=-1"):
        write(tmp_path, data, primary_keys=("id", "dt"))


# -- formats, names, input handling -------------------------------------------------------------------


NESTED = [
    ("id", "INT"),
    ("s", "STRING"),
    ("ts", "TIMESTAMP(3)"),
    ("day", "DATE"),
    ("dec", "DECIMAL(10, 2)"),
    ("tags", {"type": "ARRAY", "element": "STRING"}),
    ("attrs", {"type": "MAP", "key": "STRING NOT NULL", "value": "INT"}),
    (
        "point",
        {
            "type": "ROW",
            "fields": [{"id": 0, "name": "x", "type": "INT"}, {"id": 0, "name": "y", "type": "DOUBLE"}],
        },
    ),
]


def nested_data() -> pa.Table:
    return pa.table(
        {
            "id": pa.array([1, 2], pa.int32()),
            "s": ["x", None],
            "ts": pa.array([dt.datetime(2024, 1, 1, 12, 30, 0, 5000), None], pa.timestamp("ms")),
            "day": [dt.date(2024, 2, 3), None],
            "dec": pa.array([Decimal("1.50"), None], pa.decimal128(10, 2)),
            "tags": [["a", "b"], None],
            "attrs": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int32())),
            "point": [{"x": 1, "y": 2.5}, None],
        }
    )


@pytest.mark.parametrize("file_format", ["parquet", "orc", "avro"])
def test_every_format_round_trips(tmp_path, file_format):
    data = nested_data()
    root, _schema, results = write(
        tmp_path, data, columns=NESTED, partition_keys=(), options={"file.format": file_format}
    )
    meta = all_files(results)[0]
    assert meta.file_name.endswith(f".{file_format}")
    payload = file_path(root, meta).read_bytes()
    assert len(payload) == meta.file_size
    if file_format == "avro":
        reader = fastavro.reader(io.BytesIO(payload))
        schema = reader.writer_schema
        assert schema["name"] == "org.apache.paimon.avro.generated.record"
        assert schema["fields"][0]["type"] == ["null", "int"]
        assert schema["fields"][2]["type"][1]["logicalType"] == "timestamp-millis"
        records = list(reader)
        assert records[0]["ts"] == dt.datetime(2024, 1, 1, 12, 30, 0, 5000, tzinfo=dt.timezone.utc)
        assert records[0]["day"] == dt.date(2024, 2, 3) and records[0]["dec"] == Decimal("1.50")
        assert records[0]["attrs"] == {"k": 1} and records[0]["point"] == {"x": 1, "y": 2.5}
        assert records[1] == {name: None for name, _ in NESTED} | {"id": 2}
        return
    read = orc.read_table(io.BytesIO(payload)) if file_format == "orc" else pq.read_table(io.BytesIO(payload))
    assert read.column("id").to_pylist() == [1, 2]
    assert read.column("tags").to_pylist() == [["a", "b"], None]
    assert read.column("point").to_pylist() == [{"x": 1, "y": 2.5}, None]
    assert read.column("ts").to_pylist()[0] == dt.datetime(2024, 1, 1, 12, 30, 0, 5000)


def test_nested_parquet_fields_carry_java_structured_ids(tmp_path):
    root, schema, results = write(tmp_path, nested_data(), columns=NESTED, partition_keys=())
    parquet_schema = pq.read_schema(file_path(root, all_files(results)[0]))
    tags = parquet_schema.field("tags")
    tags_id = schema.field("tags").id
    assert tags.type.value_field.metadata[b"PARQUET:field_id"] == str(536870911 + tags_id * 1024 + 1).encode()
    attrs_id = schema.field("attrs").id
    assert (
        parquet_schema.field("attrs").type.key_field.metadata[b"PARQUET:field_id"]
        == str(536870911 - attrs_id * 1024 - 1).encode()
    )
    point_fields = schema.field("point").type.fields
    assert [parquet_schema.field("point").type.field(i).metadata[b"PARQUET:field_id"] for i in range(2)] == [
        str(f.id).encode() for f in point_fields
    ]


def test_file_names_honour_prefix_and_compression_suffix(tmp_path):
    data = pa.table({"id": [1], "dt": ["a"], "v": ["x"]})
    options = {"data-file.prefix": "part-", "file.suffix.include.compression": "true"}
    _root, _schema, results = write(tmp_path, data, options=options)
    name = all_files(results)[0].file_name
    assert name.startswith("part-") and name.endswith("-0.zst.parquet")
    _root, _schema, results = write(
        tmp_path / "snappy", data, options={**options, "file.compression": "snappy"}
    )
    assert all_files(results)[0].file_name.endswith("-0.snappy.parquet")


def test_compression_options_reach_the_file(tmp_path):
    data = pa.table({"id": list(range(100)), "dt": ["a"] * 100, "v": ["x"] * 100})
    for codec, expected in (("snappy", "SNAPPY"), ("none", "UNCOMPRESSED"), ("zstd", "ZSTD")):
        root, _schema, results = write(
            tmp_path / codec, data, options={"file.compression": codec, "file.compression.zstd-level": "3"}
        )
        metadata = pq.ParquetFile(file_path(root, all_files(results)[0])).metadata
        assert metadata.row_group(0).column(0).compression == expected


def test_a_column_that_cannot_be_cast_is_named(tmp_path):
    data = pa.table({"id": ["not a number"], "dt": ["a"], "v": ["x"]})
    with pytest.raises(DataWriteError, match="column id"):
        write(tmp_path, data)


def test_nulls_in_not_null_columns_are_refused(tmp_path):
    data = pa.table({"id": [None, 1], "dt": ["a", "a"], "v": ["x", "y"]})
    with pytest.raises(DataWriteError, match="column id is NOT NULL"):
        write(tmp_path, data, primary_keys=("id", "dt"), options=pk_options())


def test_missing_columns_are_named(tmp_path):
    with pytest.raises(DataWriteError, match="no column"):
        write(tmp_path, pa.table({"id": [1], "dt": ["a"]}))


def test_split_keeps_input_order_and_groups_partitions_and_buckets():
    schema = make_schema(primary_keys=("id", "dt"), options={"bucket": "3"})
    data = pa.table({"id": [5, 1, 5, 2, 1, 9], "dt": ["b", "a", "b", "a", "b", None], "v": list("uvwxyz")})
    data = data.cast(pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())]))
    slices = list(split_by_partition_and_bucket(data, schema))
    seen = []
    for values, partition, bucket, part in slices:
        assert part.column("dt").to_pylist() == values * part.num_rows
        for key in part.column("id").to_pylist():
            assert bucket_of([key], [schema.field("id").type], 3) == bucket
        assert partition.startswith(b"\x00\x00\x00\x01")
        seen += part.column("v").to_pylist()
    assert sorted(seen) == list("uvwxyz")
    by_group = {(tuple(s.partition_values), s.bucket): s.data.column("v").to_pylist() for s in slices}
    assert by_group[(("b",), bucket_of([5], [schema.field("id").type], 3))][:2] == ["u", "w"]


def test_write_bucket_files_takes_a_stream_of_batches(tmp_path):
    schema = make_schema(partition_keys=())
    root = str(tmp_path / "t")
    batches = [
        pa.record_batch({"id": [i, i + 1], "dt": ["a", "a"], "v": ["x", None]}) for i in range(0, 10, 2)
    ]
    files = write_bucket_files(FileIO.for_path(root), root, schema, [], 0, iter(batches), 0)
    assert sum(f.row_count for f in files) == 10
    assert files[0].min_sequence_number == 0 and files[-1].max_sequence_number == 9
    (path,) = Path(root).rglob("*.parquet")
    assert path.parent == Path(root) / "bucket-0"
    assert read_parquet(path).column("id").to_pylist() == list(range(10))


def test_a_failed_write_removes_the_files_it_wrote(tmp_path):
    schema = make_schema(partition_keys=(), options={"target-file-size": "1 kb"})
    root = str(tmp_path / "t")

    def batches():
        for i in range(5):
            yield pa.record_batch(
                {"id": list(range(500)), "dt": ["a"] * 500, "v": [f"{i}-{j}" for j in range(500)]}
            )
        yield pa.record_batch({"id": ["bad"], "dt": ["a"], "v": ["x"]})

    with pytest.raises(DataWriteError):
        write_bucket_files(FileIO.for_path(root), root, schema, [], 0, batches(), 0)
    assert list(Path(root).rglob("*.parquet")) == []


# -- end to end: commit and read with pypaimon --------------------------------------------------------


def pypaimon_read(warehouse: Path) -> list[dict]:
    pypaimon = pytest.importorskip("pypaimon")
    catalog = pypaimon.CatalogFactory.create({"warehouse": str(warehouse)})
    table = catalog.get_table("db.t")
    builder = table.new_read_builder()
    return builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()


def commit_files(table, results, total_buckets: int):
    messages = [
        CommitMessage(partition, bucket, total_buckets, files) for partition, bucket, files in results
    ]
    return SnapshotCommit(table).append(messages)


@pytest.mark.parametrize("file_format", ["parquet", "orc", "avro"])
def test_pypaimon_reads_an_append_table_we_wrote(tmp_path, file_format):
    pytest.importorskip("pypaimon")
    from tests.support.factories import make_table

    table = make_table(str(tmp_path / "db.db" / "t"), options={"file.format": file_format})
    data = pa.table(
        {"id": list(range(50)), "dt": ["2024-01-01", "2024-01-02"] * 25, "v": [f"v{i}" for i in range(50)]}
    )
    results = write_table_files(table.file_io, table.path, table.schema, data, 0)
    commit_files(table, results, -1)
    rows = pypaimon_read(tmp_path)
    assert sorted((r["id"], r["dt"], r["v"]) for r in rows) == sorted(
        zip(
            data.column("id").to_pylist(),
            data.column("dt").to_pylist(),
            data.column("v").to_pylist(),
            strict=True,
        )
    )


WIDE = [
    ("id", "INT"),
    ("s", "STRING"),
    ("ts3", "TIMESTAMP(3)"),
    ("ts6", "TIMESTAMP(6)"),
    ("ltz", "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
    ("day", "DATE"),
    ("t", "TIME"),
    ("dec", "DECIMAL(10, 2)"),
    ("big", "DECIMAL(30, 4)"),
    ("b", "BOOLEAN"),
    ("f", "FLOAT"),
    ("raw", "BYTES"),
    ("ti", "TINYINT"),
]


@pytest.mark.parametrize("file_format", ["parquet", "orc", "avro"])
def test_pypaimon_reads_every_column_type_we_wrote(tmp_path, file_format):
    pytest.importorskip("pypaimon")
    from tests.support.factories import make_table

    table = make_table(
        str(tmp_path / "db.db" / "t"), columns=WIDE, partition_keys=(), options={"file.format": file_format}
    )
    t0 = dt.datetime(2024, 1, 1, 12, 30, 0, 123456)
    first = {
        "id": 1,
        "s": "x",
        "ts3": dt.datetime(2024, 1, 1, 12, 30, 0, 123000),
        "ts6": t0,
        "ltz": t0.replace(tzinfo=dt.timezone.utc),
        "day": dt.date(2024, 2, 3),
        "t": dt.time(1, 2, 3, 4000),
        "dec": Decimal("1.50"),
        "big": Decimal("123456789012345678901.1234"),
        "b": True,
        "f": 1.5,
        "raw": b"\x00\xff",
        "ti": -3,
    }
    second = {name: None for name, _ in WIDE} | {"id": 2}
    data = pa.Table.from_pylist([first, second], schema=table_arrow_schema(table.schema))
    results = write_table_files(table.file_io, table.path, table.schema, data, 0)
    commit_files(table, results, -1)
    assert sorted(pypaimon_read(tmp_path), key=lambda r: r["id"]) == [first, second]


def test_pypaimon_reads_a_primary_key_table_we_wrote_twice(tmp_path):
    pytest.importorskip("pypaimon")
    from tests.support.factories import make_table

    table = make_table(str(tmp_path / "db.db" / "t"), primary_keys=("id", "dt"), options={"bucket": "2"})
    first = pa.table({"id": [1, 2, 3, 1], "dt": ["a", "a", "b", "a"], "v": ["one", "two", "three", "uno"]})
    results = write_table_files(table.file_io, table.path, table.schema, first, 0)
    commit_files(table, results, 2)
    next_sequence = max(f.max_sequence_number for f in all_files(results)) + 1
    second = pa.table(
        {"id": [2, 4, 3], "dt": ["a", "a", "b"], "v": ["dos", "four", None], "_VALUE_KIND": [2, 0, 3]}
    )
    results = write_table_files(table.file_io, table.path, table.schema, second, next_sequence)
    commit_files(table, results, 2)
    rows = sorted((r["id"], r["dt"], r["v"]) for r in pypaimon_read(tmp_path))
    assert rows == [(1, "a", "uno"), (2, "a", "dos"), (4, "a", "four")]


def test_changelog_producer_input_writes_every_input_row_as_changelog(tmp_path):
    """As Java's MergeTreeWriter: the data file holds the merged rows, the changelog file (prefix
    `changelog-`, level 0) every row as it came, by key then sequence number, retractions kept."""
    data = pa.table(
        {
            "id": [3, 1, 3, 2],
            "dt": ["a"] * 4,
            "v": ["old", "one", "new", None],
            "__row_kind": ["+I", "+I", "+U", "-D"],
        }
    )
    schema = make_schema(primary_keys=("id", "dt"), options={**pk_options(), "changelog-producer": "input"})
    root = str(tmp_path / "db.db" / "t")
    (out,) = write_bucket_outputs(FileIO.for_path(root), root, schema, data, 10)
    (meta,) = out.files
    (changelog,) = out.changelog_files
    assert meta.file_name.startswith("data-") and changelog.file_name.startswith("changelog-")
    assert file_path(root, changelog).parent == file_path(root, meta).parent
    rows = read_parquet(file_path(root, changelog))
    assert rows.column("id").to_pylist() == [1, 2, 3, 3]
    assert rows.column("v").to_pylist() == ["one", None, "old", "new"]
    assert rows.column("_SEQUENCE_NUMBER").to_pylist() == [11, 13, 10, 12]
    assert rows.column("_VALUE_KIND").to_pylist() == [0, 3, 0, 2]
    assert (changelog.row_count, changelog.delete_row_count, changelog.level) == (4, 1, 0)
    key_type = [schema.field("id").type]
    assert deserialize_row(changelog.min_key, key_type) == [1]
    assert deserialize_row(changelog.max_key, key_type) == [3]
    assert read_parquet(file_path(root, meta)).column("v").to_pylist() == ["one", None, "new"]
    # write_table_files (no changelog) and tables without the producer write no changelog file
    assert not write_bucket_outputs(
        FileIO.for_path(root), root, make_schema(primary_keys=("id", "dt"), options=pk_options()), data, 10
    )[0].changelog_files
    write_table_files(FileIO.for_path(root), root, schema, data, 10)
    assert len(list(Path(root).rglob("changelog-*"))) == 1


def test_fit_string_lengths_checks_and_pads_char_and_varchar():
    schema = make_schema(columns=[("c", "CHAR(3)"), ("vc", "VARCHAR(4)"), ("s", "STRING")], partition_keys=())
    data = pa.table({"c": ["a", None, "abc"], "vc": ["abcd", "", None], "s": ["x" * 50, "", None]})
    fitted = fit_string_lengths(data, schema)
    assert fitted.column("c").to_pylist() == ["a  ", None, "abc"]
    assert fitted.column("vc").to_pylist() == ["abcd", "", None]
    assert fitted.column("s").to_pylist() == data.column("s").to_pylist()
    with pytest.raises(DataWriteError, match="column vc: a value of 5 characters does not fit VARCHAR"):
        fit_string_lengths(pa.table({"c": ["a"], "vc": ["abcdé"], "s": ["x"]}), schema)
