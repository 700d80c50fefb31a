"""Real small tables and the checks the safety tests (bad input, crashes, races, S3) share.

A sample table is written without Spark (paimon_format's writer and SnapshotCommit), so each case can
start from a fresh copy in milliseconds; pypaimon then reads it as the oracle. The checks say what
"safe" means: every retained snapshot and tag reads, nothing referenced is missing, and the rows are
the ones an uninterrupted run produces.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.fileio import FileIO
from paimon_format.scan import referenced_files
from paimon_format.schema import new_table_schema
from paimon_format.table import Table
from paimon_format.types import parse_type
from paimon_format.writer import write_table_files

DATABASE = "db"
NAME = "t"
IDENTIFIER = f"{DATABASE}.{NAME}"
# Small manifests and no automatic merge: every commit adds a manifest, so compaction has work.
TABLE_OPTIONS = {"manifest.merge-min-count": "1000", "manifest.full-compaction-threshold-size": "1 gb"}


def table_root(warehouse: str) -> str:
    return f"{warehouse.rstrip('/')}/{DATABASE}.db/{NAME}"


def batch(first_id: int, count: int, days: int = 3) -> pa.Table:
    """Rows `first_id .. first_id+count-1` spread over `days` partitions."""
    ids = list(range(first_id, first_id + count))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "dt": [f"2024-01-0{1 + i % days}" for i in ids],
            "v": [f"v{i}" for i in ids],
        }
    )


def append_rows(table: Table, data: pa.Table, committer: SnapshotCommit | None = None) -> int:
    """Write and commit `data` as one APPEND snapshot; returns its id."""
    latest = table.snapshot_manager.latest()
    first_sequence = (latest.total_record_count if latest else 0) + 1000
    written = write_table_files(table.file_io, table.path, table.schema, data, first_sequence)
    messages = [CommitMessage(partition, bucket, -1, files) for partition, bucket, files in written]
    snapshot = (committer or SnapshotCommit(table)).append(messages)
    return snapshot.id


def build_sample_table(
    warehouse: str, commits: int = 4, rows_per_commit: int = 6, storage_options: dict | None = None
) -> Table:
    """A partitioned append table with `commits` snapshots and a tag on the second one."""
    root = table_root(warehouse)
    file_io = FileIO.for_path(root, storage_options)
    table = Table(file_io, root)
    schema = new_table_schema(
        [("id", parse_type("BIGINT")), ("dt", parse_type("STRING")), ("v", parse_type("STRING"))],
        partition_keys=["dt"],
        options=TABLE_OPTIONS,
    )
    table.schema_manager.create_table(schema)
    table.refresh()
    for i in range(commits):
        append_rows(table, batch(i * rows_per_commit, rows_per_commit))
    if commits >= 2:
        table.tag_manager.create_tag("t2", table.snapshot_manager.snapshot(2))
    return table


def copy_warehouse(template: str, target: str) -> str:
    shutil.copytree(template, target)
    return target


def open_table(warehouse: str, storage_options: dict | None = None) -> Table:
    return Table.open(warehouse, IDENTIFIER, storage_options)


def fingerprint(root: str) -> dict[str, str]:
    """Every file under a local directory -> sha256 of its bytes: equal fingerprints, untouched table."""
    found = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, root)] = hashlib.sha256(handle.read()).hexdigest()
    return found


def listed_files(table: Table) -> set[str]:
    """Table-relative paths of every file under the table root."""
    return {
        FileIO.relative_to(table.path, status.path)
        for status in table.file_io.list_files_recursive(table.path)
    }


def missing_referenced(table: Table) -> set[str]:
    """Referenced files that do not exist (must always be empty)."""
    return referenced_files(table) - listed_files(table)


def unreferenced(table: Table) -> set[str]:
    """Files no snapshot, tag or branch needs, apart from the hints: what remove-orphan-files clears."""
    hints = {"snapshot/LATEST", "snapshot/EARLIEST"}
    return {p for p in listed_files(table) - referenced_files(table) if p not in hints}


@dataclass
class TableView:
    """What readers see: rows (by pypaimon) at every snapshot and tag, and the snapshots' owners."""

    latest: int | None
    rows_by_snapshot: dict[int, list[dict[str, Any]]]
    rows_by_tag: dict[str, list[dict[str, Any]]]
    commits: list[tuple[str, int, str]]  # (commit user, identifier, kind) per snapshot id order

    @property
    def latest_rows(self) -> list[dict[str, Any]]:
        return self.rows_by_snapshot.get(self.latest, []) if self.latest else []


def view(warehouse: str, storage_options: dict | None = None) -> TableView:
    """Read every retained snapshot and tag with pypaimon (the oracle): any unreadable one raises."""
    from tests.pypaimon_reads import pypaimon_rows

    table = open_table(warehouse, storage_options)
    manager = table.snapshot_manager
    ids = manager.snapshot_ids()
    rows = {i: pypaimon_rows(warehouse, IDENTIFIER, i) for i in ids}
    tags = {}
    for name, tagged in table.tag_manager.tags().items():
        tags[name] = pypaimon_rows(warehouse, IDENTIFIER, tagged.id) if tagged.id in rows else None
        if tags[name] is None:  # the tagged snapshot itself expired: read the tag through the table
            tags[name] = _rows_at_tag(warehouse, name)
    commits = [
        (s.commit_user, s.commit_identifier, s.commit_kind) for s in (manager.snapshot(i) for i in ids)
    ]
    return TableView(manager.latest_id(), rows, tags, commits)


def _rows_at_tag(warehouse: str, tag: str) -> list[dict[str, Any]]:
    import pypaimon

    catalog = pypaimon.CatalogFactory.create({"warehouse": warehouse})
    table = catalog.get_table(IDENTIFIER).copy({"scan.tag-name": tag})
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits()).to_pylist()
    return sorted(rows, key=lambda row: [str(row[k]) for k in sorted(row)])


def row_ids(rows: list[dict[str, Any]]) -> list[int]:
    return sorted(row["id"] for row in rows)
