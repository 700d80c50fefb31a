"""What the soak checks on a table: rows against the ledger, files, orphans, snapshot ids.

Checkpoints run while Java's writer and our jobs are paused, so every figure is exact: a file that a
snapshot, tag, branch, changelog or index names is missing only if something deleted it wrongly, and
a read's rows equal the ledger's or something was lost. Snapshot ids are watched all the time by
`SnapshotWatcher` (a thread reading each new snapshot file as it appears), because an overwrite is
only visible while it happens: the id is the same before and after, its content is not.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from paimon_format.maintenance.orphan_rules import DELETABLE, FileNaming, judge_file
from paimon_format.maintenance.references import (
    index_file_relpaths,
    referenced_files,
    snapshot_metadata_files,
    snapshot_sources,
)
from paimon_format.scan.snapshot_scan import (
    changelog_entries,
    changelog_manifests,
    data_manifests,
    index_entries,
    live_entries,
)
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from scripts.soak.ledger import Ledger

# How many of the newest snapshot files the watcher reads again on each poll to catch an overwrite.
REREAD_NEWEST = 8


@dataclass
class Findings:
    """What checks found; every count but the `*_checked` ones must be 0."""

    rows_checked: int = 0
    reads_checked: int = 0
    files_checked: int = 0
    rows_lost: int = 0
    rows_doubled: int = 0
    files_missing: int = 0
    old_orphans: int = 0
    tags_gone: int = 0  # deleted by expire-tags between listing and reading: not a failure
    problems: list[str] = field(default_factory=list)

    def add(self, other: Findings) -> None:
        for name in ("rows_checked", "reads_checked", "files_checked", "rows_lost", "rows_doubled"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("files_missing", "old_orphans", "tags_gone"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems.extend(other.problems)


class SnapshotWatcher(threading.Thread):
    """Reads every snapshot file of the tables as it appears; reports ids skipped or overwritten.

    A snapshot is identified by (commitUser, commitIdentifier, timeMillis, commitKind); the newest
    `REREAD_NEWEST` are read again on each poll, and all present ones at `recheck`.
    """

    def __init__(self, paths: dict[str, str], interval_s: float = 0.2) -> None:
        super().__init__(name="snapshot-watcher", daemon=True)
        self.paths = paths
        self.interval_s = interval_s
        self.seen: dict[str, dict[int, tuple[Any, ...]]] = {name: {} for name in paths}
        self.problems: list[str] = []
        self._stop_event = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.poll(reread_all=False)
            self._stop_event.wait(self.interval_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()

    def poll(self, reread_all: bool) -> None:
        with self._lock:
            for name, path in self.paths.items():
                self._poll_table(name, path, reread_all)

    def _poll_table(self, name: str, path: str, reread_all: bool) -> None:
        directory = os.path.join(path, "snapshot")
        try:
            ids = sorted(int(f[9:]) for f in os.listdir(directory) if f.startswith("snapshot-"))
        except FileNotFoundError:
            return
        seen = self.seen[name]
        newest = max(seen, default=0)
        for snapshot_id in ids:
            if snapshot_id in seen and not reread_all and snapshot_id <= newest - REREAD_NEWEST:
                continue
            identity = _identity(os.path.join(directory, f"snapshot-{snapshot_id}"))
            if identity is None:
                continue  # expired between listing and reading
            before = seen.setdefault(snapshot_id, identity)
            if before != identity:
                self.problems.append(f"{name}: snapshot {snapshot_id} overwritten: {before} then {identity}")
                seen[snapshot_id] = identity

    def skipped(self, name: str) -> list[int]:
        """Ids between the first and the newest seen that never existed."""
        seen = self.seen[name]
        if not seen:
            return []
        return [i for i in range(min(seen), max(seen) + 1) if i not in seen]


def _identity(path: str) -> tuple[Any, ...] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            snapshot = json.load(handle)
    except FileNotFoundError:
        return None
    keys = ("commitUser", "commitIdentifier", "timeMillis", "commitKind")
    return tuple(snapshot.get(key) for key in keys)


def snapshot_id_of_tag(path: str, tag: str) -> int | None:
    try:
        with open(os.path.join(path, "tag", f"tag-{tag}"), encoding="utf-8") as handle:
            return int(json.load(handle)["id"])
    except FileNotFoundError:
        return None


def tag_names(path: str) -> list[str]:
    try:
        return sorted(f[4:] for f in os.listdir(os.path.join(path, "tag")) if f.startswith("tag-"))
    except FileNotFoundError:
        return []


def branch_names(path: str) -> list[str]:
    try:
        return sorted(f[7:] for f in os.listdir(os.path.join(path, "branch")) if f.startswith("branch-"))
    except FileNotFoundError:
        return []


def latest_id(path: str, branch: str | None = None) -> int | None:
    metadata = path if branch is None else os.path.join(path, "branch", f"branch-{branch}")
    try:
        names = os.listdir(os.path.join(metadata, "snapshot"))
    except FileNotFoundError:
        return None
    return max((int(f[9:]) for f in names if f.startswith("snapshot-")), default=None)


def check_read(
    ledger: Ledger, name: str, what: str, snapshot_id: int, rows: list[dict[str, Any]], exact_marker: bool
) -> Findings:
    """One read (of the latest snapshot or a tag) against the ledger. `exact_marker`: the read is the
    latest while the writer is paused, so it must end with the last batch Java committed."""
    found = Findings(rows_checked=len(rows), reads_checked=1)
    marker = ledger.marker_of(rows)
    problem = ledger.bad_marker(marker)
    if exact_marker and marker != ledger.last_committed:
        problem = f"ends with batch {marker}, Java's last committed batch is {ledger.last_committed}"
    problem = problem or _order_problem(ledger, marker, snapshot_id)
    if problem:
        found.problems.append(f"{name} {what} (snapshot {snapshot_id}): {problem}")
    expected = ledger.expected(marker, snapshot_id, rows)
    actual = Counter(ledger.canonical(row) for row in rows)
    lost, doubled = expected - actual, actual - expected
    found.rows_lost, found.rows_doubled = sum(lost.values()), sum(doubled.values())
    if lost or doubled:
        found.problems.append(
            f"{name} {what} (snapshot {snapshot_id}, batch {marker}): {found.rows_lost} rows lost "
            f"(e.g. {sorted(lost, key=str)[:3]}), {found.rows_doubled} extra "
            f"(e.g. {sorted(doubled, key=str)[:3]})"
        )
    return found


def _order_problem(ledger: Ledger, marker: int, snapshot_id: int) -> str | None:
    """A snapshot ending with batch M lies after the latest id Java saw before committing M and
    before the latest id it saw after committing the next batch: anything else is a reverted or
    reordered snapshot."""
    committed = sorted(n for n, b in ledger.batches.items() if b.committed and b.latest_after is not None)
    before = [n for n in committed if n < marker]
    after = [n for n in committed if n > marker]
    if before and snapshot_id <= (low := ledger.batches[before[-1]].latest_after or 0):
        return f"ends with batch {marker} but is not after snapshot {low} (batch {before[-1]})"
    if after and snapshot_id >= (high := ledger.batches[after[0]].latest_after or 0):
        return (
            f"ends with batch {marker} but is not before snapshot {high} (batch {after[0]} committed by then)"
        )
    return None


def needed_files(table: Table) -> set[str]:
    """What a reader of each snapshot, tag and branch opens: its manifest lists and manifests, the
    live data files (ADD entries after cancellation, with their extra files), the index files (hash
    index, deletion vectors) and, where the snapshot keeps it, its changelog. Unlike
    `referenced_files` (what orphan cleaning keeps), not the files DELETE entries name: those are
    deleted by expiry once no retained root reads them, and still named by the delta manifest."""
    needed: set[str] = set()
    for source in snapshot_sources(table):
        if source.kind == "changelog":
            continue  # no long-lived changelogs in the soak's tables (changelog retention = snapshots')
        branch, snapshot = source.table, source.snapshot
        with_changelog = source.needs_changelog
        needed.update(snapshot_metadata_files(snapshot, with_changelog))
        manifests = data_manifests(branch, snapshot)
        entries = live_entries(branch, snapshot)
        if with_changelog:
            manifests += changelog_manifests(branch, snapshot)
            entries += changelog_entries(branch, snapshot)
        needed.update(f"manifest/{meta.file_name}" for meta in manifests)
        for entry in entries:
            needed.update(branch.entry_relpaths(entry))
        for index in index_entries(branch, snapshot):
            needed.update(index_file_relpaths(index))
    return needed


def check_files(name: str, path: str, orphan_cutoff_ms: int | None) -> Findings:
    """Every file a reader of the table's roots opens exists (`needed_files`); the unreferenced
    files remove-orphan-files may delete are all younger than `orphan_cutoff_ms` (its last run's
    start minus older_than)."""
    table = Table(FileIO.for_path(path), path)
    needed = needed_files(table)
    listed: dict[str, float] = {}
    for directory, _, files in os.walk(path):
        for file in files:
            full = os.path.join(directory, file)
            try:
                listed[os.path.relpath(full, path)] = os.stat(full).st_mtime * 1000
            except FileNotFoundError:
                continue
    found = Findings(files_checked=len(needed))
    missing = sorted(needed - listed.keys())
    found.files_missing = len(missing)
    if missing:
        found.problems.append(f"{name}: {len(missing)} referenced files missing, e.g. {missing[:3]}")
    if orphan_cutoff_ms is None:
        return found
    naming = FileNaming.of(table.schema.options)
    referenced = referenced_files(table)
    old = [
        rel
        for rel, mtime in listed.items()
        if rel not in referenced and mtime < orphan_cutoff_ms and judge_file(rel, naming).rule == DELETABLE
    ]
    found.old_orphans = len(old)
    if old:
        found.problems.append(
            f"{name}: {len(old)} orphans older than the cleaner's cutoff left, e.g. {old[:3]}"
        )
    return found


def now_ms() -> int:
    return int(time.time() * 1000)
