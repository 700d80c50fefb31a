"""What `df.write.format("paimon").option(...)` asks for, as the write job's `WriteSettings`.

Spark hands a Python data source only strings, and the `overwrite` flag of `.mode()`. The names are
Paimon's where Paimon has one:

- `primary-key`, `partition` (comma-separated columns) and every other option not listed below:
  the table to create when it is missing (`bucket`, `merge-engine`, ...), as Paimon's own `primary-key`
  and `partition` table options define keys. Given for an existing table, keys or a `bucket` that
  differ from the table's are refused (the table is never changed by a write).
- `partitionOverwriteMode` = `dynamic` (Spark's per-write option; `dynamic-partition-overwrite` =
  `true` as Paimon's Flink writer names it): an overwrite replaces only the partitions written.
  Spark's session conf `spark.sql.sources.partitionOverwriteMode` never reaches a Python data
  source, so the option is the way to ask.
- `overwrite-partition` = `dt=2024-01-01` (`k=v` pairs joined by `,`; several partitions joined by
  `;`): an overwrite replaces exactly these partitions (static partition overwrite).
- Where the table is: `path` / `warehouse` / `branch` / storage options (`jobs.source.location`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobs.source.location import SourceOptionError
from jobs.writing.settings import WriteSettings

# Options that say where the table is or how this write runs: never a new table's options.
# (The read options of `jobs.source` are Paimon table options too and could be given by mistake
# on a write: `snapshot-id`, `tag` and `timestamp` make no sense in a new table, so they are refused.)
_SOURCE_KEYS = {"path", "table", "warehouse", "branch", "storage_options"}
_WRITE_KEYS = {"partitionoverwritemode", "dynamic-partition-overwrite", "overwrite-partition"}
_KEY_KEYS = {"primary-key", "partition"}
_READ_ONLY_KEYS = {"snapshot-id", "tag", "timestamp", "scan.snapshot-id", "scan.tag-name"}


def write_settings(options: Mapping[str, str], root: str, name: str, overwrite: bool) -> WriteSettings:
    """The write `options` ask for on the table at `root` (`name`: how messages call it)."""
    lowered = {key.lower(): str(value) for key, value in options.items()}
    scope, partitions = _overwrite_scope(lowered, overwrite)
    table_options: dict[str, Any] = {}
    for key, value in lowered.items():
        if key in _READ_ONLY_KEYS:
            raise SourceOptionError(f"option {key!r} is for reads; a write always writes the latest snapshot")
        if key in _SOURCE_KEYS or key in _WRITE_KEYS or key in _KEY_KEYS or key.startswith("storage."):
            continue
        table_options[key] = value
    return WriteSettings(
        warehouse=root,
        table=name,
        mode="overwrite" if overwrite else "append",
        partition_keys=_columns(lowered, "partition"),
        primary_keys=_columns(lowered, "primary-key"),
        options=table_options or None,
        overwrite_scope=scope,
        overwrite_partitions=partitions,
        strict_create=True,
    )


def _columns(options: Mapping[str, str], key: str) -> list[str] | None:
    """A comma-separated column list option (None when not given)."""
    if key not in options:
        return None
    columns = [column.strip() for column in options[key].split(",") if column.strip()]
    if len(set(columns)) != len(columns):
        raise SourceOptionError(f"option {key!r} names a column twice: {options[key]!r}")
    return columns


def _overwrite_scope(options: Mapping[str, str], overwrite: bool) -> tuple[str, list[dict[str, Any]]]:
    """(the write job's `overwrite_scope`, its `partitions`) of an overwrite; append asks for none."""
    mode = options.get("partitionoverwritemode", "static").strip().lower()
    if mode not in ("static", "dynamic"):
        raise SourceOptionError(f"option 'partitionOverwriteMode' must be static or dynamic, got {mode!r}")
    flag = options.get("dynamic-partition-overwrite", "false").strip().lower()
    if flag not in ("true", "false"):
        raise SourceOptionError(f"option 'dynamic-partition-overwrite' must be true or false, got {flag!r}")
    dynamic = mode == "dynamic" or flag == "true"
    static = options.get("overwrite-partition")
    if not overwrite:
        if static is not None or dynamic:
            given = "overwrite-partition" if static is not None else "partitionOverwriteMode"
            raise SourceOptionError(f"option {given!r} needs mode('overwrite'), the write is an append")
        return "touched", []
    if static is not None:
        if dynamic:
            raise SourceOptionError("give 'overwrite-partition' or a dynamic partition overwrite, not both")
        return "partitions", _partition_specs(static)
    return ("touched" if dynamic else "table"), []


def _partition_specs(text: str) -> list[dict[str, Any]]:
    """`k=v,k2=v2;k=v3,...` -> one {key: value} per partition."""
    specs = []
    for part in text.split(";"):
        if not part.strip():
            continue
        spec: dict[str, Any] = {}
        for pair in part.split(","):
            key, equals, value = pair.partition("=")
            if not equals or not key.strip():
                raise SourceOptionError(
                    f"option 'overwrite-partition': {pair.strip()!r} is not key=value (in {text!r})"
                )
            spec[key.strip()] = value.strip()
        specs.append(spec)
    if not specs:
        raise SourceOptionError("option 'overwrite-partition' names no partition")
    return specs
