"""Avro data files (`file.format=avro`): Arrow rows -> an Avro container file via fastavro.

Paimon's Avro readers match columns by name and take nullable columns as `["null", T]` unions,
like manifests; logical types carry dates, timestamps and decimals.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import fastavro
import pyarrow as pa

from paimon_format.errors import PaimonFormatError
from paimon_format.manifest import avro_codec


def _avro_type(arrow_type: pa.DataType, name: str) -> Any:
    t = pa.types
    if t.is_boolean(arrow_type):
        return "boolean"
    if t.is_int8(arrow_type) or t.is_int16(arrow_type) or t.is_int32(arrow_type):
        return "int"
    if t.is_int64(arrow_type):
        return "long"
    if t.is_float32(arrow_type):
        return "float"
    if t.is_float64(arrow_type):
        return "double"
    if t.is_string(arrow_type) or t.is_large_string(arrow_type):
        return "string"
    if t.is_binary(arrow_type) or t.is_large_binary(arrow_type):
        return "bytes"
    if t.is_date32(arrow_type):
        return {"type": "int", "logicalType": "date"}
    if t.is_timestamp(arrow_type):
        logical = "timestamp-millis" if arrow_type.unit in ("s", "ms") else "timestamp-micros"
        if arrow_type.tz is None:
            logical = logical.replace("timestamp", "local-timestamp")
        return {"type": "long", "logicalType": logical}
    if t.is_decimal(arrow_type):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": arrow_type.precision,
            "scale": arrow_type.scale,
        }
    raise PaimonFormatError(f"column {name}: type {arrow_type} is not supported in Avro data files yet")


def avro_schema(schema: pa.Schema) -> dict[str, Any]:
    fields = []
    for f in schema:
        avro_type = _avro_type(f.type, f.name)
        fields.append(
            {
                "name": f.name,
                "type": ["null", avro_type] if f.nullable else avro_type,
                **({"default": None} if f.nullable else {}),
            }
        )
    return {
        "type": "record",
        "name": "record",
        "namespace": "org.apache.paimon.avro.generated",
        "fields": fields,
    }


def write_avro_data_file(out: BinaryIO, data: pa.Table, compression: str) -> None:
    schema = fastavro.parse_schema(avro_schema(data.schema))
    fastavro.writer(out, schema, data.to_pylist(), codec=avro_codec(compression))
