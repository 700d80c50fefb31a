"""Partition specs written by people (`{dt: "2024-05-14", hr: 1}`) turned into BinaryRow bytes.

Users name partitions by their values as text; the table compares partitions as BinaryRow bytes.
Values are parsed by the column's type, and the default partition name stands for null.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from paimon_format.errors import PaimonFormatError
from paimon_format.model.binary_row import serialize_row
from paimon_format.model.schema import TableSchema
from paimon_format.model.types import DataType


class PartitionSpecError(PaimonFormatError, ValueError):
    """A partition spec that does not fit the table's partition keys."""


def parse_partition_value(value: Any, data_type: DataType, default_name: str) -> Any:
    """A Python value of the column's type from a YAML scalar or text."""
    if value is None or value == default_name:
        return None
    if not isinstance(value, str):
        if isinstance(value, (dt.date, int, float, bool, Decimal)):
            return value
        raise PartitionSpecError(f"unsupported partition value {value!r}")
    root = data_type.root
    try:
        if root in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
            return int(value)
        if root in ("FLOAT", "DOUBLE"):
            return float(value)
        if root == "BOOLEAN":
            if value.lower() not in ("true", "false"):
                raise ValueError("expected true or false")
            return value.lower() == "true"
        if root == "DECIMAL":
            return Decimal(value)
        if root == "DATE":
            return int(value) if value.lstrip("-").isdigit() else dt.date.fromisoformat(value)
        if root in ("TIMESTAMP", "TIMESTAMP_LTZ"):
            return dt.datetime.fromisoformat(value.replace(" ", "T"))
        if root in ("CHAR", "VARCHAR"):
            return value
    except (ValueError, InvalidOperation) as error:
        raise PartitionSpecError(f"{value!r} is not a {data_type}: {error}") from None
    raise PartitionSpecError(f"partition columns of type {data_type} are not supported in specs")


def partition_bytes(spec: Mapping[str, Any], schema: TableSchema) -> bytes:
    """BinaryRow bytes of a full partition spec (every partition key given, nothing else)."""
    keys = list(schema.partition_keys)
    unknown = [k for k in spec if k not in keys]
    missing = [k for k in keys if k not in spec]
    if unknown or missing:
        problems = []
        if unknown:
            problems.append(f"not partition keys: {', '.join(map(str, unknown))}")
        if missing:
            problems.append(f"missing keys: {', '.join(missing)}")
        raise PartitionSpecError(
            f"partition spec {dict(spec)} does not fit partition keys {keys} ({'; '.join(problems)})"
        )
    default_name = schema.options.get("partition.default-name", "__DEFAULT_PARTITION__")
    types = schema.partition_types()
    values = [parse_partition_value(spec[k], t, default_name) for k, t in zip(keys, types, strict=True)]
    try:
        return serialize_row(values, types)
    except ValueError as error:
        raise PartitionSpecError(f"partition spec {dict(spec)}: {error}") from None


@dataclass(frozen=True)
class PartitionStats:
    """What maintenance needs to know about one partition's live files, without the files themselves.

    Jobs aggregate manifests into one of these per partition on the executors, so the driver holds
    partitions, never files. `last_file_creation` is naive local wall-clock time, as Paimon stores it.
    """

    partition: bytes
    file_count: int
    file_bytes: int
    row_count: int
    last_file_creation: dt.datetime | None = None
