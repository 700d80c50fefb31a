"""What the soak checks on a table: rows against the ledger, files, orphans, snapshot ids.

Checkpoints run while Java's writer and our jobs are paused, so every figure is exact: a file that a
snapshot, tag, branch, changelog or index names is missing only if something deleted it wrongly, and
a read's rows equal the ledger's or something was lost. Snapshot ids are watched all the time by
`SnapshotWatcher` (a thread reading each new snapshot file as it appears), because an overwrite is
only visible while it happens: the id is the same before and after, its content is not.

Everything lists and reads through our FileIO, so the same checks run on local disk and on S3; the
rows come from a `Reader`: Java's (the local soak) or ours (`our_read`: paimon_format's split
planning and merge-on-read, the S3 soak). With several writers a read is split by `Ledger.owns`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from paimon_format.errors import MissingFileError, PaimonFormatError
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
    resolve_snapshot,
)
from paimon_format.scan.split_read import read_split
from paimon_format.scan.splits import plan_splits
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
    `reread` are read again on each poll, and all present ones at `recheck`. A poll that fails (a
    storage error the client's retries did not overcome) is counted in `poll_errors` and tried again
    at the next one: it can hide nothing, the next poll lists the directory again.
    """

    def __init__(
        self,
        paths: dict[str, str],
        interval_s: float = 0.2,
        storage_options: dict[str, Any] | None = None,
        reread: int = REREAD_NEWEST,
    ) -> None:
        super().__init__(name="snapshot-watcher", daemon=True)
        self.paths = paths
        self.interval_s = interval_s
        self.storage_options = storage_options
        self.reread = reread
        self.seen: dict[str, dict[int, tuple[Any, ...]]] = {name: {} for name in paths}
        self.problems: list[str] = []
        self.poll_errors = 0
        self._stop_event = threading.Event()
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.poll(reread_all=False)
            except PaimonFormatError:
                self.poll_errors += 1
            self._stop_event.wait(self.interval_s)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()

    def poll(self, reread_all: bool) -> None:
        with self._lock:
            for name, path in self.paths.items():
                self._poll_table(name, path, reread_all)

    def _poll_table(self, name: str, path: str, reread_all: bool) -> None:
        file_io = FileIO.for_path(path, self.storage_options)
        directory = f"{path}/snapshot"
        ids = sorted(int(f[9:]) for f in _names(file_io, directory) if f.startswith("snapshot-"))
        seen = self.seen[name]
        newest = max(seen, default=0)
        for snapshot_id in ids:
            if snapshot_id in seen and not reread_all and snapshot_id <= newest - self.reread:
                continue
            identity = _identity(file_io, f"{directory}/snapshot-{snapshot_id}")
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


def _names(file_io: FileIO, directory: str) -> list[str]:
    """The names in `directory` (files and subdirectories); none when it does not exist yet."""
    try:
        return [status.path.rstrip("/").rsplit("/", 1)[-1] for status in file_io.list_dir(directory)]
    except MissingFileError:
        return []


def _read_json(file_io: FileIO, path: str) -> dict[str, Any] | None:
    try:
        return json.loads(file_io.read_bytes(path))
    except MissingFileError:
        return None


def _identity(file_io: FileIO, path: str) -> tuple[Any, ...] | None:
    snapshot = _read_json(file_io, path)
    if snapshot is None:
        return None
    keys = ("commitUser", "commitIdentifier", "timeMillis", "commitKind")
    return tuple(snapshot.get(key) for key in keys)


def snapshot_id_of_tag(path: str, tag: str, storage_options: dict[str, Any] | None = None) -> int | None:
    tagged = _read_json(FileIO.for_path(path, storage_options), f"{path}/tag/tag-{tag}")
    return None if tagged is None else int(tagged["id"])


