"""Data files on S3 (moto behind the counting proxy): a read opens the file with the size its manifest
entry records, so it sends no HEAD, and a small file comes in one GET; a file gone from the bucket is
still a MissingFileError naming it, whichever way it was opened.

Why these counts matter: on an object store every request is a round trip (tens of ms) and billed;
scripts/bench_s3_files.py measured a data file read at HEAD + footer GET + data GET before.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from paimon_format.data.reader import data_file_path, read_data_file
from paimon_format.data.writer import write_bucket_files
from paimon_format.errors import MissingFileError
from paimon_format.model.binary_row import serialize_row
from paimon_format.model.file_layout import table_arrow_schema
from paimon_format.model.schema import new_table_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.scan.split_read import projected_schema
from paimon_format.storage import fileio
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table

COLUMNS = (("id", "BIGINT"), ("dt", "STRING"), ("name", "STRING"), ("amount", "DOUBLE"))


def _table(root: str, options: dict[str, Any], file_format: str) -> Table:
    table = Table(FileIO.for_path(root, options), root)
    schema = new_table_schema(
        [(name, parse_type(text)) for name, text in COLUMNS],
        partition_keys=["dt"],
        options={"file.format": file_format},
    )
    table.schema_manager.create_table(schema)
    table.refresh()
    return table


def _written(table: Table, rows: int = 2_000) -> tuple[bytes, Any, list[dict[str, Any]]]:
    """One data file of `rows` rows in partition dt=d; (partition bytes, its meta, the rows)."""
    data = [{"id": n, "dt": "d", "name": f"name-{n}", "amount": n / 4} for n in range(rows)]
    arrow = pa.Table.from_pylist(data, schema=table_arrow_schema(table.schema))
    (meta,) = write_bucket_files(table.file_io, table.path, table.schema, ["d"], 0, arrow, 0)
    return serialize_row(["d"], table.partition_types), meta, data


def _requests_for(proxy: Any, file_name: str) -> list[str]:
    return [r.kind for r in proxy.requests if r.path.endswith("/" + file_name)]


@pytest.mark.parametrize("file_format", ["parquet", "orc", "avro"])
def test_a_small_data_file_is_read_in_one_get_and_no_head(s3, file_format):
    prefix, options, proxy = s3
    table = _table(f"{prefix}/t", options, file_format)
    partition, meta, rows = _written(table)
    proxy.reset()

    read = pa.Table.from_batches(list(read_data_file(table, partition, 0, meta))).to_pylist()

    assert read == rows
    assert _requests_for(proxy, meta.file_name) == ["GET"]
    assert proxy.count("HEAD") == 0  # nor for anything else the read touched (its schema file)


def test_a_file_above_the_whole_read_size_is_read_in_ranges_without_head(s3, monkeypatch):
    prefix, options, proxy = s3
    table = _table(f"{prefix}/t", options, "parquet")
    partition, meta, rows = _written(table, rows=20_000)
    monkeypatch.setattr(fileio, "WHOLE_READ_BYTES", meta.file_size // 4)
    proxy.reset()

    schema = projected_schema(table.schema, ["id", "amount"])
    read = pa.Table.from_batches(list(read_data_file(table, partition, 0, meta, read_schema=schema)))

    assert read.to_pylist() == [{"id": r["id"], "amount": r["amount"]} for r in rows]
    kinds = _requests_for(proxy, meta.file_name)
    assert "HEAD" not in kinds
    assert kinds.count("GET") >= 2  # the footer, then the column chunks: ranges, not the whole object


@pytest.mark.parametrize("whole_read", [True, False], ids=["whole-read", "ranged"])
def test_a_data_file_gone_from_the_bucket_is_a_missing_file_error(s3, monkeypatch, whole_read):
    prefix, options, proxy = s3
    table = _table(f"{prefix}/t", options, "parquet")
    partition, meta, _ = _written(table)
    if not whole_read:
        monkeypatch.setattr(fileio, "WHOLE_READ_BYTES", 0)
    path = data_file_path(table, partition, 0, meta)
    assert table.file_io.delete(path)

    with pytest.raises(MissingFileError) as raised:
        list(read_data_file(table, partition, 0, meta))

    assert raised.value.path == path
