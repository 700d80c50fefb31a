"""Whether the input fits an existing table, and whether a `create:` block still describes it."""

from __future__ import annotations

import logging
from typing import Any

import pyarrow as pa

from jobs.runtime.errors import BadInputError
from jobs.runtime.report import RunRecord
from paimon_format.model.arrow_types import from_arrow
from paimon_format.model.schema import TableSchema
from paimon_format.model.types import DataType

_WIDENING = {
    "TINYINT": ("SMALLINT", "INT", "BIGINT"),
    "SMALLINT": ("INT", "BIGINT"),
    "INT": ("BIGINT",),
    "FLOAT": ("DOUBLE",),
    "CHAR": ("VARCHAR",),
}


def _fits(source: DataType, target: DataType) -> bool:
    """Whether values of `source` can be stored as `target` without loss (same type or a safe widening)."""
    if source.root == target.root:
        if source.root == "DECIMAL":
            return (source.scale == target.scale) and (source.precision or 0) <= (target.precision or 0)
        if source.root == "TIME":
            return (source.precision or 0) <= (target.precision or 0)
        # TIMESTAMP(p < 6): Spark has only microsecond timestamps, so a Java table's TIMESTAMP(3) takes
        # them cut to its precision, as Paimon's own Spark writer stores them. VARCHAR(n): a Spark
        # string, checked against n when the files are written (`writer.fit_string_lengths`).
        return True  # nested types: element types are checked by the cast when the files are written
    if source.root == "VARCHAR" and target.root == "CHAR":
        return True  # Spark has no CHAR: a string, checked and padded to the length when written
    return target.root in _WIDENING.get(source.root, ())


def check_compatible(arrow_schema: pa.Schema, schema: TableSchema, table: str) -> None:
    """An existing table takes the DataFrame only if every column matches or widens safely."""
    table_columns = {f.name: f.type for f in schema.fields}
    missing = [name for name in table_columns if name not in arrow_schema.names]
    extra = [name for name in arrow_schema.names if name not in table_columns]
    mismatched = []
    for arrow_field in arrow_schema:
        if arrow_field.name in table_columns:
            source = from_arrow(arrow_field.type, arrow_field.nullable)
            target = table_columns[arrow_field.name]
            if not _fits(source, target):
                mismatched.append(f"{arrow_field.name} ({source.sql()} -> table {target.sql()})")
    problems = []
    if missing:
        problems.append(f"missing columns: {', '.join(missing)}")
    if extra:
        problems.append(f"columns not in the table: {', '.join(extra)}")
    if mismatched:
        problems.append(f"incompatible types: {', '.join(mismatched)}")
    if problems:
        raise BadInputError(f"input does not match table {table}: {'; '.join(problems)}")


def check_create_matches(
    schema: TableSchema,
    table: str,
    partition_keys: list[str] | None,
    primary_keys: list[str] | None,
    options: dict[str, Any] | None,
    strict: bool,
    record: RunRecord,
    log: logging.Logger | logging.LoggerAdapter,
) -> None:
    """A `create:` block is used only for a new table; for an existing one, say where it differs.

    A user who changed the block expects the table to change; silently ignoring it hides that the
    table keeps its old keys and bucket count (recreating a table is a decision we never take).
    """
    differences = []
    if partition_keys is not None and list(partition_keys) != list(schema.partition_keys):
        differences.append(f"partition_keys {list(partition_keys)} (table: {list(schema.partition_keys)})")
    if primary_keys is not None and list(primary_keys) != list(schema.primary_keys):
        differences.append(f"primary_keys {list(primary_keys)} (table: {list(schema.primary_keys)})")
    if options and "bucket" in options and str(options["bucket"]) != schema.options.get("bucket", "-1"):
        differences.append(f"bucket {options['bucket']} (table: {schema.options.get('bucket', '-1')})")
    if not differences:
        return
    message = (
        f"create: differs from the existing table {table}: {'; '.join(differences)}; "
        "create: applies only to a new table"
    )
    if strict:
        raise BadInputError(f"{message} (strict_create: true)")
    record.details["create_mismatch"] = differences
    log.warning("%s; the table is written as it is", message)
