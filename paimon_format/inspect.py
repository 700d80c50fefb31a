"""Describe a table without Spark: its schema, its snapshots, and the live files of one snapshot.

Used by `python -m paimon_format inspect`, so a user can look at what a job did (or is about to
work on) with nothing but Python.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from paimon_format.consumers import ConsumerManager
from paimon_format.model.options import CoreOptions
from paimon_format.scan.snapshot_scan import live_entries, resolve_snapshot
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
        "consumers": _consumers(table),
        "snapshot": None if chosen is None else chosen.id,
        "tag": tag,
        "files": files,
        "totals": {
            "files": len(files),
            "bytes": sum(f["size"] for f in files),
            "rows": sum(f["rows"] for f in files),
        },
    }


def _consumers(table: Table) -> list[dict[str, Any]]:
    """The branch's streaming consumers: the snapshot each reads next (expiry keeps it) and when
    its file was last written (`consumer.expiration-time` expires it by that)."""
    manager = ConsumerManager(table.file_io, table.path, table.branch)
    times = manager.modification_times()
    return [
        {
            "id": consumer_id,
            "next_snapshot": next_snapshot,
            "modified": dt.datetime.fromtimestamp(times.get(consumer_id, 0) / 1000, dt.UTC).isoformat(),
        }
        for consumer_id, next_snapshot in manager.consumers().items()
    ]


# Upper bounds (bytes) of the file-size histogram; the last bucket is open.
_MIB = 1024 * 1024
SIZE_BUCKETS: tuple[tuple[str, float], ...] = (
    ("< 1 MiB", 1 * _MIB),
    ("1-16 MiB", 16 * _MIB),
    ("16-64 MiB", 64 * _MIB),
    ("64-128 MiB", 128 * _MIB),
    (">= 128 MiB", float("inf")),
)


def files_per_partition(table: Table, files: list[dict[str, Any]]) -> dict[str, Any]:
    """Per partition: files, bytes, rows and small files; and a size histogram over all files.

    A file is small when it is under half the table's `target-file-size` (what a compaction would
    merge); many small files in a partition say at a glance that the table needs compaction.
    """
    target = CoreOptions(dict(table.schema.options)).target_file_size(bool(table.schema.primary_keys))
    small_below = target // 2
    partitions: dict[str, dict[str, int]] = {}
    histogram = {label: 0 for label, _ in SIZE_BUCKETS}
    for f in files:
        summary = partitions.setdefault(f["partition"], {"files": 0, "bytes": 0, "rows": 0, "small_files": 0})
        summary["files"] += 1
        summary["bytes"] += f["size"]
        summary["rows"] += f["rows"]
        summary["small_files"] += f["size"] < small_below
        histogram[next(label for label, bound in SIZE_BUCKETS if f["size"] < bound)] += 1
    return {
        "target_file_size": target,
        "small_file_below": small_below,
        "partitions": [{"partition": name, **partitions[name]} for name in sorted(partitions)],
        "size_histogram": histogram,
        "small_files": sum(p["small_files"] for p in partitions.values()),
    }


def render_files_per_partition(summary: dict[str, Any]) -> str:
    """The partition summary and the histogram as text, with a bar per histogram bucket."""
    lines = [
        f"files per partition ({len(summary['partitions'])} partitions; small = under "
        f"{summary['small_file_below']:,} bytes, half of target-file-size)",
        f"  {'partition':<30} {'files':>7} {'small':>7} {'rows':>12} {'bytes':>14} {'avg bytes':>12}",
    ]
    for p in summary["partitions"]:
        average = p["bytes"] // p["files"] if p["files"] else 0
        lines.append(
            f"  {p['partition'] or '-':<30} {p['files']:>7} {p['small_files']:>7} {p['rows']:>12} "
            f"{p['bytes']:>14} {average:>12}"
        )
    lines.append("file sizes")
    widest = max(summary["size_histogram"].values(), default=0) or 1
    for label, count in summary["size_histogram"].items():
        lines.append(f"  {label:>10} {count:>8}  {'#' * round(40 * count / widest)}")
    return "\n".join(lines)


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
    for consumer in description.get("consumers", []):
        lines.append(
            f"consumer  {consumer['id']}: next snapshot {consumer['next_snapshot']} "
            f"(written {consumer['modified']})"
        )
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
    if "files" not in description:  # replaced by the files-per-partition summary
        return "\n".join(lines)
    lines.append(f"  {'partition':<30} {'bucket':>6} {'level':>5} {'rows':>10} {'bytes':>10}  file")
    for f in description["files"]:
        lines.append(
            f"  {f['partition'] or '-':<30} {f['bucket']:>6} {f['level']:>5} {f['rows']:>10} "
            f"{f['size']:>10}  {f['file']}"
        )
    return "\n".join(lines)
