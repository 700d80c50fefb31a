"""Small builders for tests: tables, data-file metadata and commit messages without real data files."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from paimon_format.commit import CommitMessage
from paimon_format.manifest.entries import DataFileMeta, SimpleStats
from paimon_format.model.binary_row import EMPTY_ROW, serialize_row
from paimon_format.model.schema import new_table_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table


def make_table(
    root: str,
    columns: Sequence[tuple[str, str]] = (("id", "BIGINT"), ("dt", "STRING"), ("v", "STRING")),
    partition_keys: Sequence[str] = ("dt",),
    primary_keys: Sequence[str] = (),
    options: dict[str, str] | None = None,
) -> Table:
    """Create a table at `root` (a local path or memory:// URL) and return its handle."""
    file_io = FileIO.for_path(root)
    table = Table(file_io, root)
    schema = new_table_schema(
        [(name, parse_type(type_text)) for name, type_text in columns],
        partition_keys=partition_keys,
        primary_keys=primary_keys,
        options=options or {},
    )
    table.schema_manager.create_table(schema)
    table.refresh()
    return table


def partition_of(table: Table, *values: Any) -> bytes:
    return serialize_row(list(values), table.partition_types)


def data_file(name: str, rows: int = 10, size: int = 100, level: int = 0, sequence: int = 0) -> DataFileMeta:
    empty = SimpleStats(EMPTY_ROW, EMPTY_ROW, [])
    return DataFileMeta(
        file_name=name,
        file_size=size,
        row_count=rows,
        min_key=EMPTY_ROW,
        max_key=EMPTY_ROW,
        key_stats=empty,
        value_stats=SimpleStats(EMPTY_ROW, EMPTY_ROW, []),
        min_sequence_number=sequence,
        max_sequence_number=sequence + rows - 1,
        schema_id=0,
        level=level,
        extra_files=[],
        creation_time=dt.datetime(2024, 1, 1, 12, 0, 0),
        delete_row_count=0,
        file_source=0,
        value_stats_cols=[],
    )


def message(
    table: Table,
    partition_values: Sequence[Any],
    *files: DataFileMeta,
    bucket: int = 0,
    total_buckets: int = -1,
    deleted: Sequence[DataFileMeta] = (),
) -> CommitMessage:
    return CommitMessage(
        partition=partition_of(table, *partition_values),
        bucket=bucket,
        total_buckets=total_buckets,
        new_files=list(files),
        deleted_files=list(deleted),
    )
