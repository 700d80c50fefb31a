"""Describe a table without Spark: its schema, its snapshots, and the live files of one snapshot.

Used by `python -m paimon_format inspect`, so a user can look at what a job did (or is about to
work on) with nothing but Python.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from paimon_format.scan import live_entries, resolve_snapshot
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table


def describe_table(table: Table, snapshot_id: int | None = None, tag: str | None = None) -> dict[str, Any]:
    """A JSON-ready description of the table and the chosen snapshot (default: the latest)."""
    schema = table.schema
    manager = table.snapshot_manager
    snapshots = [_snapshot_summary(manager.snapshot(i)) for i in manager.snapshot_ids()]
    chosen = resolve_snapshot(table, snapshot_id, tag)
    files = []
    if chosen is not None:
        for entry in live_entries(table, chosen):
            files.append(
                {
                    "partition": _partition_text(table, entry.partition),
                    "bucket": entry.bucket,
                    "level": entry.file.level,
                    "file": entry.file.file_name,
                    "size": entry.file.file_size,
                    "rows": entry.file.row_count,
                }
            )
    files.sort(key=lambda f: (f["partition"], f["bucket"], f["level"], f["file"]))
    return {
        "table": table.path,
        "schema": {
            "id": schema.id,
            "fields": [{"id": f.id, "name": f.name, "type": f.type.to_json()} for f in schema.fields],
            "partition_keys": list(schema.partition_keys),
            "primary_keys": list(schema.primary_keys),
            "options": dict(schema.options),
        },
        "snapshots": snapshots,
        "tags": table.tag_manager.tag_names(),
        "snapshot": None if chosen is None else chosen.id,
        "tag": tag,
        "files": files,
        "totals": {
            "files": len(files),
            "bytes": sum(f["size"] for f in files),
            "rows": sum(f["rows"] for f in files),
        },
    }


def _snapshot_summary(snapshot: Snapshot) -> dict[str, Any]:
    return {
        "id": snapshot.id,
        "kind": snapshot.commit_kind,
        "time": dt.datetime.fromtimestamp(snapshot.time_millis / 1000, tz=dt.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "schema_id": snapshot.schema_id,
        "total_records": snapshot.total_record_count,
        "delta_records": snapshot.delta_record_count,
    }


def _partition_text(table: Table, partition: bytes) -> str:
    if not table.schema.partition_keys:
        return ""
    spec = table.partition_spec(partition)
    return "/".join(f"{key}={value}" for key, value in spec.items())


def render_text(description: dict[str, Any]) -> str:
    """The description as a few aligned plain-text sections for a terminal."""
    lines = [f"table     {description['table']}"]
    schema = description["schema"]
    lines.append(f"schema    id {schema['id']}")
    for field in schema["fields"]:
        lines.append(f"  {field['id']:>4}  {field['name']:<24} {field['type']}")
    if schema["partition_keys"]:
        lines.append(f"partition keys  {', '.join(schema['partition_keys'])}")
    if schema["primary_keys"]:
        lines.append(f"primary keys    {', '.join(schema['primary_keys'])}")
    if schema["options"]:
        lines.append("options   " + ", ".join(f"{k}={v}" for k, v in sorted(schema["options"].items())))
    lines.append("")
    lines.append(f"snapshots ({len(description['snapshots'])})")
    lines.append(f"  {'id':>6}  {'kind':<10} {'time':<26} {'total rows':>12} {'delta rows':>12}")
    for snap in description["snapshots"]:
        lines.append(
            f"  {snap['id']:>6}  {snap['kind']:<10} {snap['time']:<26} "
            f"{snap['total_records']:>12} {snap['delta_records']:>12}"
        )
    if description["tags"]:
        lines.append("tags      " + ", ".join(description["tags"]))
    lines.append("")
    chosen = description["snapshot"]
    if chosen is None:
        lines.append("no snapshot yet: the table is empty")
        return "\n".join(lines)
    where = f"tag {description['tag']} (snapshot {chosen})" if description["tag"] else f"snapshot {chosen}"
    totals = description["totals"]
    lines.append(
        f"live files of {where}: {totals['files']} files, {totals['rows']} rows, {totals['bytes']} bytes"
    )
    lines.append(f"  {'partition':<30} {'bucket':>6} {'level':>5} {'rows':>10} {'bytes':>10}  file")
    for f in description["files"]:
        lines.append(
            f"  {f['partition'] or '-':<30} {f['bucket']:>6} {f['level']:>5} {f['rows']:>10} "
            f"{f['size']:>10}  {f['file']}"
        )
    return "\n".join(lines)
