"""The columns of each system table: Paimon's names, order, types and nullability, as Arrow fields.

Taken from Paimon 1.4's `org.apache.paimon.table.system.*Table.TABLE_TYPE` (the newest release), so
SQL written against Paimon's own Spark connector runs unchanged here. Type mapping: BIGINT -> int64,
INT -> int32, STRING -> string, TIMESTAMP(3) -> timestamp[ms] without a zone (Paimon's system tables
hold wall-clock times of the reader's time zone), ARRAY<STRING> -> list<string>; NOT NULL columns are
non-nullable Arrow fields.

Older Paimon versions have fewer columns (1.0 lacks `$snapshots.next_row_id`, `$files`'
`deleteRowCount` .. `write_cols`, `$manifests`' partition and row-id ranges, `$partitions`'
`created_at` .. `options`); a Paimon 1.0 pre-release also had `created_from_tag` and
`created_from_snapshot` in `$branches`, which later releases dropped.
"""

from __future__ import annotations

import pyarrow as pa

_TS = pa.timestamp("ms")


def _schema(*fields: tuple[str, pa.DataType, bool]) -> pa.Schema:
    """Fields as (name, type, nullable)."""
    return pa.schema([pa.field(name, data_type, nullable=nullable) for name, data_type, nullable in fields])


SNAPSHOTS = _schema(
    ("snapshot_id", pa.int64(), False),
    ("schema_id", pa.int64(), False),
    ("commit_user", pa.string(), False),
    ("commit_identifier", pa.int64(), False),
    ("commit_kind", pa.string(), False),
    ("commit_time", _TS, False),
    ("base_manifest_list", pa.string(), False),
    ("delta_manifest_list", pa.string(), False),
    ("changelog_manifest_list", pa.string(), True),
    ("total_record_count", pa.int64(), True),
    ("delta_record_count", pa.int64(), True),
    ("changelog_record_count", pa.int64(), True),
    ("watermark", pa.int64(), True),
    ("next_row_id", pa.int64(), True),
)

SCHEMAS = _schema(
    ("schema_id", pa.int64(), False),
    ("fields", pa.string(), False),
    ("partition_keys", pa.string(), False),
    ("primary_keys", pa.string(), False),
    ("options", pa.string(), False),
    ("comment", pa.string(), True),
    ("update_time", _TS, False),
)

OPTIONS = _schema(("key", pa.string(), False), ("value", pa.string(), False))

FILES = _schema(
    ("partition", pa.string(), True),
    ("bucket", pa.int32(), False),
    ("file_path", pa.string(), False),
    ("file_format", pa.string(), False),
    ("schema_id", pa.int64(), False),
    ("level", pa.int32(), False),
    ("record_count", pa.int64(), False),
    ("file_size_in_bytes", pa.int64(), False),
    ("min_key", pa.string(), True),
    ("max_key", pa.string(), True),
    ("null_value_counts", pa.string(), False),
    ("min_value_stats", pa.string(), False),
    ("max_value_stats", pa.string(), False),
    ("min_sequence_number", pa.int64(), True),
    ("max_sequence_number", pa.int64(), True),
    ("creation_time", _TS, True),
    ("deleteRowCount", pa.int64(), True),
    ("file_source", pa.string(), True),
    ("first_row_id", pa.int64(), True),
    ("write_cols", pa.list_(pa.string()), True),
)

MANIFESTS = _schema(
    ("file_name", pa.string(), False),
    ("file_size", pa.int64(), False),
    ("num_added_files", pa.int64(), False),
    ("num_deleted_files", pa.int64(), False),
    ("schema_id", pa.int64(), False),
    ("min_partition_stats", pa.string(), True),
    ("max_partition_stats", pa.string(), True),
    ("min_row_id", pa.int64(), True),
    ("max_row_id", pa.int64(), True),
)

PARTITIONS = _schema(
    ("partition", pa.string(), True),
    ("record_count", pa.int64(), False),
    ("file_size_in_bytes", pa.int64(), False),
    ("file_count", pa.int64(), False),
    ("last_update_time", _TS, True),
    ("created_at", _TS, True),
    ("created_by", pa.string(), True),
    ("updated_by", pa.string(), True),
    ("options", pa.string(), True),
)

BUCKETS = _schema(
    ("partition", pa.string(), True),
    ("bucket", pa.int32(), False),
    ("record_count", pa.int64(), False),
    ("file_size_in_bytes", pa.int64(), False),
    ("file_count", pa.int64(), False),
    ("last_update_time", _TS, True),
)

TAGS = _schema(
    ("tag_name", pa.string(), False),
    ("snapshot_id", pa.int64(), False),
    ("schema_id", pa.int64(), False),
    ("commit_time", _TS, False),
    ("record_count", pa.int64(), True),
    ("create_time", _TS, True),
    ("time_retained", pa.string(), True),
)

BRANCHES = _schema(("branch_name", pa.string(), False), ("create_time", _TS, False))

CONSUMERS = _schema(("consumer_id", pa.string(), False), ("next_snapshot_id", pa.int64(), False))

SCHEMAS_BY_NAME: dict[str, pa.Schema] = {
    "snapshots": SNAPSHOTS,
    "schemas": SCHEMAS,
    "options": OPTIONS,
    "files": FILES,
    "manifests": MANIFESTS,
    "partitions": PARTITIONS,
    "buckets": BUCKETS,
    "tags": TAGS,
    "branches": BRANCHES,
    "consumers": CONSUMERS,
}
