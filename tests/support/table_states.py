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
from paimon_format.data.writer import write_table_files
from paimon_format.maintenance.references import referenced_files
from paimon_format.model.schema import new_table_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table

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


def branch_from_t2(table: Table, name: str = "b") -> Table:
    """Branch `name` from tag t2 (pypaimon, as a user makes one), then on it: an append (ids 600-602),
    an overwrite of dt=2024-01-01 (replacing main's files there, which main keeps, and the append's
    file there, which only the branch's snapshot 3 has) and another append (660-662). The branch."""
    import pypaimon

    from paimon_format.model.binary_row import deserialize_row

    warehouse = table.path.rsplit("/", 2)[0]
    pypaimon.CatalogFactory.create({"warehouse": warehouse}).create_branch(IDENTIFIER, name, "t2")
    branch = Table(table.file_io, table.path, name)
    append_rows(branch, batch(600, 3))
    written = write_table_files(branch.file_io, branch.path, branch.schema, batch(650, 1, days=1), 9000)
    SnapshotCommit(branch).overwrite(
        [CommitMessage(partition, bucket, -1, files) for partition, bucket, files in written],
        partition_filter=lambda p: deserialize_row(p, branch.partition_types) == ["2024-01-01"],
    )
    append_rows(branch, batch(660, 3))
    return Table(table.file_io, table.path, name)


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


def needed_files(
    table: Table,
    expiring: frozenset[int] = frozenset(),
    expiring_branch: frozenset[tuple[str, int]] = frozenset(),
    expiring_changelogs: frozenset[int] = frozenset(),
) -> set[str]:
    """What readers of every retained snapshot, tag, changelog and branch open, plus the metadata
    files themselves: like `referenced_files`, but a data file only while it is live (a file a
    retained manifest names in a DELETE entry alone is gone for readers; expiry deletes it).

    `expiring`: main-branch snapshot ids an interrupted expiry was removing; they are no root (the
    expiry deletes their files before their snapshot files, as Paimon does, so a reader must not
    start from them) but their snapshot files still count as present. `expiring_changelogs`: the
    same for main's long-lived changelogs an interrupted changelog expiry was removing."""
    from paimon_format.maintenance.references import (
        index_file_relpaths,
        manifest_names,
        snapshot_metadata_files,
        snapshot_sources,
    )
    from paimon_format.scan.snapshot_scan import changelog_entries, index_entries, live_entries

    files: set[str] = set()
    for branch_table in [table] + [table.for_branch(n) for n in table.branch_manager.branch_names()]:
        prefix = "" if branch_table.branch == "main" else f"branch/branch-{branch_table.branch}/"
        manager = branch_table.snapshot_manager
        files |= {f"{prefix}schema/schema-{i}" for i in branch_table.schema_manager.list_ids()}
        files |= {f"{prefix}snapshot/snapshot-{i}" for i in manager.snapshot_ids()}
        files |= {f"{prefix}tag/tag-{name}" for name in branch_table.tag_manager.tag_names()}
        files |= {f"{prefix}changelog/changelog-{i}" for i in manager.changelog_ids()}
    for source in snapshot_sources(table):
        snapshot, branch_table = source.snapshot, source.table
        if source.kind == "snapshot" and branch_table.branch == "main" and snapshot.id in expiring:
            continue
        if source.kind == "snapshot" and (branch_table.branch, snapshot.id) in expiring_branch:
            continue  # likewise on a branch: (branch, snapshot id)
        main = branch_table.branch == "main"
        if source.kind == "changelog" and main and snapshot.id in expiring_changelogs:
            continue
        with_changelog = source.kind == "changelog" or source.needs_changelog  # tags keep none (Paimon)
        if source.kind == "changelog" and branch_table.options.changelog_producer != "none":
            # Paimon's decoupled expiry deletes a produced changelog's data lists (only its changelog
            # list is read): Java-written changelogs name base/delta lists that are gone
            files |= changelog_needs(branch_table, snapshot)
            continue
        files.update(snapshot_metadata_files(snapshot, with_changelog))
        files.update(f"manifest/{name}" for name in manifest_names(branch_table, snapshot, with_changelog))
        changelog = changelog_entries(branch_table, snapshot) if with_changelog else []
        for entry in live_entries(branch_table, snapshot) + changelog:
            files.update(table.entry_relpaths(entry))
        for index_entry in index_entries(branch_table, snapshot):
            files.update(index_file_relpaths(index_entry))
    return files


def changelog_needs(table: Table, changelog: Any) -> set[str]:
    """What a streaming reader of a long-lived changelog opens, and what Paimon keeps for it: an
    oracle written from Paimon's rules, independently of `paimon_format.scan.snapshot_scan` (which the
    jobs use).

    With a changelog producer: the changelog manifest list, its manifests and the files they ADD.
    Without (`changelog-producer` = none) the changelog is the delta: the delta and base lists,
    their manifests and the append-origin files the delta names, ADD or DELETE."""
    from paimon_format.manifest.codec import read_manifest, read_manifest_list
    from paimon_format.manifest.entries import ADD

    files: set[str] = set()

    def manifests_of(list_name: str) -> list[str]:
        files.add(f"manifest/{list_name}")
        names = [m.file_name for m in read_manifest_list(table.file_io, table.manifest_path(list_name))]
        files.update(f"manifest/{name}" for name in names)
        return names

    if changelog.changelog_manifest_list:
        for name in manifests_of(changelog.changelog_manifest_list):
            for entry in read_manifest(table.file_io, table.manifest_path(name)):
                if entry.kind == ADD:
                    files.update(table.entry_relpaths(entry))
    if table.options.changelog_producer == "none":
        manifests_of(changelog.base_manifest_list)
        for name in manifests_of(changelog.delta_manifest_list):
            for entry in read_manifest(table.file_io, table.manifest_path(name)):
                if entry.file.file_source != 1:  # append origin, ADD or DELETE (an overwrite's before)
                    files.update(table.entry_relpaths(entry))
    return files


def missing_needed(
    table: Table,
    expiring: frozenset[int] = frozenset(),
    expiring_branch: frozenset[tuple[str, int]] = frozenset(),
    expiring_changelogs: frozenset[int] = frozenset(),
) -> set[str]:
    """Files a reader needs that do not exist (must always be empty, also after an expiry)."""
    return needed_files(table, expiring, expiring_branch, expiring_changelogs) - listed_files(table)


def unreferenced(table: Table) -> set[str]:
    """Files no snapshot, tag, branch or changelog needs, apart from the hints: what
    remove-orphan-files clears."""
    return {p for p in listed_files(table) - referenced_files(table) if not _is_hint(p)}


def _is_hint(relative_path: str) -> bool:
    """snapshot/ and changelog/ LATEST / EARLIEST hints, of main or of a branch."""
    directory, _, name = relative_path.rpartition("/")
    return name in ("LATEST", "EARLIEST") and directory.rpartition("/")[2] in ("snapshot", "changelog")


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
    from tests.support.pypaimon_reads import pypaimon_rows

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
