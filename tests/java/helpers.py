"""Running our jobs in-process on Java-written tables, and checking what Java reads afterwards."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from jobs.__main__ import main
from paimon_format.scan.snapshot_scan import resolve_snapshot
from paimon_format.scan.split_read import read_split
from paimon_format.scan.splits import plan_splits
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.oracle import JavaPaimon, Row, sort_key
from tests.java.tables import JavaTable, read_ref, refs_of


def run_job(tmp_path: Path, operation: str, config: dict[str, Any], *extra: str) -> tuple[int, dict]:
    """Run one job in this process (the session's SparkSession); (exit code, run record)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    config_path = tmp_path / f"{operation}.yaml"
    config_path.write_text(yaml.safe_dump(config))
    record_path = tmp_path / f"{operation}.json"
    code = main([operation, "--config", str(config_path), "--output", str(record_path), *extra])
    return code, json.loads(record_path.read_text())


def java_reads(java: JavaPaimon, path: str) -> dict[tuple[str, str], list[Row]]:
    """Rows Java reads at every snapshot, tag and branch the table now has."""
    return {ref: read_ref(java, path, ref) for ref in refs_of(path)}


def assert_reads_kept(java: JavaPaimon, table: JavaTable, warehouse: str, changed: set | None = None) -> None:
    """Every snapshot, tag and branch still there reads as before (refs in `changed` are skipped: the
    caller checks those, and may have dropped them), and no other tag or branch disappeared."""
    now = java_reads(java, table.path(warehouse))
    for ref, rows in now.items():
        if changed and ref in changed:
            continue
        if ref in table.reads:
            assert rows == table.reads[ref], f"{table.name} {ref}: Java reads other rows than before"
    lost = {ref for ref in table.reads if ref[0] != "snapshot"} - set(now) - (changed or set())
    assert not lost, f"{table.name}: lost {lost}"


def files_under(root: str) -> set[str]:
    """Table-relative paths of every file under a table directory."""
    return {
        os.path.relpath(os.path.join(directory, name), root)
        for directory, _, names in os.walk(root)
        for name in names
    }


def lists_java_orphan_cleaning_loses(path: str, with_data_files: bool = False) -> set[str]:
    """Files Paimon 1.0's OrphanFilesClean wrongly takes for orphans (a Java bug: docs/safety.md).

    A tag (or a branch's copy of it) whose changelog manifest list Java's expiry deleted: Java's
    cleaning then collects nothing of that root, so it deletes the tag's base and delta lists and the
    manifests only they name, and the tag can no longer be read. Our jobs keep them. With
    `with_data_files`, also the data files only such roots name (once the snapshots that shared them
    have expired, Java's cleaning takes those too). Absolute paths.
    """
    from paimon_format.maintenance.references import snapshot_sources
    from paimon_format.manifest.codec import read_manifest, read_manifest_list
    from paimon_format.storage.fileio import FileIO
    from paimon_format.table import Table

    table = Table(FileIO.for_path(path), path)

    def manifest_files(manifests: list[str]) -> set[str]:
        if not with_data_files:
            return set()
        files = set()
        for name in manifests:
            for entry in read_manifest(table.file_io, table.manifest_path(name)):
                files.update(os.path.join(path, rel) for rel in table.entry_relpaths(entry))
        return files

    broken, healthy = set(), set()
    for source in snapshot_sources(table):
        snapshot = source.snapshot
        lists = [snapshot.base_manifest_list, snapshot.delta_manifest_list]
        missing = snapshot.changelog_manifest_list and not os.path.exists(
            os.path.join(path, "manifest", snapshot.changelog_manifest_list)
        )
        names, manifests = set(), []
        for name in filter(None, lists):
            if not os.path.exists(os.path.join(path, "manifest", name)):
                continue
            names.add(name)
            manifests += [m.file_name for m in read_manifest_list(table.file_io, table.manifest_path(name))]
        if not missing and snapshot.changelog_manifest_list:
            changelog = snapshot.changelog_manifest_list
            names.add(changelog)
            manifests += [
                m.file_name for m in read_manifest_list(table.file_io, table.manifest_path(changelog))
            ]
        names.update(manifests)
        found = {os.path.join(path, "manifest", name) for name in names} | manifest_files(manifests)
        (broken if missing else healthy).update(found)
    return broken - healthy


def our_read(path: str, ref: tuple[str, str]) -> list[Row]:
    """The rows our format layer reads at one ref, spelled as the oracle spells Java's."""
    kind, name = ref
    table = Table(FileIO.for_path(path), path)
    if kind == "branch":
        table = table.for_branch(name)
    snapshot = resolve_snapshot(
        table, snapshot_id=int(name) if kind == "snapshot" else None, tag=name if kind == "tag" else None
    )
    if snapshot is None:
        return []
    schema = table.schema_by_id(snapshot.schema_id)
    batches = [
        batch
        for split in plan_splits(table, snapshot)
        for batch in read_split(table, split, read_schema=schema)
    ]
    rows = pa.Table.from_batches(batches).to_pylist() if batches else []
    return sorted((_spelled(row) for row in rows), key=sort_key)


def _spelled(value: Any) -> Any:
    """pyarrow's Python values as the oracle's typed JSON decodes Java's (MAP as pairs, UTC instants)."""
    if isinstance(value, dict):
        return {k: _spelled(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_spelled(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_spelled(v) for v in value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc)
    return value
