"""What a table still needs: the files every snapshot, tag, branch and long-lived changelog reaches.

Maintenance must never delete a file some root still reads, so every deletion job (expire-snapshots,
expire-tags, rollback, remove-orphan-files) asks the questions answered here, from metadata only:
- per root (one snapshot, tag or changelog: `root_references`, `chained_root_references`) and per
  manifest (`manifest_references`, `index_manifest_references`): small building blocks the Spark
  jobs run on executors, one root or manifest per call;
- for a whole table in one process (`referenced_files`): the same set, for tests and small tables.

Reading fails loudly: a root that is listed but unreadable aborts the caller, because a missing
root would make its files look unreferenced. A root that vanished between listing and reading was
expired concurrently and needs nothing anymore.

`referenced_files` keeps `FileIO.io_parallelism` reads in flight (`map_in_flight`): roots and
manifests are many small files, and on an object store each read waits a full request latency, so
reading them one after another is bound by latency, not by decoding.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from paimon_format.branches import MAIN_BRANCH
from paimon_format.errors import MissingFileError, SnapshotNotFoundError
from paimon_format.manifest.codec import gc_paused, iter_manifest_records, read_index_manifest
from paimon_format.manifest.entries import ADD, IndexManifestEntry, ManifestEntry, ManifestFileMeta
from paimon_format.scan.snapshot_scan import (
    changelog_manifests,
    data_manifests,
    index_entries,
    read_list,
)
from paimon_format.snapshot import Snapshot
from paimon_format.storage.in_flight import map_in_flight
from paimon_format.table import Table

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
    if table.branch == MAIN_BRANCH or not snapshot.changelog_manifest_list:
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
        # A snapshot expired between listing and reading by a concurrent expiry needs nothing anymore.
        for snapshot_id, snapshot in manager.snapshots_present(manager.snapshot_ids()):
            if snapshot is not None:
                sources.append(SnapshotSource(branch_table, "snapshot", str(snapshot_id), snapshot))
        for tag_name, tag_snapshot in branch_table.tag_manager.tags().items():
            sources.append(SnapshotSource(branch_table, "tag", tag_name, tag_snapshot))
        changelog_ids = manager.changelog_ids()
        changelogs = map_in_flight(manager.changelog, changelog_ids, table.file_io.io_parallelism)
        for changelog_id, changelog in zip(changelog_ids, changelogs, strict=True):
            sources.append(SnapshotSource(branch_table, "changelog", str(changelog_id), changelog))
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
    Single-process; the orphan-file job computes the same set on executors. Roots, then each
    distinct manifest, then each distinct index manifest are read with `io_parallelism` in flight.
    """
    referenced: set[str] = set()
    for branch in [table.branch, *table.branch_manager.branch_names()]:
        referenced.update(metadata_file_relpaths(table, branch)[0])
    parallelism = table.file_io.io_parallelism
    sources = snapshot_sources(table)
    manifests: dict[str, None] = {}  # distinct, in first-seen order
    index_roots: dict[str, SnapshotSource] = {}  # per index manifest, one root naming it
    for source, (files, metas) in zip(
        sources, map_in_flight(_source_needs, sources, parallelism), strict=True
    ):
        referenced.update(files)
        manifests.update(dict.fromkeys(meta.file_name for meta in metas))
        # a changelog needs no index files: snapshot expiry deleted those of the changelog's snapshot
        if source.kind != "changelog" and source.snapshot.index_manifest:
            index_roots.setdefault(source.snapshot.index_manifest, source)
    referenced.update(f"manifest/{name}" for name in manifests)
    for paths in map_in_flight(lambda name: manifest_references(table, name), manifests, parallelism):
        referenced.update(paths)
    for paths in map_in_flight(_index_needs, index_roots.values(), parallelism):
        referenced.update(paths)
    return referenced


def _index_needs(source: SnapshotSource) -> list[str]:
    """The index files a root's index manifest names (`referenced_files`)."""
    return [
        path for entry in index_entries(source.table, source.snapshot) for path in index_file_relpaths(entry)
    ]


