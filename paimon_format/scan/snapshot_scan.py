"""What a snapshot contains, and what a table still needs.

Two questions every job asks:
- which data files are live in a snapshot (readers see exactly these), and
- which files does the table still reference anywhere (maintenance must never delete those).

Both are answered from metadata only. The functions here read whole snapshots in one process; the
Spark jobs use the per-manifest building blocks (`manifest_names`, `entry_relpaths`, ...) to spread
the same work over executors.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from paimon_format.errors import InvalidTableStateError, MissingFileError, SnapshotNotFoundError
from paimon_format.manifest.entries import (
    ADD,
    DELETE,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    read_index_manifest,
    read_manifest,
    read_manifest_list,
)
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table


def resolve_snapshot(table: Table, snapshot_id: int | None = None, tag: str | None = None) -> Snapshot | None:
    """The snapshot a user asked for: an id, a tag, or (neither) the latest; None for an empty table."""
    if snapshot_id is not None and tag is not None:
        raise ValueError("give a snapshot id or a tag, not both")
    if tag is not None:
        return table.tag_manager.tag(tag)
    if snapshot_id is not None:
        return table.snapshot_manager.snapshot(snapshot_id)
    return table.snapshot_manager.latest()


# -- manifests of a snapshot ------------------------------------------------------------------


def read_list(table: Table, list_name: str | None) -> list[ManifestFileMeta]:
    if not list_name:
        return []
    return read_manifest_list(table.file_io, table.manifest_path(list_name))


def data_manifests(table: Table, snapshot: Snapshot) -> list[ManifestFileMeta]:
    """The data manifests of a snapshot in reading order: its base list, then its delta list."""
    return read_list(table, snapshot.base_manifest_list) + read_list(table, snapshot.delta_manifest_list)


def changelog_manifests(table: Table, snapshot: Snapshot) -> list[ManifestFileMeta]:
    return read_list(table, snapshot.changelog_manifest_list)


def index_entries(table: Table, snapshot: Snapshot) -> list[IndexManifestEntry]:
    """The index files of a snapshot (hash index, deletion vectors, ...): its index manifest lists all."""
    if not snapshot.index_manifest:
        return []
    entries = read_index_manifest(table.file_io, table.manifest_path(snapshot.index_manifest))
    return [entry for entry in entries if entry.kind == ADD]


def read_entries(table: Table, manifests: Iterable[ManifestFileMeta]) -> Iterator[ManifestEntry]:
    for meta in manifests:
        yield from read_manifest(table.file_io, table.manifest_path(meta.file_name))


# -- what a long-lived changelog needs ----------------------------------------------------------

COMPACT_FILE_SOURCE = 1  # DataFileMeta.file_source: 0 = APPEND, 1 = COMPACT, None (old files) = APPEND


@dataclass(frozen=True)
class ChangelogReads:
    """The metadata a long-lived changelog (`changelog/changelog-<id>`) keeps, as Paimon keeps it.

    A streaming reader of the changelog opens its changelog manifest list (produced changelog) or,
    when the table produces none (`changelog-producer` = none), its delta manifest list: the
    changelog *is* the delta, i.e. the files the delta ADDed from appends (compaction output is not
    changelog). Paimon also keeps the base manifest list and manifests of such a changelog (they are
    not read, but its ExpireChangelogImpl deletes them later). Index manifests and statistics are
    not kept: snapshot expiry deletes them.
    """

    lists: list[str]  # manifest list names
    read: list[ManifestFileMeta]  # manifests whose entries name needed files
    named: list[ManifestFileMeta]  # manifests kept as files only (the base)
    appended_only: frozenset[str]  # of `read`: only entries of append-origin files are needed


def changelog_reads(table: Table, changelog: Snapshot) -> ChangelogReads:
    """Read the lists a changelog needs (strictly, except the unread base list; see ChangelogReads)."""
    lists: list[str] = []
    read: list[ManifestFileMeta] = []
    named: list[ManifestFileMeta] = []
    appended: set[str] = set()
    if changelog.changelog_manifest_list:
        lists.append(changelog.changelog_manifest_list)
        read.extend(read_list(table, changelog.changelog_manifest_list))
    if table.options.changelog_producer == "none":
        if changelog.delta_manifest_list:
            lists.append(changelog.delta_manifest_list)
            delta = read_list(table, changelog.delta_manifest_list)
            read.extend(delta)
            appended.update(meta.file_name for meta in delta)
        if changelog.base_manifest_list:
            try:
                named.extend(read_list(table, changelog.base_manifest_list))
                lists.append(changelog.base_manifest_list)
            except MissingFileError:
                pass  # not read by anyone: a changelog from a producing table may lack it
    return ChangelogReads(lists, read, named, frozenset(appended))


def changelog_needs_entry(entry: ManifestEntry, appended_only: bool) -> bool:
    """Whether a changelog needs the file of one entry of one of its `read` manifests.

    Produced changelog: its ADDed files. A delta read as changelog (no producer): every file of
    append origin it names, ADD or DELETE: an OVERWRITE's deleted files are the "before" rows a
    `streaming-read-overwrite` reader opens, and Paimon's snapshot expiry keeps every append-origin
    file of a decoupled delta until its changelog expires. Compaction output is never changelog.
    """
    if not appended_only:
        return entry.kind == ADD
    return entry.file.file_source != COMPACT_FILE_SOURCE


# -- merging ADD and DELETE entries -----------------------------------------------------------


class EntryMerger:
    """Applies entries in order: a DELETE cancels the ADD with the same identifier.

    Entries are ManifestEntry models or `manifest_raw.RawEntry` (anything with `kind`,
    `identifier()` and `describe()`).

    Paimon's rule: each file is added once and deleted once. An ADD whose identifier is already
    known (live or pending delete) is an error. A DELETE with no known ADD is kept, because its ADD
    may live in an earlier manifest that this merge does not see (partial merges during manifest
    compaction); a full scan treats any such leftover as corruption.
    """

    def __init__(self, source: str = "") -> None:
        self._entries: dict[tuple, ManifestEntry] = {}
        self._source = source

    def add(self, entry: ManifestEntry) -> None:
        identifier = entry.identifier()
        if entry.kind == ADD:
            if identifier in self._entries:
                raise InvalidTableStateError(
                    f"{self._source}: trying to add {entry.describe()} which is already added"
                )
            self._entries[identifier] = entry
        elif entry.kind == DELETE:
            if identifier in self._entries:
                del self._entries[identifier]
            else:
                self._entries[identifier] = entry
        else:
            raise InvalidTableStateError(f"{self._source}: unknown entry kind {entry.kind}")

    def add_all(self, entries: Iterable[ManifestEntry]) -> EntryMerger:
        for entry in entries:
            self.add(entry)
        return self

    def merged(self) -> list[ManifestEntry]:
        """ADD entries still live and DELETE entries whose ADD was not seen, in first-seen order."""
        return list(self._entries.values())

    def live(self) -> list[ManifestEntry]:
        """The live ADD entries; a DELETE without its ADD means the metadata is broken."""
        dangling = [e for e in self._entries.values() if e.kind == DELETE]
        if dangling:
            first = dangling[0]
            raise InvalidTableStateError(
                f"{self._source}: trying to delete {first.describe()} which is not previously added"
                + (f", and {len(dangling) - 1} more" if len(dangling) > 1 else "")
            )
        return list(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)


def merge_entries(
    entries: Iterable[ManifestEntry], keep_unmatched_deletes: bool = False
) -> list[ManifestEntry]:
    merger = EntryMerger().add_all(entries)
    return merger.merged() if keep_unmatched_deletes else merger.live()


def live_entries(table: Table, snapshot: Snapshot) -> list[ManifestEntry]:
    """The data files a reader of `snapshot` reads (ADD entries after cancellation)."""
    merger = EntryMerger(f"{table.path} snapshot {snapshot.id}")
    return merger.add_all(read_entries(table, data_manifests(table, snapshot))).live()


def changelog_entries(table: Table, snapshot: Snapshot) -> list[ManifestEntry]:
    return [e for e in read_entries(table, changelog_manifests(table, snapshot)) if e.kind == ADD]


# -- everything a table still references ------------------------------------------------------


@dataclass(frozen=True)
class SnapshotSource:
    """Where a snapshot-like metadata object comes from (for messages and for branch roots)."""

    table: Table
    kind: str  # "snapshot", "tag", "changelog"
    name: str
    snapshot: Snapshot

    @property
    def needs_changelog(self) -> bool:
        """Whether this root keeps its snapshot's changelog (list, manifests, files); see
        `keeps_changelog`. A long-lived changelog's needs are `changelog_reads`."""
        return self.kind == "snapshot" and keeps_changelog(self.table, self.snapshot)


