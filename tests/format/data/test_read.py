"""Reading one data file: all three formats, schema evolution by field id, key-value layout, thin mode,
deletion vectors, and the errors for missing and corrupt files.

Files are written by our writer (`write_bucket_files`), whose layout the writer tests check against
pypaimon; the read path as a whole is compared with pypaimon in tests/jobs/test_read_table.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap

from paimon_format.data.reader import data_file_path, key_value_arrow_schema, read_data_file
from paimon_format.data.writer import write_bucket_files
from paimon_format.errors import CorruptFileError, MissingFileError
from paimon_format.model.binary_row import EMPTY_ROW
from paimon_format.model.file_layout import table_arrow_schema
from paimon_format.model.schema import TableSchema
from paimon_format.model.type_parsing import parse_type
from paimon_format.model.types import DataField
from paimon_format.table import Table
from tests.support.factories import make_table, partition_of

FORMATS = ["parquet", "orc", "avro"]
TYPED_COLUMNS = (
    ("id", "BIGINT"),
    ("dt", "STRING"),
    ("i", "INT"),
    ("f", "FLOAT"),
    ("s", "STRING"),
    ("d", "DATE"),
    ("ts", "TIMESTAMP(6)"),
    ("amount", "DECIMAL(10, 2)"),
)


def typed_rows(count: int) -> list[dict]:
    return [
        {
            "id": n,
            "dt": "2024-01-01",
            "i": n * 10 if n % 4 else None,
            "f": n / 2,
            "s": f"value-{n}",
            "d": dt.date(2024, 1, 1) + dt.timedelta(days=n),
            "ts": dt.datetime(2024, 1, 1, 12, 0, 0, n),
            "amount": Decimal(f"{n}.25"),
        }
        for n in range(count)
    ]


def write_file(table: Table, rows: list[dict], partition: tuple = ("2024-01-01",), bucket: int = 0):
    """Write rows as one bucket's files under the table's latest schema; (partition bytes, [files])."""
    schema = table.schema
    data = pa.Table.from_pylist(rows, schema=table_arrow_schema(schema))
    files = write_bucket_files(table.file_io, table.path, schema, list(partition), bucket, data, 0)
    return partition_of(table, *partition), files


def evolve(table: Table, fields: list[DataField]) -> TableSchema:
    """Commit schema <latest + 1> with these fields (ids as given) and return it."""
    latest = table.schema
    highest = max([latest.highest_field_id] + [f.id for f in fields])
    schema = dataclasses.replace(latest, id=latest.id + 1, fields=tuple(fields), highest_field_id=highest)
    assert table.schema_manager.commit_new_schema(schema)
    table.refresh()
    return table.schema


@pytest.mark.parametrize("file_format", FORMATS)
def test_every_format_reads_back_in_file_order_and_in_bounded_batches(tmp_path: Path, file_format: str):
    table = make_table(str(tmp_path / "t"), TYPED_COLUMNS, options={"file.format": file_format})
    rows = typed_rows(10)
    partition, (meta,) = write_file(table, rows)
    assert meta.file_name.endswith("." + file_format)

    batches = list(read_data_file(table, partition, 0, meta, batch_rows=3))

    assert [b.num_rows for b in batches] == [3, 3, 3, 1]
    assert all(b.schema.equals(table_arrow_schema(table.schema)) for b in batches)
    assert pa.Table.from_batches(batches).to_pylist() == rows


@pytest.mark.parametrize("file_format", FORMATS)
def test_schema_evolution_resolves_columns_by_field_id(tmp_path: Path, file_format: str):
    table = make_table(
        str(tmp_path / "t"),
        (("id", "BIGINT"), ("dt", "STRING"), ("a", "INT"), ("b", "FLOAT"), ("c", "STRING")),
        options={"file.format": file_format},
    )
    rows = [{"id": n, "dt": "x", "a": n + 100, "b": n + 0.5, "c": f"c{n}"} for n in range(5)]
    partition, (meta,) = write_file(table, rows, partition=("x",))
    old = {f.name: f for f in table.schema.fields}
    new_schema = evolve(
        table,
        [
            old["id"],
            DataField(99, "added_first", parse_type("STRING")),  # added later: nulls
            old["dt"],
            DataField(old["a"].id, "a", parse_type("BIGINT")),  # widened INT -> BIGINT
            DataField(old["b"].id, "b_renamed", parse_type("DOUBLE")),  # renamed and widened
            # c dropped
        ],
    )

    batches = list(read_data_file(table, partition, 0, meta))

    assert batches[0].schema.equals(table_arrow_schema(new_schema))
    assert pa.Table.from_batches(batches).to_pylist() == [
        {"id": n, "added_first": None, "dt": "x", "a": n + 100, "b_renamed": n + 0.5} for n in range(5)
    ]
    # An explicit older read schema reads the file as it was written.
    old_rows = pa.Table.from_batches(
        list(read_data_file(table, partition, 0, meta, read_schema=table.schema_manager.schema(0)))
    ).to_pylist()
    assert old_rows == rows


def primary_key_table(root: str, file_format: str, thin: bool) -> Table:
    return make_table(
        root,
        (("id", "BIGINT NOT NULL"), ("dt", "STRING NOT NULL"), ("v", "STRING")),
        primary_keys=("id", "dt"),
        options={"bucket": "1", "file.format": file_format, "data-file.thin-mode": str(thin).lower()},
    )


@pytest.mark.parametrize("file_format", FORMATS)
@pytest.mark.parametrize("thin", [False, True])
def test_primary_key_file_in_the_full_key_value_layout(tmp_path: Path, file_format: str, thin: bool):
    table = primary_key_table(str(tmp_path / "t"), file_format, thin)
    rows = [{"id": n, "dt": "x", "v": f"v{n}"} for n in (5, 1, 3)]
    partition, (meta,) = write_file(table, rows, partition=("x",))

    batches = list(read_data_file(table, partition, 0, meta, system_columns=True))

    assert all(b.schema.equals(key_value_arrow_schema(table.schema)) for b in batches)
    assert batches[0].schema.names == ["_KEY_id", "_SEQUENCE_NUMBER", "_VALUE_KIND", "id", "dt", "v"]
    # Sorted by key, sequence numbers in input order, all +I.
    assert pa.Table.from_batches(batches).to_pylist() == [
        {"_KEY_id": 1, "_SEQUENCE_NUMBER": 1, "_VALUE_KIND": 0, "id": 1, "dt": "x", "v": "v1"},
        {"_KEY_id": 3, "_SEQUENCE_NUMBER": 2, "_VALUE_KIND": 0, "id": 3, "dt": "x", "v": "v3"},
        {"_KEY_id": 5, "_SEQUENCE_NUMBER": 0, "_VALUE_KIND": 0, "id": 5, "dt": "x", "v": "v5"},
    ]
    # Without system columns: the table's columns only.
    plain = pa.Table.from_batches(list(read_data_file(table, partition, 0, meta)))
    assert plain.column_names == ["id", "dt", "v"]


def test_key_columns_come_from_the_file_when_it_has_them(tmp_path: Path):
    """A non-thin file's `_KEY_` columns are read from the file, not derived (they are what Java sorts by)."""
    table = primary_key_table(str(tmp_path / "t"), "parquet", thin=False)
    partition, (meta,) = write_file(table, [{"id": 1, "dt": "x", "v": "a"}], partition=("x",))
    path = data_file_path(table, partition, 0, meta)
    stored = pq.ParquetFile(path).read()
    assert "_KEY_id" in stored.column_names
    doctored = stored.set_column(0, stored.schema.field(0), pa.array([42], pa.int64()))
    pq.write_table(doctored, path)
    meta.file_size = Path(path).stat().st_size

    (batch,) = read_data_file(table, partition, 0, meta, system_columns=True)

    assert batch.column("_KEY_id").to_pylist() == [42]
    assert batch.column("id").to_pylist() == [1]