def _source_needs(source: SnapshotSource) -> tuple[list[str], list[ManifestFileMeta]]:
    """(metadata files, manifests to read for their entries) of one root (`referenced_files`)."""
    snapshot = source.snapshot
    if source.kind == "changelog":
        reads = changelog_reads(source.table, snapshot)
        files = [f"manifest/{name}" for name in reads.lists]
        files += [f"manifest/{meta.file_name}" for meta in reads.named]
        return files, reads.read
    with_changelog = source.needs_changelog
    manifests = data_manifests(source.table, snapshot)
    if with_changelog:
        manifests += changelog_manifests(source.table, snapshot)
    return snapshot_metadata_files(snapshot, with_changelog), manifests


# -- what one metadata root references (run on executors, one root or manifest per call) ---------

SNAPSHOT_ROOT = "snapshot"
TAG_ROOT = "tag"
# A tag whose deletion an interrupted delete-tag/expire-tags left unfinished (`tag-deletion/`): a
# dropped root only, never protecting anything.
PENDING_TAG_ROOT = "pending-tag"
CHANGELOG_ROOT = "changelog"
# A snapshot that expire-snapshots expires on a decoupled table: its changelog-<id> is (about to be)
# written, so it needs what that changelog needs. Read from changelog/ or, not yet written, snapshot/.
CHANGELOG_TO_WRITE_ROOT = "changelog-to-write"


@dataclass(frozen=True)
class RootReferences:
    """What one snapshot, tag or long-lived changelog names: files by path, manifests by name.

    Manifests are returned by name so that the caller can read each shared manifest once.
    `appended_only` marks the manifests of which a changelog needs only the append-origin entries
    (`changelog_needs_entry`); a caller may still protect every file they name (safe, wider).
    """

    files: list[str]  # table-relative: manifest lists, index manifest, statistics, manifest files
    manifests: list[str]  # data and changelog manifests to read for their entries
    index_manifest: str | None
    appended_only: frozenset[str] = frozenset()
    # manifests of which every ADD entry protects its file (a retained delta after an expiry's end)
    added_only: frozenset[str] = frozenset()


def branch_prefix(branch: str) -> str:
    """Where a branch's metadata directories live, relative to the table root ("" for main)."""
    return "" if branch == MAIN_BRANCH else f"branch/branch-{branch}/"


def changelog_or_snapshot(table: Table, changelog_id: int) -> Snapshot | None:
    """`changelog-<id>`, or the snapshot it is written from when not written yet; None if neither."""
    try:
        return table.snapshot_manager.changelog(changelog_id)
    except SnapshotNotFoundError:
        pass
    try:
        return table.snapshot_manager.snapshot(changelog_id)
    except SnapshotNotFoundError:
        return None


def changelog_references(table: Table, changelog: Snapshot) -> RootReferences:
    """What a long-lived changelog needs (`ChangelogReads`): no index manifest, no statistics."""
    reads = changelog_reads(table, changelog)
    manifests = [meta.file_name for meta in reads.read]
    files = [f"manifest/{name}" for name in reads.lists]
    files += [f"manifest/{meta.file_name}" for meta in reads.read + reads.named]
    return RootReferences(files, manifests, None, reads.appended_only)


def root_references(table: Table, kind: str, name: str) -> RootReferences | None:
    """Read one root of `table` (already switched to its branch); None if it vanished meanwhile.

    A snapshot, tag or changelog deleted between listing and reading was expired concurrently and
    needs nothing; every other read failure (a missing manifest list, corrupt JSON) propagates.
    """
    if kind in (CHANGELOG_ROOT, CHANGELOG_TO_WRITE_ROOT):
        if kind == CHANGELOG_ROOT:
            try:
                changelog: Snapshot | None = table.snapshot_manager.changelog(int(name))
            except SnapshotNotFoundError:
                return None
        else:
            changelog = changelog_or_snapshot(table, int(name))
        return None if changelog is None else changelog_references(table, changelog)
    try:
        if kind == SNAPSHOT_ROOT:
            snapshot = table.snapshot_manager.snapshot(int(name))
        elif kind == TAG_ROOT:
            snapshot = table.tag_manager.tag(name)
        elif kind == PENDING_TAG_ROOT:
            snapshot = table.tag_manager.pending_deletion(name)
        else:
            raise ValueError(f"unknown metadata root kind {kind!r}")
    except SnapshotNotFoundError:
        if kind == SNAPSHOT_ROOT:
            return _handed_over_to_changelog(table, int(name))
        return None
    return snapshot_root_references(table, snapshot, kind == SNAPSHOT_ROOT)