def keeps_changelog(table: Table, snapshot: Snapshot) -> bool:
    """Whether a retained *snapshot* of `table` (switched to its branch) keeps its changelog.

    What Paimon's Java code keeps: a snapshot's changelog lives as long as the snapshot (or, decoupled,
    its long-lived changelog). Tags never keep it: `SnapshotDeletion` deletes the changelog list and
    files of an expiring snapshot even when a tag holds it (the skipping set of its manifest cleanup
    has only the base and delta lists of tagged snapshots, and `TagDeletion` never touches changelog).
    A branch created from a tag starts with a copy of that tag (same id, same changelog list): that
    copy has no changelog of its own either, the main branch's expiry may already have deleted it.
    """
    if table.branch == "main" or not snapshot.changelog_manifest_list:
        return True
    return not any(
        tag.id == snapshot.id and tag.changelog_manifest_list == snapshot.changelog_manifest_list
        for tag in table.tag_manager.tags().values()
    )


def snapshot_sources(table: Table) -> list[SnapshotSource]:
    """Every snapshot, tag and long-lived changelog of every branch: the roots of what a table needs.

    Reading fails loudly: a snapshot that is listed but unreadable aborts the caller, because a
    missing root would make its files look unreferenced.
    """
    sources: list[SnapshotSource] = []
    branches = [table] + [table.for_branch(name) for name in table.branch_manager.branch_names()]
    for branch_table in branches:
        manager = branch_table.snapshot_manager
        for snapshot_id in manager.snapshot_ids():
            try:
                snapshot = manager.snapshot(snapshot_id)
            except SnapshotNotFoundError:
                # Expired between listing and reading by a concurrent expiry: it needs nothing anymore.
                continue
            sources.append(SnapshotSource(branch_table, "snapshot", str(snapshot_id), snapshot))
        for tag_name, tag_snapshot in branch_table.tag_manager.tags().items():
            sources.append(SnapshotSource(branch_table, "tag", tag_name, tag_snapshot))
        for changelog_id in manager.changelog_ids():
            sources.append(
                SnapshotSource(branch_table, "changelog", str(changelog_id), manager.changelog(changelog_id))
            )
    return sources