@pytest.mark.parametrize("file_format", FORMATS)
def test_deleted_rows_are_skipped_across_batches(tmp_path: Path, file_format: str):
    table = make_table(str(tmp_path / "t"), options={"file.format": file_format})
    rows = [{"id": n, "dt": "2024-01-01", "v": str(n)} for n in range(10)]
    partition, (meta,) = write_file(table, rows)

    batches = list(
        read_data_file(table, partition, 0, meta, deleted_rows=BitMap([0, 3, 4, 5, 9]), batch_rows=3)
    )

    # Batches [3, 4, 5] and [9] are deleted entirely and not yielded.
    assert [b.num_rows for b in batches] == [2, 3]
    assert [r["id"] for r in pa.Table.from_batches(batches).to_pylist()] == [1, 2, 6, 7, 8]
    everything = BitMap(range(10))
    assert list(read_data_file(table, partition, 0, meta, deleted_rows=everything)) == []


def test_data_file_path_honours_partition_dirs_and_external_paths(tmp_path: Path):
    table = make_table(str(tmp_path / "t"))
    partition, (meta,) = write_file(table, [{"id": 1, "dt": "2024-01-01", "v": "a"}])
    assert (
        data_file_path(table, partition, 0, meta) == f"{tmp_path}/t/dt=2024-01-01/bucket-0/{meta.file_name}"
    )

    elsewhere = tmp_path / "external" / meta.file_name
    elsewhere.parent.mkdir()
    Path(data_file_path(table, partition, 0, meta)).rename(elsewhere)
    moved = dataclasses.replace(meta, external_path=str(elsewhere))
    assert data_file_path(table, partition, 0, moved) == str(elsewhere)
    (batch,) = read_data_file(table, partition, 0, moved)
    assert batch.column("v").to_pylist() == ["a"]


