"""Paimon's system tables (`t$snapshots`, `t$files`, ...) as Arrow tables, read without Spark.

What Paimon's own connectors show as `db.t$snapshots` & co., with Paimon's column names, order and
types (`columns`), so SQL about a table's health (`SELECT partition, count(*) FROM t$files GROUP BY
partition`) runs here as it does on Paimon. The Spark source (`jobs/source`) serves
`spark.read.format("paimon").load("db.t$files")` from these functions; Python users call them directly.

Interface:
- `SYSTEM_TABLES`: the names supported.
- `system_table_schema(table, name) -> pa.Schema`
- `system_table(table, name, snapshot_id=None, tag=None) -> pa.Table`: the whole table (for `$files`
  of a large table prefer the batches).
- `system_table_batches(table, name, snapshot_id=None, tag=None) -> Iterator[pa.RecordBatch]`: the
  same rows as record batches; `$files` yields one batch per manifest, so neither the driver nor a
  caller ever holds every file of a large table.
- `time_travel(options) -> (snapshot_id, tag)`: Paimon's option names (`scan.snapshot-id`,
  `scan.tag-name`; also `snapshot-id`, `tag`) as the source receives them.

A name may carry a branch as Paimon spells it (`branch_b$files`: `$files` of branch `b`). `$files`,
`$manifests`, `$partitions` and `$buckets` describe one snapshot: the latest by default, or a
snapshot id or tag (time travel, as Paimon's `scan.snapshot-id` / `scan.tag-name` options do); the
others describe the branch's metadata now and refuse a snapshot or tag. A missing snapshot or tag is
`SnapshotNotFoundError`, an unknown name `UnknownSystemTableError` naming the known ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import pyarrow as pa

from paimon_format.errors import PaimonFormatError
from paimon_format.scan.snapshot_scan import resolve_snapshot
from paimon_format.snapshot import Snapshot
from paimon_format.system_tables.columns import FILES, SCHEMAS_BY_NAME
from paimon_format.system_tables.file_tables import (
    buckets_table,
    files_batches,
    manifests_table,
    partitions_table,
)
from paimon_format.system_tables.metadata_tables import (
    branches_table,
    consumers_table,
    options_table,
    schemas_table,
    snapshots_table,
    tags_table,
)
from paimon_format.table import Table

__all__ = [
    "SYSTEM_TABLES",
    "UnknownSystemTableError",
    "system_table",
    "system_table_batches",
    "system_table_schema",
    "time_travel",
]

SYSTEM_TABLES: tuple[str, ...] = tuple(SCHEMAS_BY_NAME)
_OF_A_SNAPSHOT = frozenset({"files", "manifests", "partitions", "buckets"})
_BRANCH_PREFIX = "branch_"

_METADATA_TABLES: dict[str, Callable[[Table], pa.Table]] = {
    "snapshots": snapshots_table,
    "schemas": schemas_table,
    "options": options_table,
    "tags": tags_table,
    "branches": branches_table,
    "consumers": consumers_table,
}
_SNAPSHOT_TABLES: dict[str, Callable[[Table, Snapshot | None], pa.Table]] = {
    "manifests": manifests_table,
    "partitions": partitions_table,
    "buckets": buckets_table,
}


class UnknownSystemTableError(PaimonFormatError, ValueError):
    """A system-table name this library does not serve, or time travel on one that has none."""


def _resolve(table: Table, name: str) -> tuple[Table, str]:
    """(the table or branch handle, the bare system-table name) of `files`, `$files`, `branch_b$files`."""
    text = name.strip().lstrip("$")
    if text.lower().startswith(_BRANCH_PREFIX) and "$" in text:
        branch, _, text = text[len(_BRANCH_PREFIX) :].partition("$")
        table = table.for_branch(branch)
    bare = text.lower()
    if bare not in SCHEMAS_BY_NAME:
        raise UnknownSystemTableError(
            f"{table.path}: no system table {name!r}; known: {', '.join('$' + n for n in SYSTEM_TABLES)}"
        )
    return table, bare


def system_table_schema(table: Table, name: str) -> pa.Schema:
    """The Arrow schema of system table `name` (the same for every table: Paimon's columns)."""
    return SCHEMAS_BY_NAME[_resolve(table, name)[1]]


def _snapshot(table: Table, bare: str, snapshot_id: int | None, tag: str | None) -> Snapshot | None:
    if bare not in _OF_A_SNAPSHOT:
        if snapshot_id is not None or tag is not None:
            raise UnknownSystemTableError(
                f"{table.path}: ${bare} describes the table's metadata now; a snapshot id or tag applies "
                f"only to {', '.join('$' + n for n in sorted(_OF_A_SNAPSHOT))}"
            )
        return None
    table.schema  # noqa: B018 - a directory without a schema is not a table: say so, not "empty"
    return resolve_snapshot(table, snapshot_id, tag)


def system_table_batches(
    table: Table, name: str, snapshot_id: int | None = None, tag: str | None = None
) -> Iterator[pa.RecordBatch]:
    """System table `name` of `table` as record batches (`$files`: one per manifest with live files)."""
    table, bare = _resolve(table, name)
    snapshot = _snapshot(table, bare, snapshot_id, tag)
    if bare == "files":
        yield from files_batches(table, snapshot)
        return
    yield from system_table(table, bare, snapshot_id, tag).to_batches()


def system_table(table: Table, name: str, snapshot_id: int | None = None, tag: str | None = None) -> pa.Table:
    """System table `name` of `table`, whole."""
    table, bare = _resolve(table, name)
    if bare in _METADATA_TABLES:
        _snapshot(table, bare, snapshot_id, tag)
        table.schema  # noqa: B018 - a directory without a schema is not a table: say so, not "empty"
        return _METADATA_TABLES[bare](table)
    snapshot = _snapshot(table, bare, snapshot_id, tag)
    if bare == "files":
        return pa.Table.from_batches(list(files_batches(table, snapshot)), schema=FILES)
    return _SNAPSHOT_TABLES[bare](table, snapshot)


_SNAPSHOT_OPTIONS = ("scan.snapshot-id", "snapshot-id", "snapshot_id")
_TAG_OPTIONS = ("scan.tag-name", "tag", "tag-name")


def time_travel(options: Mapping[str, str]) -> tuple[int | None, str | None]:
    """(snapshot id, tag) from string options as Paimon names them; `ValueError` naming the option
    when a snapshot id is not a number or both are given."""
    lowered = {key.lower(): value for key, value in options.items() if value not in (None, "")}
    snapshot_id: int | None = None
    tag: str | None = None
    for key in _SNAPSHOT_OPTIONS:
        if key in lowered:
            text = str(lowered[key]).strip()
            if not text.isdigit():
                raise ValueError(f"option {key!r} must be a snapshot id (a positive integer), got {text!r}")
            snapshot_id = int(text)
    for key in _TAG_OPTIONS:
        if key in lowered:
            tag = str(lowered[key])
    if snapshot_id is not None and tag is not None:
        raise ValueError("options name both a snapshot id and a tag: give one")
    return snapshot_id, tag