def snapshot_metadata_files(snapshot: Snapshot, changelog: bool = True) -> list[str]:
    """Table-relative paths of the metadata files a snapshot names directly (without its changelog
    manifest list when not `changelog`: a tag's, see `keeps_changelog`)."""
    names = [
        snapshot.base_manifest_list,
        snapshot.delta_manifest_list,
        snapshot.changelog_manifest_list if changelog else None,
        snapshot.index_manifest,
    ]
    paths = [f"manifest/{name}" for name in names if name]
    if snapshot.statistics:
        paths.append(f"statistics/{snapshot.statistics}")
    return paths


def manifest_names(table: Table, snapshot: Snapshot, changelog: bool = True) -> list[str]:
    """The data (and, when `changelog`, changelog) manifest files of a snapshot (reads its lists)."""
    metas = data_manifests(table, snapshot) + (changelog_manifests(table, snapshot) if changelog else [])
    return [meta.file_name for meta in metas]


def index_file_relpaths(entry: IndexManifestEntry) -> list[str]:
    if entry.external_path:
        return []
    return [f"index/{entry.file_name}"]


def referenced_files(table: Table) -> set[str]:
    """Every table-relative path any snapshot, tag, branch or changelog still needs.

    Includes schemas, snapshot, tag and changelog files themselves (not the LATEST/EARLIEST hints),
    manifest lists, manifests, index manifests, index files, statistics, data files with their
    extra files, and changelog files. A long-lived changelog needs only what its streaming readers
    open (`changelog_reads`); a tag needs no changelog (`keeps_changelog`); manifests count whole.
    Single-process; the orphan-file job computes the same set on executors.
    """
    referenced: set[str] = set()
    for branch_table in [table] + [table.for_branch(n) for n in table.branch_manager.branch_names()]:
        prefix = "" if branch_table.branch == "main" else f"branch/branch-{branch_table.branch}/"
        for schema_id in branch_table.schema_manager.list_ids():
            referenced.add(f"{prefix}schema/schema-{schema_id}")
        for snapshot_id in branch_table.snapshot_manager.snapshot_ids():
            referenced.add(f"{prefix}snapshot/snapshot-{snapshot_id}")
        for tag_name in branch_table.tag_manager.tag_names():
            referenced.add(f"{prefix}tag/tag-{tag_name}")
        for changelog_id in branch_table.snapshot_manager.changelog_ids():
            referenced.add(f"{prefix}changelog/changelog-{changelog_id}")
    seen_manifests: set[str] = set()
    seen_index_manifests: set[str] = set()
    for source in snapshot_sources(table):
        snapshot = source.snapshot
        if source.kind == "changelog":
            reads = changelog_reads(source.table, snapshot)
            referenced.update(f"manifest/{name}" for name in reads.lists)
            referenced.update(f"manifest/{meta.file_name}" for meta in reads.named)
            manifests = reads.read
        else:
            with_changelog = source.needs_changelog
            referenced.update(snapshot_metadata_files(snapshot, with_changelog))
            manifests = data_manifests(source.table, snapshot)
            if with_changelog:
                manifests += changelog_manifests(source.table, snapshot)
        for meta in manifests:
            if meta.file_name in seen_manifests:
                continue
            seen_manifests.add(meta.file_name)
            referenced.add(f"manifest/{meta.file_name}")
            for entry in read_manifest(table.file_io, table.manifest_path(meta.file_name)):
                referenced.update(table.entry_relpaths(entry))
        if source.kind == "changelog":
            continue  # snapshot expiry deleted the index files of the changelog's snapshot
        if snapshot.index_manifest and snapshot.index_manifest not in seen_index_manifests:
            seen_index_manifests.add(snapshot.index_manifest)
            for index_entry in index_entries(source.table, snapshot):
                referenced.update(index_file_relpaths(index_entry))
    return referenced
