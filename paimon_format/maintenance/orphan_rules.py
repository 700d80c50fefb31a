"""Which files in a table directory orphan cleaning may delete, judged by where they are and their name.

Being unreferenced is necessary but not sufficient: a file is a deletion candidate only when Paimon
itself would have written it at that place (a data file in a bucket directory, a manifest in
`manifest/`, ...). Everything else is either *protected* (metadata whose presence is its meaning:
snapshot, schema, tag, changelog and consumer files, hints) or *foreign* (a file Paimon would not
write, e.g. a user's notes, a `_SUCCESS` mark): both are reported, never deleted. The only deletable
files in the protected directories are the hidden temp files an interrupted atomic write left
behind (`.snapshot-5.<uuid>.tmp`); the age filter keeps in-flight ones.

Pure functions on table-relative paths, so executors and unit tests use them alike.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from paimon_format.branches import MAIN_BRANCH
from paimon_format.errors import SnapshotNotFoundError
from paimon_format.manifest.entries import ADD, gc_paused, iter_manifest_records, read_index_manifest
from paimon_format.model.options import CoreOptions
from paimon_format.scan.snapshot_scan import (
    changelog_manifests,
    changelog_reads,
    data_manifests,
    index_file_relpaths,
    keeps_changelog,
    read_list,
    snapshot_metadata_files,
)
from paimon_format.snapshot import Snapshot
from paimon_format.storage.paths import (
    BUCKET_DIR_RE,
    CHANGELOG_DATA,
    DATA,
    DEFAULT_CHANGELOG_FILE_PREFIX,
    DEFAULT_DATA_FILE_PREFIX,
    INDEX,
    INDEX_MANIFEST,
    MANIFEST,
    MANIFEST_LIST,
    STATISTICS,
    TEMP,
    TEMP_FILE_RE,
    classify_file,
    classify_in_bucket,
)
from paimon_format.table import Table

DELETABLE = "deletable"  # deleted when unreferenced and older than older_than
PROTECTED = "protected"  # Paimon metadata that is never an orphan by its name alone
FOREIGN = "foreign"  # not a file Paimon writes at this place: reported, never deleted

# Kinds an unreferenced file may be deleted as, when it sits in the table root's own layout.
_DELETABLE_KINDS = frozenset(
    {DATA, CHANGELOG_DATA, INDEX, MANIFEST, MANIFEST_LIST, INDEX_MANIFEST, STATISTICS}
)


@dataclass(frozen=True)
class FileNaming:
    """The file-name prefixes a table writes with (`data-file.prefix`, `changelog-file.prefix`)."""

    data_file_prefix: str = DEFAULT_DATA_FILE_PREFIX
    changelog_file_prefix: str = DEFAULT_CHANGELOG_FILE_PREFIX

    @staticmethod
    def of(options: dict[str, str]) -> FileNaming:
        core = CoreOptions(options)
        return FileNaming(core.data_file_prefix, core.changelog_file_prefix)


@dataclass(frozen=True)
class Judgement:
    """What orphan cleaning may do with one file: `rule` is DELETABLE/PROTECTED/FOREIGN, `kind` says why."""

    rule: str
    kind: str


def judge_file(relative_path: str, naming: FileNaming = FileNaming()) -> Judgement:
    """The orphan rule for a table-relative path (see the module docstring).

    Anything under `branch/` other than a temp file is kept: branches share the root's manifests and
    data, so a Paimon-looking file there was not written by Paimon and is not ours to judge.
    """
    kind = classify_file(relative_path, naming.data_file_prefix, naming.changelog_file_prefix)
    if kind is None:
        return Judgement(FOREIGN, "unknown")
    if kind == TEMP:
        return Judgement(DELETABLE, TEMP)
    if kind in _DELETABLE_KINDS and not relative_path.lstrip("/").startswith("branch/"):
        return Judgement(DELETABLE, kind)
    if kind in _DELETABLE_KINDS:
        return Judgement(FOREIGN, kind)
    if kind == "success-file":
        return Judgement(FOREIGN, kind)
    return Judgement(PROTECTED, kind)


def directory_judge(relative_dir: str, naming: FileNaming = FileNaming()) -> Callable[[str], Judgement]:
    """`judge_file` for the files of one directory, with what depends on the directory decided once.

    A listing judges every file it finds; in a bucket directory (where nearly all of a table's files
    are) only the name's patterns are left to check, which is a third of `judge_file`'s cost.
    Any other directory judges each full path with `judge_file`. Same results as `judge_file`
    (tests/format/maintenance/test_orphans.py compares both on every rule's example).
    """
    directory = relative_dir.strip("/")
    parts = directory.split("/") if directory else []
    if not parts or not BUCKET_DIR_RE.fullmatch(parts[-1]):
        return lambda name: judge_file(f"{directory}/{name}" if directory else name, naming)
    found_rule = FOREIGN if parts[0] == "branch" else DELETABLE
    by_kind = {kind: Judgement(found_rule, kind) for kind in (DATA, CHANGELOG_DATA, INDEX)}
    temp, unknown = Judgement(DELETABLE, TEMP), Judgement(FOREIGN, "unknown")
    data_prefix, changelog_prefix = naming.data_file_prefix, naming.changelog_file_prefix

    def judge_in_bucket(name: str) -> Judgement:
        if TEMP_FILE_RE.fullmatch(name):
            return temp
        kind = classify_in_bucket(name, data_prefix, changelog_prefix)
        return unknown if kind is None else by_kind[kind]

    return judge_in_bucket


# Ages below this need `force`: a writer may be between writing a file and committing it.
OLDER_THAN_FLOOR_MS = 3_600_000
DEFAULT_OLDER_THAN_MS = 86_400_000


def cutoff_ms(started_ms: int, older_than_ms: int, force: bool) -> int:
    """Files modified before this instant may be deleted.

    Measured from the job's start (before listing), so no file written during the run qualifies.
    """
    if older_than_ms < 0:
        raise ValueError(f"older_than must not be negative, got {older_than_ms} ms")
    if older_than_ms < OLDER_THAN_FLOOR_MS and not force:
        raise ValueError(
            f"older_than of {older_than_ms} ms is below the floor of 1 hour: a running writer's files "
            "could be deleted before it commits them (set force: true only when no writer runs)"
        )
    return started_ms - older_than_ms


def exceeds_ratio(candidates: int, listed: int, max_ratio: float) -> bool:
    """The circuit breaker: more than `max_ratio` of the listed files would be deleted."""
    return listed > 0 and candidates / listed > max_ratio


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
    (`scan.changelog_needs_entry`); a caller may still protect every file they name (safe, wider).
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
    """What a long-lived changelog needs (`scan.ChangelogReads`): no index manifest, no statistics."""
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
    # A tag (and a branch's copy of its tag) needs no changelog: Paimon's expiry deletes it.
    with_changelog = kind == SNAPSHOT_ROOT and keeps_changelog(table, snapshot)
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


def metadata_file_relpaths(table: Table, branch: str) -> tuple[list[str], list[tuple[str, str]]]:
    """A branch's own metadata files (schemas, snapshots, tags, changelogs) and its roots to read.

    Lists directories only (ids and names, a small plan); returns (relative paths, [(kind, name)]).
    """
    branch_table = table.for_branch(branch)
    prefix = branch_prefix(branch)
    files = [f"{prefix}schema/schema-{i}" for i in branch_table.schema_manager.list_ids()]
    roots: list[tuple[str, str]] = []
    for snapshot_id in branch_table.snapshot_manager.snapshot_ids():
        files.append(f"{prefix}snapshot/snapshot-{snapshot_id}")
        roots.append((SNAPSHOT_ROOT, str(snapshot_id)))
    for tag_name in branch_table.tag_manager.tag_names():
        files.append(f"{prefix}tag/tag-{tag_name}")
        roots.append((TAG_ROOT, tag_name))
    for changelog_id in branch_table.snapshot_manager.changelog_ids():
        files.append(f"{prefix}changelog/changelog-{changelog_id}")
        roots.append((CHANGELOG_ROOT, str(changelog_id)))
    return files, roots
