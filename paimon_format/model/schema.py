"""Table schemas: the `schema/schema-<id>` JSON files (spec §2) and the manager that reads/creates them.

A schema file is the root of a table: without `schema-0` a directory is not a Paimon table, and
every data file records the schema id it was written with. We write exactly what Java's
`SchemaSerializer` writes (Jackson pretty printer, Java's key order, `version: 3`) so Java, pypaimon
and paimon-rust read our tables, and we read every shape they (and older Paimon versions) write.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from paimon_format._listing import numbered_ids
from paimon_format.errors import (
    CorruptFileError,
    InvalidTableStateError,
    MissingFileError,
    PaimonFormatError,
    TableNotFoundError,
)
from paimon_format.model.json import jackson_json, load_json_object
from paimon_format.model.options import (
    BUCKET,
    FILE_FORMAT,
    CoreOptions,
    options_to_strings,
)
from paimon_format.model.type_parsing import parse_field
from paimon_format.model.types import DataField, DataType, assign_field_ids

if TYPE_CHECKING:
    from paimon_format.storage.fileio import FileIO

log = logging.getLogger(__name__)

CURRENT_VERSION = 3
PAIMON_07_VERSION = 1
PAIMON_08_VERSION = 2

SCHEMA_PREFIX = "schema-"
_SCHEMA_FILE_RE = re.compile(r"^schema-(\d+)$")

# Complex types cannot be keys (Java SchemaValidation.validateOnlyContainPrimitiveType).
_NON_KEY_ROOTS = frozenset({"ARRAY", "MAP", "MULTISET", "ROW", "VECTOR"})


class InvalidSchemaError(PaimonFormatError, ValueError):
    """A schema asked for at table creation breaks one of Paimon's rules; the message names it."""


