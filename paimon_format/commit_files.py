"""The metadata files one commit attempt writes: manifests, manifest lists, the index manifest.

Names are unique per committer (`CommitFileNames`: a random prefix and counters), so attempts of
one commit never collide. Every file an attempt creates is remembered (`AttemptFiles.written`):
`SnapshotCommit` removes them again only when the attempt definitely failed (lost race, conflict).
After an uncertain failure (the snapshot write raised) they stay: they may be referenced by a
snapshot that did land, and orphan-file removal clears them otherwise.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence

from paimon_format.errors import PaimonFormatError
from paimon_format.manifest.codec import write_index_manifest, write_manifest_list
from paimon_format.manifest.concat import BlockMergeOps
from paimon_format.manifest.entries import IndexManifestEntry, ManifestEntry, ManifestFileMeta
from paimon_format.manifest.files import rolling_write_manifests
from paimon_format.manifest.merge import merge_manifests
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.scan.snapshot_scan import index_entries
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

log = logging.getLogger(__name__)

IndexEntryFilter = Callable[[IndexManifestEntry], bool]


class CommitFileNames:
    """Names for the files of one committer: `<kind>-<random prefix>-<counter>`.

    An attempt writes its base, delta and changelog sides on threads of their own (`SnapshotCommit`),
    which take names at the same time: a counter handed out twice would make two files one, so each
    name is taken under a lock."""

    def __init__(self) -> None:
        self._prefix = str(uuid.uuid4())
        self._lock = threading.Lock()
        self._counters = {"manifest": 0, "manifest-list": 0, "index-manifest": 0}

    def _next(self, kind: str) -> str:
        with self._lock:
            number = self._counters[kind]
            self._counters[kind] = number + 1
        return f"{kind}-{self._prefix}-{number}"

    def manifest(self) -> str:
        return self._next("manifest")

    def manifest_list(self) -> str:
        return self._next("manifest-list")

    def index_manifest(self) -> str:
        return self._next("index-manifest")


class AttemptFiles:
    """Writes the metadata files of one attempt in `manifest/` and remembers each one it creates."""

    def __init__(
        self, table: Table, names: CommitFileNames, options: CoreOptions, schema: TableSchema
    ) -> None:
        self.table = table
        self.names = names
        self.options = options
        self.schema = schema
        self.written: list[str] = []

    def write_manifests(self, entries: list[ManifestEntry]) -> list[ManifestFileMeta]:
        """Roll `entries` into manifests of `manifest.target-file-size`; [] when there are none."""
        if not entries:
            return []
        metas = rolling_write_manifests(
            self.table.file_io,
            self.table.file_io.join(self.table.path, "manifest"),
            self.names.manifest,
            entries,
            self.options.manifest_target_file_size,
            self.options.manifest_compression,
            self.schema.partition_types(),
            self.schema.id,
        )
        self.written.extend(meta.file_name for meta in metas)
        return metas

    def write_list(self, metas: Iterable[ManifestFileMeta]) -> tuple[str, int]:
        """Write a manifest list under a new name; returns (name, size in bytes)."""
        name = self.names.manifest_list()
        self.written.append(name)
        size = write_manifest_list(
            self.table.file_io,
            self.table.manifest_path(name),
            list(metas),
            self.options.manifest_compression,
        )
        return name, size

    def write_changelog(
        self, changelog: Sequence[ManifestEntry], prewritten: list[ManifestFileMeta], prewritten_rows: int
    ) -> tuple[str | None, int | None, int | None]:
        """The changelog manifest list (name, size, rows) of the next snapshot: the manifests written
        elsewhere (`prewritten`, holding `prewritten_rows` rows) and those of `changelog`; all None
        without changelog."""
        if not changelog and not prewritten:
            return None, None, None
        metas = list(prewritten) + (self.write_manifests(list(changelog)) if changelog else [])
        name, size = self.write_list(metas)
        rows = sum(entry.file.row_count for entry in changelog)
        return name, size, rows + (prewritten_rows if prewritten else 0)

    def merged_base(self, previous: list[ManifestFileMeta]) -> list[ManifestFileMeta]:
        """The previous snapshot's manifests, merged by Paimon's automatic rules when they qualify."""
        if not previous:
            return []
        options = self.options
        ops = BlockMergeOps(
            self.table.file_io,
            self.table.file_io.join(self.table.path, "manifest"),
            self.names.manifest,
            options.manifest_target_file_size,
            options.manifest_compression,
            self.schema.partition_types(),
            self.schema.id,
        )
        try:
            result = merge_manifests(
                previous,
                ops,  # untouched manifests are copied by Avro blocks, entries are not rebuilt
                partition_types=self.schema.partition_types(),
                target_size=options.manifest_target_file_size,
                merge_min_count=options.manifest_merge_min_count,
                full_compaction_threshold=options.manifest_full_compaction_threshold_size,
            )
        finally:
            self.written.extend(ops.written)
        if result.differs_from(previous):
            log.info("%s: merged %d manifests into %d", self.table.path, len(previous), len(result.manifests))
        return result.manifests

    def index_manifest(
        self,
        latest: Snapshot | None,
        drop: IndexEntryFilter | None,
        added: Sequence[IndexManifestEntry] = (),
    ) -> str | None:
        """The new snapshot's index manifest: the latest one, minus the entries of replaced partitions
        (or dropped one by one), plus `added`."""
        if latest is None or not latest.index_manifest:
            if not added:
                return None
            entries: list[IndexManifestEntry] = []
        elif drop is None and not added:
            return latest.index_manifest
        else:
            entries = index_entries(self.table, latest)
        kept = [entry for entry in entries if drop is None or not drop(entry)]
        if len(kept) == len(entries) and not added:
            return latest.index_manifest if latest else None
        kept += list(added)
        if not kept:
            return None
        name = self.names.index_manifest()
        self.written.append(name)
        write_index_manifest(
            self.table.file_io, self.table.manifest_path(name), kept, self.options.manifest_compression
        )
        return name

    def remove(self) -> None:
        """Delete every file this attempt wrote (best effort: an orphan at worst)."""
        for name in self.written:
            try:
                self.table.file_io.delete(self.table.manifest_path(name))
            except PaimonFormatError as error:  # an orphan at worst; remove-orphan-files clears it
                log.warning("%s: could not remove %s after a failed commit: %s", self.table.path, name, error)