def snapshot_root_references(table: Table, snapshot: Snapshot, is_snapshot: bool) -> RootReferences:
    """What a snapshot (`is_snapshot`) or a tag (or a parked tag) already read needs (`root_references`)."""
    # A tag (and a branch's copy of its tag) needs no changelog: Paimon's expiry deletes it.
    with_changelog = is_snapshot and keeps_changelog(table, snapshot)
    metas = data_manifests(table, snapshot) + (changelog_manifests(table, snapshot) if with_changelog else [])
    manifests = [meta.file_name for meta in metas]
    files = snapshot_metadata_files(snapshot, with_changelog) + [f"manifest/{m}" for m in manifests]
    return RootReferences(files, manifests, snapshot.index_manifest or None)


def chained_root_references(table: Table, kind: str, name: str, end: int) -> RootReferences | None:
    """What a retained root of the branch an expiry works on needs among the expiry's candidates,
    read without its base manifests where the delta chain proves them irrelevant.

    The proof (Paimon's snapshot expiry relies on the same fact): every snapshot's base list is its
    predecessor's base and delta merged, so a data file whose last entry in the expiring deltas
    (begin, end] is a DELETE is not live in snapshot `end`, and it is live in a later snapshot only
    if a delta in (end, latest] ADDs it again. So a snapshot `id >= end` needs, among the candidates:
    its metadata files by name (lists and every manifest they name, without reading the manifests),
    its changelog manifests' files (when it keeps its changelog), and, for `id > end`, every file
    an ADD entry of its own delta names. A tag on a snapshot `id >= end` of this branch that still
    exists with the same lists is that snapshot: its files by name only. Any other root (an older
    tag, a tag whose snapshot differs) gets no proof and is read in full (`root_references`).
    """
    if kind == TAG_ROOT:
        try:
            tag = table.tag_manager.tag(name)
        except SnapshotNotFoundError:
            return None
        snapshot = _same_retained_snapshot(table, tag, end)
        if snapshot is None:
            return root_references(table, kind, name)
        files = snapshot_metadata_files(tag, False) + [
            f"manifest/{meta.file_name}" for meta in data_manifests(table, tag)
        ]
        return RootReferences(files, [], tag.index_manifest or None)
    if kind != SNAPSHOT_ROOT or int(name) < end:
        return root_references(table, kind, name)
    try:
        snapshot = table.snapshot_manager.snapshot(int(name))
    except SnapshotNotFoundError:
        return _handed_over_to_changelog(table, int(name))
    with_changelog = keeps_changelog(table, snapshot)
    base = read_list(table, snapshot.base_manifest_list)
    delta = read_list(table, snapshot.delta_manifest_list)
    changelog = changelog_manifests(table, snapshot) if with_changelog else []
    files = snapshot_metadata_files(snapshot, with_changelog)
    files += [f"manifest/{meta.file_name}" for meta in base + delta + changelog]
    added = [meta.file_name for meta in delta] if snapshot.id > end else []
    manifests = [meta.file_name for meta in changelog] + added
    return RootReferences(files, manifests, snapshot.index_manifest or None, added_only=frozenset(added))


def _same_retained_snapshot(table: Table, tag: Snapshot, end: int) -> Snapshot | None:
    """The snapshot a tag was taken from, when it is retained (`id >= end`) and has the same lists."""
    if tag.id < end:
        return None
    try:
        snapshot = table.snapshot_manager.snapshot(tag.id)
    except SnapshotNotFoundError:
        return None
    same = (snapshot.base_manifest_list, snapshot.delta_manifest_list) == (
        tag.base_manifest_list,
        tag.delta_manifest_list,
    )
    return snapshot if same else None