# -- TableSchema ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSchema:
    """One version of a table's schema (`schema/schema-<id>`).

    `options` holds only explicitly set options, all strings; use `core_options()` for effective
    values. `highest_field_id` is the largest field id ever handed out, nested fields included, so
    later schema changes never reuse an id of a dropped column.
    """

    id: int
    fields: tuple[DataField, ...]
    partition_keys: tuple[str, ...]
    primary_keys: tuple[str, ...]
    options: dict[str, str]
    comment: str | None
    highest_field_id: int
    time_millis: int
    version: int = CURRENT_VERSION

    def __post_init__(self) -> None:
        # Accept lists from callers but keep the value semantics of tuples.
        object.__setattr__(self, "fields", tuple(self.fields))
        object.__setattr__(self, "partition_keys", tuple(self.partition_keys))
        object.__setattr__(self, "primary_keys", tuple(self.primary_keys))
        object.__setattr__(self, "options", dict(self.options))

    # -- JSON --------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON object in Java's key order; `comment` is left out when null, as Java does."""
        result: dict[str, Any] = {
            "version": self.version,
            "id": self.id,
            "fields": [f.to_json() for f in self.fields],
            "highestFieldId": self.highest_field_id,
            "partitionKeys": list(self.partition_keys),
            "primaryKeys": list(self.primary_keys),
            "options": dict(self.options),
        }
        if self.comment is not None:
            result["comment"] = self.comment
        result["timeMillis"] = self.time_millis
        return result

    def to_json(self) -> str:
        return jackson_json(self.to_dict())

    @staticmethod
    def from_json(text: str | bytes, path: str = "?") -> TableSchema:
        """Parse a schema file, applying Java's defaults for older versions.

        Missing `version` means 1 (Paimon 0.7). Version <= 1 without `bucket` means bucket=1 (before
        0.8 the default was one bucket); version <= 2 without `file.format` means `orc` (the default
        until 0.8). The returned schema keeps the stored version, so rewriting it is not an upgrade.
        Bad JSON, a missing required key or a wrongly typed value -> `CorruptFileError(path, ...)`.
        """
        return TableSchema.from_dict(load_json_object(text, path), path)

    @staticmethod
    def from_dict(data: Mapping[str, Any], path: str = "?") -> TableSchema:
        try:
            version = _get_int(data, "version", path, default=PAIMON_07_VERSION)
            schema_id = _get_int(data, "id", path)
            raw_fields = _require(data, "fields", path)
            if not isinstance(raw_fields, list):
                raise CorruptFileError(path, "'fields' must be a JSON array")
            fields = tuple(parse_field(f) for f in raw_fields)
            highest_field_id = _get_int(data, "highestFieldId", path)
            partition_keys = _get_str_list(data, "partitionKeys", path)
            primary_keys = _get_str_list(data, "primaryKeys", path)
            options = _get_options(data, path)
            comment = data.get("comment")
            if comment is not None and not isinstance(comment, str):
                raise CorruptFileError(path, "'comment' must be a string or null")
            time_millis = _get_int(data, "timeMillis", path, default=0)
        except CorruptFileError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, PaimonFormatError) as error:
            # What types.py raises for an unknown or malformed type.
            raise CorruptFileError(path, f"invalid schema: {error}") from None
        if version <= PAIMON_07_VERSION and BUCKET not in options:
            options[BUCKET] = "1"
        if version <= PAIMON_08_VERSION and FILE_FORMAT not in options:
            options[FILE_FORMAT] = "orc"
        match = _SCHEMA_FILE_RE.match(path.rstrip("/").rsplit("/", 1)[-1])
        if match and int(match.group(1)) != schema_id:
            raise CorruptFileError(path, f"schema id {schema_id} does not match the file name")
        return TableSchema(
            id=schema_id,
            fields=fields,
            partition_keys=partition_keys,
            primary_keys=primary_keys,
            options=options,
            comment=comment,
            highest_field_id=highest_field_id,
            time_millis=time_millis,
            version=version,
        )

    # -- accessors ---------------------------------------------------------------------------------

    def field(self, name: str) -> DataField:
        for candidate in self.fields:
            if candidate.name == name:
                return candidate
        raise KeyError(f"schema {self.id} has no column {name!r}; columns: {', '.join(self.field_names())}")

    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def logical_row_type(self) -> list[DataField]:
        """The table's columns in order (Java `logicalRowType().getFields()`)."""
        return list(self.fields)

    def partition_types(self) -> list[DataType]:
        return [self.field(name).type for name in self.partition_keys]

    def primary_key_types(self) -> list[DataType]:
        return [self.field(name).type for name in self.primary_keys]

    def trimmed_primary_keys(self) -> list[str]:
        """Primary keys without partition keys: the key columns stored in data files.

        Java refuses a primary key made only of partition keys (one row per partition).
        """
        if not self.primary_keys:
            return []
        trimmed = [pk for pk in self.primary_keys if pk not in self.partition_keys]
        if not trimmed:
            raise InvalidTableStateError(
                f"schema {self.id}: primary key {list(self.primary_keys)} should not be the same as the "
                f"partition keys {list(self.partition_keys)}, that would allow one record per partition"
            )
        return trimmed

    def cross_partition_update(self) -> bool:
        """True for a PK table whose key lacks some partition key (rows may move between partitions)."""
        if not self.primary_keys or not self.partition_keys:
            return False
        return not set(self.partition_keys).issubset(self.primary_keys)

    def bucket_keys(self) -> list[str]:
        """`bucket-key` if set, else the trimmed primary key, else (append table) all columns."""
        explicit = CoreOptions(self.options).bucket_key
        if explicit:
            return explicit
        return self.trimmed_primary_keys() or self.field_names()

    def core_options(self) -> CoreOptions:
        return CoreOptions(self.options)

    def same_definition(self, other: TableSchema) -> bool:
        """Same columns, keys, options and comment: what makes re-creating an existing table a no-op.

        Id, version and creation time are bookkeeping, not definition.
        """
        return (self.fields, self.partition_keys, self.primary_keys, self.options, self.comment) == (
            other.fields,
            other.partition_keys,
            other.primary_keys,
            other.options,
            other.comment,
        )


