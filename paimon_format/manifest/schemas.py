"""The Avro schemas of manifests, manifest lists and index manifests, in Java's exact shape (spec §4).

Kept apart from the codec (`paimon_format.manifest.codec`) because they are data: one place to compare
with Java's `AvroSchemaConverter` output field by field when Paimon adds a field.
"""

from __future__ import annotations

from typing import Any

_NAMESPACE = "org.apache.paimon.avro.generated"

# -- Avro schemas (Java's shape) -------------------------------------------------------------------
# Java's AvroSchemaConverter names the top-level record `org.apache.paimon.avro.generated.record`
# and a nested row field F of record R `R_F`; field names start with "_", hence the double
# underscores. The names also keep the two stats records distinct, which fastavro requires.


def _opt(name: str, avro_type: Any) -> dict[str, Any]:
    """A nullable field the way Java writes it: `["null", T]` (null first) with a null default."""
    return {"name": name, "type": ["null", avro_type], "default": None}


def _stats_record(name: str) -> dict[str, Any]:
    return {
        "type": "record",
        "name": name,
        "namespace": _NAMESPACE,
        "fields": [
            {"name": "_MIN_VALUES", "type": "bytes"},
            {"name": "_MAX_VALUES", "type": "bytes"},
            _opt("_NULL_COUNTS", {"type": "array", "items": ["null", "long"]}),
        ],
    }


DATA_FILE_META_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "record__FILE",
    "namespace": _NAMESPACE,
    "fields": [
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_MIN_KEY", "type": "bytes"},
        {"name": "_MAX_KEY", "type": "bytes"},
        {"name": "_KEY_STATS", "type": _stats_record("record__FILE__KEY_STATS")},
        {"name": "_VALUE_STATS", "type": _stats_record("record__FILE__VALUE_STATS")},
        {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_SCHEMA_ID", "type": "long"},
        {"name": "_LEVEL", "type": "int"},
        {"name": "_EXTRA_FILES", "type": {"type": "array", "items": "string"}},
        _opt("_CREATION_TIME", {"type": "long", "logicalType": "timestamp-millis"}),
        _opt("_DELETE_ROW_COUNT", "long"),
        _opt("_EMBEDDED_FILE_INDEX", "bytes"),
        _opt("_FILE_SOURCE", "int"),
        _opt("_VALUE_STATS_COLS", {"type": "array", "items": "string"}),
        _opt("_EXTERNAL_PATH", "string"),
        _opt("_FIRST_ROW_ID", "long"),
        _opt("_WRITE_COLS", {"type": "array", "items": "string"}),
        _opt("_WRITE_COLS_SEQUENCES", {"type": "array", "items": "long"}),
    ],
}

# The newest Java reader checks exactly these six top-level fields, in this order, with `_FILE` a
# plain record (not a union).
MANIFEST_ENTRY_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "record",
    "namespace": _NAMESPACE,
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_TOTAL_BUCKETS", "type": "int"},
        {"name": "_FILE", "type": DATA_FILE_META_SCHEMA},
    ],
}

# Java's manifest-list layout (fields through `_MAX_ROW_ID`). pypaimon and paimon-rust append
# `_TOTAL_BUCKETS` and `_EXTRA_FILES`; Java has no such fields. We write Java's layout because it is
# the one every reader is built and tested against: Java ignores unknown fields and pypaimon/rust read
# both with `.get`, so omitting them only turns off an optional optimisation (null = unknown). Only
# when a meta read from such a list carries values do we append them (MANIFEST_FILE_META_EXTENDED_SCHEMA),
# so rewriting a pypaimon list does not drop the reference to a manifest's sidecar file.
MANIFEST_FILE_META_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "record",
    "namespace": _NAMESPACE,
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_NUM_ADDED_FILES", "type": "long"},
        {"name": "_NUM_DELETED_FILES", "type": "long"},
        {"name": "_PARTITION_STATS", "type": _stats_record("record__PARTITION_STATS")},
        {"name": "_SCHEMA_ID", "type": "long"},
        _opt("_MIN_BUCKET", "int"),
        _opt("_MAX_BUCKET", "int"),
        _opt("_MIN_LEVEL", "int"),
        _opt("_MAX_LEVEL", "int"),
        _opt("_MIN_ROW_ID", "long"),
        _opt("_MAX_ROW_ID", "long"),
    ],
}

MANIFEST_FILE_META_EXTENDED_SCHEMA: dict[str, Any] = {
    **MANIFEST_FILE_META_SCHEMA,
    "fields": [
        *MANIFEST_FILE_META_SCHEMA["fields"],
        _opt("_TOTAL_BUCKETS", "int"),
        _opt("_EXTRA_FILES", {"type": "array", "items": "string"}),
    ],
}

INDEX_MANIFEST_ENTRY_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "record",
    "namespace": _NAMESPACE,
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_INDEX_TYPE", "type": "string"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        _opt(
            "_DELETIONS_VECTORS_RANGES",
            {
                "type": "array",
                # Java: array elements take the name of the field holding the array.
                "items": {
                    "type": "record",
                    "name": "record__DELETIONS_VECTORS_RANGES",
                    "namespace": _NAMESPACE,
                    "fields": [
                        {"name": "f0", "type": "string"},
                        {"name": "f1", "type": "int"},
                        {"name": "f2", "type": "int"},
                        _opt("_CARDINALITY", "long"),
                    ],
                },
            },
        ),
        _opt("_EXTERNAL_PATH", "string"),
        _opt(
            "_GLOBAL_INDEX",
            {
                "type": "record",
                "name": "record__GLOBAL_INDEX",
                "namespace": _NAMESPACE,
                "fields": [
                    {"name": "_ROW_RANGE_START", "type": "long"},
                    {"name": "_ROW_RANGE_END", "type": "long"},
                    {"name": "_INDEX_FIELD_ID", "type": "int"},
                    _opt("_EXTRA_FIELD_IDS", {"type": "array", "items": "int"}),
                    _opt("_INDEX_META", "bytes"),
                    _opt("_SOURCE_META", "bytes"),
                ],
            },
        ),
    ],
}