def test_missing_file_names_its_path(tmp_path: Path):
    table = make_table(str(tmp_path / "t"))
    partition, (meta,) = write_file(table, [{"id": 1, "dt": "2024-01-01", "v": "a"}])
    path = data_file_path(table, partition, 0, meta)
    Path(path).unlink()

    with pytest.raises(MissingFileError) as error:
        list(read_data_file(table, partition, 0, meta))
    assert error.value.path == path


@pytest.mark.parametrize("file_format", FORMATS)
@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_file_is_a_corrupt_file_error(tmp_path: Path, file_format: str, damage: str):
    table = make_table(str(tmp_path / "t"), options={"file.format": file_format})
    rows = [{"id": n, "dt": "2024-01-01", "v": "x" * 50} for n in range(200)]
    partition, (meta,) = write_file(table, rows)
    path = Path(data_file_path(table, partition, 0, meta))
    content = path.read_bytes()
    path.write_bytes(b"not a data file at all" * 20 if damage == "garbage" else content[: len(content) // 2])

    with pytest.raises(CorruptFileError) as error:
        list(read_data_file(table, partition, 0, meta))
    assert error.value.path == str(path)


def test_row_count_mismatch_with_the_manifest_is_corruption(tmp_path: Path):
    table = make_table(str(tmp_path / "t"))
    partition, (meta,) = write_file(table, [{"id": n, "dt": "2024-01-01", "v": "a"} for n in range(3)])
    wrong = dataclasses.replace(meta, row_count=4, min_key=EMPTY_ROW)

    with pytest.raises(CorruptFileError, match="3 rows"):
        list(read_data_file(table, partition, 0, wrong))


_READ_WITHOUT_ZSTD = """
import pickle, sys
for name in ("backports.zstd", "compression.zstd", "zstandard"):
    sys.modules[name] = None
from paimon_format.errors import MissingDependencyError
from paimon_format.data.reader import read_data_file

table, partition, meta = pickle.loads(bytes.fromhex(sys.argv[1]))
try:
    list(read_data_file(table, partition, 0, meta))
except MissingDependencyError as error:
    print("missing", error)
"""


def test_a_missing_codec_library_is_not_a_corrupt_file(tmp_path: Path):
    """An Avro data file with zstd blocks, read where no zstd library is installed."""
    import pickle
    import subprocess
    import sys

    table = make_table(str(tmp_path / "t"), options={"file.format": "avro", "file.compression": "zstd"})
    partition, (meta,) = write_file(table, [{"id": 1, "dt": "2024-01-01", "v": "a"}])
    result = subprocess.run(
        [sys.executable, "-c", _READ_WITHOUT_ZSTD, pickle.dumps((table, partition, meta)).hex()],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(Path(__file__).resolve().parents[3]),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("missing ") and "install" in result.stdout