def _require(data: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in data:
        raise CorruptFileError(path, f"missing required key '{key}'")
    return data[key]


def _get_int(data: Mapping[str, Any], key: str, path: str, default: int | None = None) -> int:
    value = data.get(key) if default is not None else _require(data, key, path)
    if value is None and default is not None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise CorruptFileError(path, f"'{key}' must be an integer, found {value!r}")
    return value


def _get_str_list(data: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    value = _require(data, key, path)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise CorruptFileError(path, f"'{key}' must be an array of strings, found {value!r}")
    return tuple(value)


def _get_options(data: Mapping[str, Any], path: str) -> dict[str, str]:
    value = _require(data, "options", path)
    if not isinstance(value, dict):
        raise CorruptFileError(path, f"'options' must be a JSON object, found {value!r}")
    options: dict[str, str] = {}
    for key, raw in value.items():
        # Java reads each value with asText(): numbers and booleans become their text.
        if isinstance(raw, str):
            options[key] = raw
        elif isinstance(raw, bool):
            options[key] = "true" if raw else "false"
        elif isinstance(raw, (int, Decimal)):
            options[key] = str(raw)
        else:
            raise CorruptFileError(path, f"option '{key}' must be a string, found {raw!r}")
    return options


# -- creating schemas -------------------------------------------------------------------------------


def assign_ids(columns: Sequence[tuple[str, DataType, str | None]]) -> tuple[tuple[DataField, ...], int]:
    """Fields with Paimon's id layout and the highest id used (-1 for no columns).

    `a INT, b ROW<x INT, y STRING>, c INT` -> a=0, b=1, x=2, y=3, c=4; the numbering itself (Java's
    order for rows nested in rows) lives in `types.assign_field_ids`.
    """
    return assign_field_ids(list(columns))


def _normalise_columns(
    columns: Sequence[tuple[str, DataType] | tuple[str, DataType, str | None] | DataField],
) -> list[tuple[str, DataType, str | None]]:
    result = []
    for column in columns:
        if isinstance(column, DataField):
            result.append((column.name, column.type, column.description))
        elif isinstance(column, tuple) and len(column) in (2, 3):
            name, data_type = column[0], column[1]
            description = column[2] if len(column) == 3 else None
            if not isinstance(name, str) or not name:
                raise InvalidSchemaError(f"column names must be non-empty strings, got {name!r}")
            if not isinstance(data_type, DataType):
                raise InvalidSchemaError(f"column {name!r}: type must be a DataType, got {data_type!r}")
            result.append((name, data_type, description))
        else:
            raise InvalidSchemaError(
                f"a column must be (name, type[, description]) or a DataField, got {column!r}"
            )
    return result


def _duplicates(names: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    repeated: set[str] = set()
    for name in names:
        (repeated if name in seen else seen).add(name)
    return sorted(repeated)


def new_table_schema(
    fields: Sequence[tuple[str, DataType] | tuple[str, DataType, str | None] | DataField],
    partition_keys: Sequence[str] = (),
    primary_keys: Sequence[str] = (),
    options: Mapping[str, Any] | None = None,
    comment: str | None = None,
) -> TableSchema:
    """A schema-0 for a new table, normalised and validated the way Java's catalog does it.

    - field ids assigned by `assign_ids` (nested ROW fields included in `highestFieldId`);
    - primary-key columns made NOT NULL (unless `primary-key.nullable=true`);
    - option values converted to strings (`True` -> 'true');
    - Java's rules checked up front, so we never write a table Java would refuse to open:
      keys exist and are unique; keys are not complex types; the primary key is not made only of
      partition keys; bucket is -1, -2 (primary-key tables only) or > 0; a fixed-bucket table needs
      its primary key to cover all partition keys (otherwise it is a cross-partition-update table,
      which Java supports only with bucket=-1) and, without a primary key, a `bucket-key`;
      `bucket-key` columns exist, are not partition keys and are part of the primary key;
      `changelog-producer` only on primary-key tables; `sequence.field` columns exist.
    Violations raise `InvalidSchemaError` (or `InvalidOptionError` for an unparsable option).
    """
    columns = _normalise_columns(fields)
    if not columns:
        raise InvalidSchemaError("a table needs at least one column")
    partition_keys = tuple(partition_keys)
    primary_keys = tuple(primary_keys)
    string_options = options_to_strings(options)
    core = CoreOptions(string_options)
    core.validate()

    names = [name for name, _, _ in columns]
    if duplicated := _duplicates(names):
        raise InvalidSchemaError(f"duplicate column names: {duplicated}")
    for label, keys in (("partition key", partition_keys), ("primary key", primary_keys)):
        if duplicated := _duplicates(keys):
            raise InvalidSchemaError(f"{label}s {list(keys)} contain duplicates: {duplicated}")
        missing = [k for k in keys if k not in names]
        if missing:
            raise InvalidSchemaError(f"{label} columns {missing} are not columns of the table {names}")
    types_by_name = {name: data_type for name, data_type, _ in columns}
    for label, keys in (("partition key", partition_keys), ("primary key", primary_keys)):
        for key in keys:
            if types_by_name[key].root in _NON_KEY_ROOTS:
                raise InvalidSchemaError(
                    f"{label} column {key!r} has type {types_by_name[key].root}, not allowed in keys"
                )
    if primary_keys and partition_keys and set(primary_keys) <= set(partition_keys):
        raise InvalidSchemaError(
            f"primary key {list(primary_keys)} should not be the same as the partition keys "
            f"{list(partition_keys)}: that would allow only one record per partition"
        )
    _validate_bucket(core, names, partition_keys, primary_keys)
    if not primary_keys and core.changelog_producer != "none":
        raise InvalidSchemaError("changelog-producer can only be set on tables with a primary key")
    for sequence_field in core.sequence_field:
        if sequence_field not in names:
            raise InvalidSchemaError(f"sequence.field column {sequence_field!r} is not a column of the table")

    if primary_keys and not core.primary_key_nullable:
        columns = [
            (name, data_type.with_nullable(False) if name in primary_keys else data_type, description)
            for name, data_type, description in columns
        ]
    data_fields, highest_field_id = assign_ids(columns)
    return TableSchema(
        id=0,
        fields=data_fields,
        partition_keys=partition_keys,
        primary_keys=primary_keys,
        options=string_options,
        comment=comment,
        highest_field_id=highest_field_id,
        time_millis=int(time.time() * 1000),
        version=CURRENT_VERSION,
    )


def _validate_bucket(
    core: CoreOptions, names: list[str], partition_keys: tuple[str, ...], primary_keys: tuple[str, ...]
) -> None:
    bucket = core.bucket
    bucket_key = core.bucket_key
    if bucket == -1:
        if bucket_key is not None:
            raise InvalidSchemaError(
                "cannot define 'bucket-key' with bucket = -1 (dynamic/unaware bucket mode); "
                "remove 'bucket-key' or set a bucket number"
            )
    elif bucket == -2:
        if not primary_keys:
            raise InvalidSchemaError(
                "bucket = -2 (postpone bucket mode) is only for tables with a primary key"
            )
    elif bucket < 1:
        raise InvalidSchemaError(f"the number of buckets must be > 0, or -1 / -2; got bucket = {bucket}")
    else:
        if primary_keys and partition_keys and not set(partition_keys) <= set(primary_keys):
            raise InvalidSchemaError(
                f"primary key {list(primary_keys)} does not include all partition keys "
                f"{list(partition_keys)} (cross-partition update): that needs dynamic bucket mode "
                "(bucket = -1)"
            )
        if not primary_keys and not bucket_key:
            raise InvalidSchemaError(f"an append table with bucket = {bucket} needs a 'bucket-key' option")
    if bucket_key:
        missing = [k for k in bucket_key if k not in names]
        if missing:
            raise InvalidSchemaError(f"bucket-key columns {missing} are not columns of the table {names}")
        if duplicated := _duplicates(bucket_key):
            raise InvalidSchemaError(f"bucket-key {bucket_key} contains duplicates: {duplicated}")
        in_partition = [k for k in bucket_key if k in partition_keys]
        if in_partition:
            raise InvalidSchemaError(f"bucket-key columns {in_partition} must not be partition keys")
        if primary_keys and not set(bucket_key) <= set(primary_keys):
            raise InvalidSchemaError(
                f"bucket-key {bucket_key} must be part of the primary key {list(primary_keys)}"
            )


# -- SchemaManager ----------------------------------------------------------------------------------


class SchemaManager:
    """Reads and writes `schema/schema-<id>` of one branch (`<table>/branch/branch-X/schema` for X).

    New schema files are created with `FileIO.create_if_absent`, the same primitive that makes
    snapshot commits safe: two writers can never both create the same schema id.
    """

    def __init__(self, file_io: FileIO, table_path: str, branch: str = "main") -> None:
        self.file_io = file_io
        self.table_path = table_path.rstrip("/")
        self.branch = branch or "main"

    def __repr__(self) -> str:
        return f"SchemaManager({self.table_path!r}, branch={self.branch!r})"

    @property
    def branch_root(self) -> str:
        if self.branch == "main":
            return self.table_path
        return self.file_io.join(self.table_path, "branch", f"branch-{self.branch}")

    def schema_dir(self) -> str:
        return self.file_io.join(self.branch_root, "schema")

    def schema_path(self, schema_id: int) -> str:
        return self.file_io.join(self.schema_dir(), f"{SCHEMA_PREFIX}{schema_id}")

    def list_ids(self) -> list[int]:
        """Schema ids present, sorted; [] when the schema directory does not exist (no table yet).

        Only names matching `schema-<digits>` count, so temp files of an in-flight create are ignored.
        Any other listing failure propagates: an unreadable table must not look like a missing one.
        """
        return numbered_ids(self.file_io, self.schema_dir(), _SCHEMA_FILE_RE)

    def latest(self) -> TableSchema | None:
        """The schema with the highest id, or None when the table has no schema (does not exist)."""
        ids = self.list_ids()
        if not ids:
            return None
        return self.schema(ids[-1])

    def schema(self, schema_id: int) -> TableSchema:
        """Schema `schema_id`: `TableNotFoundError` naming the path if absent, `CorruptFileError` if bad."""
        path = self.schema_path(schema_id)
        try:
            data = self.file_io.read_bytes(path)
        except MissingFileError:
            raise TableNotFoundError(f"{path}: schema {schema_id} does not exist") from None
        return TableSchema.from_json(data, path)

    def create_table(self, schema: TableSchema) -> TableSchema:
        """Write `schema` as schema-0 unless it exists; idempotent for an identical definition.

        If schema-0 already exists with the same definition (ignoring id, version and creation time),
        the existing schema-0 is returned, so a retried job does not fail. A different existing schema raises
        `InvalidTableStateError`: silently adopting or overwriting it would corrupt the table.
        """
        if schema.id != 0:
            schema = dataclasses.replace(schema, id=0)
        path = self.schema_path(0)
        if self.file_io.create_if_absent(path, schema.to_json().encode("utf-8")):
            log.info("%s: created table (schema-0)", self.table_path)
            return schema
        existing = self.schema(0)
        if existing.same_definition(schema):
            log.info("%s: table already exists with the same schema", self.table_path)
            return existing
        raise InvalidTableStateError(
            f"{path}: table already exists with a different schema; refusing to overwrite it"
        )

    def commit_new_schema(self, schema: TableSchema) -> bool:
        """Create schema-<schema.id> (an ALTER); False if another writer created that id first.

        The id must be latest + 1 (0 for a table without schemas); a gap raises ValueError because
        readers expect dense ids.
        """
        ids = self.list_ids()
        expected = ids[-1] + 1 if ids else 0
        if schema.id < expected:
            return False
        if schema.id > expected:
            raise ValueError(
                f"{self.schema_dir()}: new schema id {schema.id} leaves a gap, expected {expected}"
            )
        return self.file_io.create_if_absent(self.schema_path(schema.id), schema.to_json().encode("utf-8"))