def tag_names(path: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    names = _names(FileIO.for_path(path, storage_options), f"{path}/tag")
    return sorted(f[4:] for f in names if f.startswith("tag-"))


def branch_names(path: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    names = _names(FileIO.for_path(path, storage_options), f"{path}/branch")
    return sorted(f[7:] for f in names if f.startswith("branch-"))


def latest_id(
    path: str, branch: str | None = None, storage_options: dict[str, Any] | None = None
) -> int | None:
    metadata = path if branch is None else f"{path}/branch/branch-{branch}"
    names = _names(FileIO.for_path(path, storage_options), f"{metadata}/snapshot")
    return max((int(f[9:]) for f in names if f.startswith("snapshot-")), default=None)


def our_read(
    path: str,
    storage_options: dict[str, Any] | None = None,
    snapshot_id: int | None = None,
    tag: str | None = None,
    branch: str | None = None,
) -> list[dict[str, Any]]:
    """Our own reader (paimon_format's split planning and merge-on-read) of a snapshot, a tag or a
    branch's latest, as rows; a snapshot or tag that does not exist raises."""
    table = Table(FileIO.for_path(path, storage_options), path)
    if branch is not None:
        table = table.for_branch(branch)
    snapshot = resolve_snapshot(table, snapshot_id, tag)
    if snapshot is None:
        return []
    schema = table.schema_by_id(snapshot.schema_id)
    rows: list[dict[str, Any]] = []
    for split in plan_splits(table, snapshot):
        for batch in read_split(table, split, read_schema=schema):
            rows.extend(batch.to_pylist())
    return rows


def check_reads(
    ledgers: list[Ledger], name: str, what: str, snapshot_id: int, rows: list[dict[str, Any]], exact: bool
) -> Findings:
    """One read against every writer's ledger: each writer's rows (`Ledger.owns`) against its own,
    and a row no writer owns counted as extra."""
    if len(ledgers) == 1:
        return check_read(ledgers[0], name, what, snapshot_id, rows, exact)
    found = Findings(reads_checked=1)
    strays = [row for row in rows if not any(ledger.owns(row) for ledger in ledgers)]
    for ledger in ledgers:
        own = [row for row in rows if ledger.owns(row)]
        part = check_read(ledger, name, f"{what} writer {ledger.writer}", snapshot_id, own, exact, rows)
        part.reads_checked = 0
        found.add(part)
    found.rows_checked += len(strays)
    found.rows_doubled += len(strays)
    if strays:
        found.problems.append(f"{name} {what} (snapshot {snapshot_id}): {len(strays)} rows of no writer")
    return found


def check_read(
    ledger: Ledger,
    name: str,
    what: str,
    snapshot_id: int,
    rows: list[dict[str, Any]],
    exact_marker: bool,
    all_rows: list[dict[str, Any]] | None = None,
) -> Findings:
    """One read (of the latest snapshot or a tag) against the ledger. `exact_marker`: the read is the
    latest while the writer is paused, so it must end with the last batch it committed. `all_rows`:
    the whole read when `rows` are one writer's share of it (which days a read holds is a property
    of the whole read)."""
    found = Findings(rows_checked=len(rows), reads_checked=1)
    marker = ledger.marker_of(rows)
    problem = ledger.bad_marker(marker)
    if exact_marker and marker != ledger.last_committed:
        problem = f"ends with batch {marker}, the writer's last committed batch is {ledger.last_committed}"
    problem = problem or _order_problem(ledger, marker, snapshot_id)
    if problem:
        found.problems.append(f"{name} {what} (snapshot {snapshot_id}): {problem}")
    every = rows if all_rows is None else all_rows
    torn = None if exact_marker else ledger.torn_batch(snapshot_id)
    if torn is not None:  # inside a batch's window on a table whose reads skip level 0
        if marker not in (torn - 1, torn):
            found.problems.append(
                f"{name} {what} (snapshot {snapshot_id}): ends with batch {marker} "
                f"inside batch {torn}'s window"
            )
        lost, doubled = ledger.torn_differences(torn, snapshot_id, rows, every)
    else:
        expected = ledger.expected(marker, snapshot_id, every)
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


# read(path, snapshot_id=None, tag=None, branch=None) -> rows: Java's (JavaPaimon.read) or ours (our_read)
Reader = Callable[..., list[dict[str, Any]]]


def check_table(
    read: Reader,
    ledgers: list[Ledger],
    name: str,
    path: str,
    seen_ids: Iterable[int],
    orphan_cutoff_ms: int | None,
    storage_options: dict[str, Any] | None = None,
) -> Findings:
    """One table at a checkpoint (writers held, no job running): the latest snapshot (it must end
    with each writer's last committed batch), every tag and branch, the retained snapshots among
    `seen_ids` (the final checkpoint passes them all), then the files (`check_files`)."""
    found = Findings()
    latest = latest_id(path, None, storage_options)
    if latest is None:
        found.problems.append(f"{name}: no snapshot")
        return found
    found.add(check_reads(ledgers, name, "latest", latest, read(path, snapshot_id=latest), True))
    for tag in tag_names(path, storage_options):
        tagged = snapshot_id_of_tag(path, tag, storage_options)
        try:
            rows = read(path, tag=tag)
        except Exception as error:  # noqa: BLE001 - Java's or our reader's error: judged right here
            if snapshot_id_of_tag(path, tag, storage_options) is None:
                found.tags_gone += 1
                continue
            found.problems.append(f"{name} tag {tag}: cannot read it: {error}")
            continue
        if tagged is not None:
            found.add(check_reads(ledgers, name, f"tag {tag}", tagged, rows, False))
    for branch in branch_names(path, storage_options):  # made from a tag, no commits of its own
        branch_latest = latest_id(path, branch, storage_options)
        if branch_latest is not None:
            rows = read(path, branch=branch)
            found.add(check_reads(ledgers, name, f"branch {branch}", branch_latest, rows, False))
    file_io = FileIO.for_path(path, storage_options)
    for snapshot_id in sorted(seen_ids):
        if file_io.file_exists(f"{path}/snapshot/snapshot-{snapshot_id}"):
            rows = read(path, snapshot_id=snapshot_id)
            found.add(check_reads(ledgers, name, "snapshot", snapshot_id, rows, False))
    found.add(check_files(name, path, orphan_cutoff_ms, storage_options))
    return found


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


def check_files(
    name: str, path: str, orphan_cutoff_ms: int | None, storage_options: dict[str, Any] | None = None
) -> Findings:
    """Every file a reader of the table's roots opens exists (`needed_files`); the unreferenced
    files remove-orphan-files may delete are all younger than `orphan_cutoff_ms` (its last run's
    start minus older_than). The listing is the one remove-orphan-files judges by (its modification
    times, to the store's precision)."""
    file_io = FileIO.for_path(path, storage_options)
    table = Table(file_io, path)
    needed = needed_files(table)
    listed = {
        FileIO.relative_to(path, status.path): status.modification_time_ms
        for status in file_io.list_files_recursive(path)
    }
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