def _handed_over_to_changelog(table: Table, snapshot_id: int) -> RootReferences | None:
    """A snapshot gone since the listing may live on as `changelog-<id>` (decoupled expiry).

    Expiry writes the changelog first and then deletes the snapshot; a listing taken before the
    changelog existed never names it, so its needs are read here, from the snapshot's root.
    """
    try:
        changelog = table.snapshot_manager.changelog(snapshot_id)
    except SnapshotNotFoundError:
        return None
    return changelog_references(table, changelog)


def manifest_references(table: Table, manifest_name: str) -> list[str]:
    """Table-relative paths of every data/changelog file (with extra files) a manifest names.

    ADD and DELETE entries alike: a DELETE names a file an older retained snapshot may still read.
    Same paths as `Table.entry_relpaths` (the handle renders each bucket directory once). Reads the
    decoded records' few fields it needs instead of building a ManifestEntry per record, which cost
    a third of the read (remove-orphan-files reads every manifest of the table through this).
    """
    path = table.manifest_path(manifest_name)
    data = table.file_io.read_bytes(path)
    paths: list[str] = []
    append = paths.append
    relpath = table.bucket_relpath  # remembered by the handle per (partition, bucket)
    with gc_paused():
        for record in iter_manifest_records(data, path):
            meta = record["_FILE"]
            directory = relpath(record["_PARTITION"], record["_BUCKET"])
            if not meta.get("_EXTERNAL_PATH"):
                append(f"{directory}/{meta['_FILE_NAME']}")
            for extra in meta.get("_EXTRA_FILES") or ():
                append(f"{directory}/{extra}")
    return paths


def index_manifest_references(table: Table, index_manifest_name: str) -> list[str]:
    """Table-relative paths of the index files (hash index, deletion vectors) an index manifest adds.

    With `index-file-in-data-file-dir` the files live in their bucket directory instead of `index/`.
    """
    in_data_dir = table.schema.options.get("index-file-in-data-file-dir", "false").lower() == "true"
    paths: list[str] = []
    for entry in read_index_manifest(table.file_io, table.manifest_path(index_manifest_name)):
        if entry.kind != ADD or entry.external_path:
            continue
        if in_data_dir:
            paths.append(posixpath.join(table.bucket_relpath(entry.partition, entry.bucket), entry.file_name))
        else:
            paths.extend(index_file_relpaths(entry))
    return paths


RELPATH_LISTINGS = 4  # the listings `metadata_file_relpaths` sends at once


def metadata_file_relpaths(table: Table, branch: str) -> tuple[list[str], list[tuple[str, str]]]:
    """A branch's own metadata files (schemas, snapshots, tags, changelogs) and its roots to read.

    Lists directories only (ids and names, a small plan); returns (relative paths, [(kind, name)]).
    """
    branch_table = table.for_branch(branch)
    prefix = branch_prefix(branch)
    manager = branch_table.snapshot_manager
    listings: list[Callable[[], list[Any]]] = [
        branch_table.schema_manager.list_ids,
        manager.snapshot_ids,
        branch_table.tag_manager.tag_names,
        manager.changelog_ids,
    ]
    # the four listings at once: on an object store each is a round trip
    schema_ids, snapshot_ids, tag_names, changelog_ids = map_in_flight(
        lambda listing: listing(), listings, min(RELPATH_LISTINGS, table.file_io.io_parallelism)
    )
    files = [f"{prefix}schema/schema-{i}" for i in schema_ids]
    roots: list[tuple[str, str]] = []
    for snapshot_id in snapshot_ids:
        files.append(f"{prefix}snapshot/snapshot-{snapshot_id}")
        roots.append((SNAPSHOT_ROOT, str(snapshot_id)))
    for tag_name in tag_names:
        files.append(f"{prefix}tag/tag-{tag_name}")
        roots.append((TAG_ROOT, tag_name))
    for changelog_id in changelog_ids:
        files.append(f"{prefix}changelog/changelog-{changelog_id}")
        roots.append((CHANGELOG_ROOT, str(changelog_id)))
    return files, roots
