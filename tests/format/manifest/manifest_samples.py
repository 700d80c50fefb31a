"""Shared by the manifest codec tests: Java's field order of the models, and data-file metas with
every optional field set or unset."""

from __future__ import annotations

import datetime as dt
from typing import Any

from paimon_format.manifest.entries import (
    DataFileMeta,
    SimpleStats,
)
from paimon_format.model.binary_row import serialize_row
from paimon_format.model.type_parsing import parse_type

BIGINT, STRING, INT = parse_type("BIGINT"), parse_type("STRING"), parse_type("INT")

# DataFileMeta attribute -> Avro field, in Java's field-id order (§4.5).
FILE_FIELDS = {
    "file_name": "_FILE_NAME",
    "file_size": "_FILE_SIZE",
    "row_count": "_ROW_COUNT",
    "min_key": "_MIN_KEY",
    "max_key": "_MAX_KEY",
    "key_stats": "_KEY_STATS",
    "value_stats": "_VALUE_STATS",
    "min_sequence_number": "_MIN_SEQUENCE_NUMBER",
    "max_sequence_number": "_MAX_SEQUENCE_NUMBER",
    "schema_id": "_SCHEMA_ID",
    "level": "_LEVEL",
    "extra_files": "_EXTRA_FILES",
    "creation_time": "_CREATION_TIME",
    "delete_row_count": "_DELETE_ROW_COUNT",
    "embedded_index": "_EMBEDDED_FILE_INDEX",
    "file_source": "_FILE_SOURCE",
    "value_stats_cols": "_VALUE_STATS_COLS",
    "external_path": "_EXTERNAL_PATH",
    "first_row_id": "_FIRST_ROW_ID",
    "write_cols": "_WRITE_COLS",
    "write_cols_sequences": "_WRITE_COLS_SEQUENCES",
}
META_FIELDS = {
    "file_name": "_FILE_NAME",
    "file_size": "_FILE_SIZE",
    "num_added_files": "_NUM_ADDED_FILES",
    "num_deleted_files": "_NUM_DELETED_FILES",
    "partition_stats": "_PARTITION_STATS",
    "schema_id": "_SCHEMA_ID",
    "min_bucket": "_MIN_BUCKET",
    "max_bucket": "_MAX_BUCKET",
    "min_level": "_MIN_LEVEL",
    "max_level": "_MAX_LEVEL",
    "min_row_id": "_MIN_ROW_ID",
    "max_row_id": "_MAX_ROW_ID",
    "total_buckets": "_TOTAL_BUCKETS",
    "extra_files": "_EXTRA_FILES",
}
OPTIONAL_FILE_FIELDS = [name for name in FILE_FIELDS if list(FILE_FIELDS).index(name) >= 12]


def full_file(**changes: Any) -> DataFileMeta:
    """A DataFileMeta with every optional field set (override with keyword arguments)."""
    values: dict[str, Any] = dict(
        file_name="data-x-0.parquet",
        file_size=123,
        row_count=4,
        min_key=serialize_row([1], [BIGINT]),
        max_key=serialize_row([4], [BIGINT]),
        key_stats=SimpleStats(serialize_row([1], [BIGINT]), serialize_row([4], [BIGINT]), [0]),
        value_stats=SimpleStats(
            serialize_row([1, "a"], [BIGINT, STRING]), serialize_row([4, "z"], [BIGINT, STRING]), [None, 2]
        ),
        min_sequence_number=1,
        max_sequence_number=4,
        schema_id=3,
        level=1,
        extra_files=["data-x-0.parquet.index"],
        creation_time=dt.datetime(2024, 1, 2, 3, 4, 5, 6000),
        delete_row_count=1,
        embedded_index=b"\x01\x02",
        file_source=1,
        value_stats_cols=["id", "v"],
        external_path="s3://bucket/x/data-x-0.parquet",
        first_row_id=10,
        write_cols=["id", "v"],
        write_cols_sequences=[7, 8],
    )
    values.update(changes)
    return DataFileMeta(**values)


def bare_file(**changes: Any) -> DataFileMeta:
    """A DataFileMeta with every optional field unset."""
    return full_file(**{**{name: None for name in OPTIONAL_FILE_FIELDS}, "extra_files": [], **changes})
