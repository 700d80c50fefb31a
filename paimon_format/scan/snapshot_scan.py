"""What a snapshot contains: its manifests, its index files, and the data files live in it.

Answered from metadata only: which data files a reader of a snapshot sees (ADD entries left after
DELETEs cancel them), read whole in one process; the Spark jobs use the per-manifest building
blocks (`data_manifests`, `read_list`, `EntryMerger`) to spread the same work over executors. What a
table still needs for maintenance (every snapshot, tag, branch and changelog) is
`paimon_format.maintenance.references`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from paimon_format.errors import InvalidTableStateError
from paimon_format.manifest.codec import decode_manifest, read_index_manifest
from paimon_format.manifest.entries import ADD, DELETE, IndexManifestEntry, ManifestEntry, ManifestFileMeta
from paimon_format.manifest.read_ahead import sized_bytes
from paimon_format.snapshot import Snapshot
from paimon_format.storage.in_flight import map_in_flight
from paimon_format.table import Table


def resolve_snapshot(table: Table, snapshot_id: int | None = None, tag: str | None = None) -> Snapshot | None:
    """The snapshot a user asked for: an id, a tag, or (neither) the latest; None for an empty table."""
    if snapshot_id is not None and tag is not None:
        raise ValueError("give a snapshot id or a tag, not both")
    if tag is not None:
        return table.tag_manager.tag(tag)
    if snapshot_id is not None:
        return table.snapshot_manager.snapshot(snapshot_id)
    return table.snapshot_manager.latest(reuse_read=True)  # a read, not a commit: see `reuse_read`


# -- manifests of a snapshot ------------------------------------------------------------------


def read_list(table: Table, list_name: str | None) -> list[ManifestFileMeta]:
    if not list_name:
        return []
    return table.manifest_list(list_name)


def data_manifests(table: Table, snapshot: Snapshot) -> list[ManifestFileMeta]:
    """The data manifests of a snapshot in reading order: its base list, then its delta list (both
    lists read at once: on an object store that is one round trip instead of two)."""
    lists = [snapshot.base_manifest_list, snapshot.delta_manifest_list]
    base, delta = map_in_flight(lambda name: read_list(table, name), lists, table.file_io.io_parallelism)
    return base + delta


def changelog_manifests(table: Table, snapshot: Snapshot) -> list[ManifestFileMeta]:
    return read_list(table, snapshot.changelog_manifest_list)


def index_entries(table: Table, snapshot: Snapshot) -> list[IndexManifestEntry]:
    """The index files of a snapshot (hash index, deletion vectors, ...): its index manifest lists all."""
    if not snapshot.index_manifest:
        return []
    entries = read_index_manifest(table.file_io, table.manifest_path(snapshot.index_manifest))
    return [entry for entry in entries if entry.kind == ADD]


def read_entries(table: Table, manifests: Iterable[ManifestFileMeta]) -> Iterator[ManifestEntry]:
    """The entries of `manifests` in order; the next manifests are read while one is decoded
    (`read_ahead`: object stores are latency-bound), a truncated manifest is refused by its size."""
    files = [(table.manifest_path(meta.file_name), meta.file_size) for meta in manifests]
    for (path, _size), data in zip(files, sized_bytes(table.file_io, files), strict=True):
        yield from decode_manifest(data, path)


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


def live_entries(
    table: Table, snapshot: Snapshot, manifest_filter: Callable[[ManifestFileMeta], bool] | None = None
) -> list[ManifestEntry]:
    """The data files a reader of `snapshot` reads (ADD entries after cancellation).

    `manifest_filter` leaves out manifests a read does not need (their partition stats prove it
    selects none of their entries); an entry's DELETE has its ADD's partition, so every pair a read
    needs stays whole."""
    manifests = data_manifests(table, snapshot)
    if manifest_filter is not None:
        manifests = [meta for meta in manifests if manifest_filter(meta)]
    merger = EntryMerger(f"{table.path} snapshot {snapshot.id}")
    return merger.add_all(read_entries(table, manifests)).live()


def changelog_entries(table: Table, snapshot: Snapshot) -> list[ManifestEntry]:
    return [e for e in read_entries(table, changelog_manifests(table, snapshot)) if e.kind == ADD]
