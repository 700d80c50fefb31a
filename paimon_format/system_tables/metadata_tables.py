"""`$snapshots`, `$schemas`, `$options`, `$tags`, `$branches` and `$consumers`: small metadata files.

Each is one listing plus one small read per row, so each is built whole. Times are wall-clock times
in the reader's local time zone, as Paimon builds them (`LocalDateTime.ofInstant(..., systemDefault)`),
so a Spark session and Paimon's Java in the same zone show the same values. A snapshot, tag or
consumer removed between the listing and its read is skipped (it is legitimately gone); any other
failure to list or read raises, never an empty table.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from paimon_format._listing import basename, list_or_empty
from paimon_format.branches import BRANCH_PREFIX
from paimon_format.consumers import ConsumerManager
from paimon_format.system_tables.columns import BRANCHES, CONSUMERS, OPTIONS, SCHEMAS, SNAPSHOTS, TAGS
from paimon_format.system_tables.java_text import duration_text
from paimon_format.table import Table


def local_time(epoch_millis: int) -> dt.datetime:
    """Epoch milliseconds as a naive wall-clock time of this process's time zone (millisecond exact)."""
    seconds, millis = divmod(int(epoch_millis), 1000)
    return dt.datetime.fromtimestamp(seconds).replace(microsecond=millis * 1000)


def _table_of(schema: pa.Schema, rows: Sequence[Sequence[Any]]) -> pa.Table:
    values: dict[str, list[Any]] = {name: [] for name in schema.names}
    for row in rows:
        for name, value in zip(schema.names, row, strict=True):
            values[name].append(value)
    return pa.Table.from_pydict(values, schema=schema)


def snapshots_table(table: Table) -> pa.Table:
    """Every retained snapshot of the branch, oldest first."""
    manager = table.snapshot_manager
    rows = []
    for _, snapshot in manager.snapshots_present(manager.snapshot_ids()):
        if snapshot is None:
            continue
        rows.append(
            (
                snapshot.id,
                snapshot.schema_id,
                snapshot.commit_user,
                snapshot.commit_identifier,
                snapshot.commit_kind,
                local_time(snapshot.time_millis),
                snapshot.base_manifest_list,
                snapshot.delta_manifest_list,
                snapshot.changelog_manifest_list,
                snapshot.total_record_count,
                snapshot.delta_record_count,
                snapshot.changelog_record_count,
                snapshot.watermark,
                snapshot.next_row_id,
            )
        )
    return _table_of(SNAPSHOTS, rows)


def _flat_json(value: Any) -> str:
    """Jackson's compact JSON (`JsonSerdeUtil.toFlatJson`): no spaces, non-ASCII kept as is."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def schemas_table(table: Table) -> pa.Table:
    """Every schema version of the branch, by id."""
    rows = []
    for schema_id in table.schema_manager.list_ids():
        schema = table.schema_by_id(schema_id)
        rows.append(
            (
                schema.id,
                _flat_json([f.to_json() for f in schema.fields]),
                _flat_json(list(schema.partition_keys)),
                _flat_json(list(schema.primary_keys)),
                _flat_json(dict(schema.options)),
                schema.comment,
                local_time(schema.time_millis),
            )
        )
    return _table_of(SCHEMAS, rows)


def options_table(table: Table) -> pa.Table:
    """The options set on the latest schema (not the defaults), sorted by key."""
    latest = table.latest_schema()
    options = {} if latest is None else dict(latest.options)
    return _table_of(OPTIONS, sorted(options.items()))


def tags_table(table: Table) -> pa.Table:
    """Every tag of the branch, sorted by name (Paimon's order)."""
    rows = []
    for name, tag in sorted(table.tag_manager.tags().items()):
        retained = tag.tag_time_retained_ms
        rows.append(
            (
                name,
                tag.id,
                tag.schema_id,
                local_time(tag.time_millis),
                tag.total_record_count,
                tag.tag_create_time,
                None if retained is None else duration_text(retained),
            )
        )
    return _table_of(TAGS, rows)


def branches_table(table: Table) -> pa.Table:
    """Every branch but main, sorted by name; `create_time` is the modification time of its
    directory, as Paimon reads it. Object stores have no directories (a listing reports time 0):
    there the oldest file of the branch's `schema/` (written when the branch was made) stands in."""
    manager = table.branch_manager
    rows = []
    for status in list_or_empty(table.file_io, manager.branch_dir()):
        name = basename(status.path)
        if not status.is_dir or not name.startswith(BRANCH_PREFIX) or len(name) == len(BRANCH_PREFIX):
            continue
        created = status.modification_time_ms
        if created <= 0:
            schema_dir = table.file_io.join(manager.branch_path(name[len(BRANCH_PREFIX) :]), "schema")
            times = [s.modification_time_ms for s in list_or_empty(table.file_io, schema_dir) if not s.is_dir]
            created = min(times, default=0)
        rows.append((name[len(BRANCH_PREFIX) :], local_time(created)))
    rows.sort(key=lambda row: row[0])
    return _table_of(BRANCHES, rows)


def consumers_table(table: Table) -> pa.Table:
    """Every streaming consumer of the branch and the snapshot it reads next, sorted by id."""
    consumers = ConsumerManager(table.file_io, table.path, table.branch).consumers()
    return _table_of(CONSUMERS, sorted(consumers.items()))
