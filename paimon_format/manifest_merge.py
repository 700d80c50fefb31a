"""Merging small manifest files into fewer, larger ones (seed 003, "Compact (Merge) Manifest Files").

Every commit adds at least one manifest; without merging, a table with a commit a minute has a
million manifests within two years and every reader lists them all. The commit path runs the
automatic merge below; the compact-manifests job runs the same rules (or a full rewrite) on Spark.

The logic is pure: reading and writing manifests are callbacks, so the rules are tested without
storage and the same code serves the driver-side commit and the distributed job.

Ordering rule that makes partial rewrites safe: a DELETE entry must come after the ADD it cancels.
Kept files only ever hold ADD entries that no later DELETE touches, so moving them in front of the
rewritten ones keeps that rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from paimon_format.binary_row import deserialize_row
from paimon_format.manifest import DELETE, ManifestEntry, ManifestFileMeta
from paimon_format.manifest_raw import RawEntry
from paimon_format.scan import EntryMerger
from paimon_format.types import DataType

# Entries are ManifestEntry models or `manifest_raw.RawEntry` (the commit's merge: bytes copied as they
# are); the rules need only `kind`, `partition` and what EntryMerger uses.
Entry = ManifestEntry | RawEntry
ReadManifest = Callable[[ManifestFileMeta], list[Any]]
WriteManifests = Callable[[list[Any]], list[ManifestFileMeta]]


@dataclass
class MergeResult:
    """The manifests that replace the input, and the files this merge wrote (to clean up on failure)."""

    manifests: list[ManifestFileMeta]
    written: list[ManifestFileMeta] = field(default_factory=list)

    def differs_from(self, metas: Sequence[ManifestFileMeta]) -> bool:
        return [m.file_name for m in self.manifests] != [m.file_name for m in metas]


def merge_manifests(
    metas: Sequence[ManifestFileMeta],
    read: ReadManifest,
    write: WriteManifests,
    partition_types: Sequence[DataType],
    target_size: int,
    merge_min_count: int,
    full_compaction_threshold: int,
) -> MergeResult:
    """Paimon's automatic merge: try a full compaction, else a minor one, else keep everything."""
    full = try_full_compaction(metas, read, write, partition_types, target_size, full_compaction_threshold)
    if full is not None:
        return full
    return minor_compaction(metas, read, write, target_size, merge_min_count)


def minor_compaction(
    metas: Sequence[ManifestFileMeta],
    read: ReadManifest,
    write: WriteManifests,
    target_size: int,
    merge_min_count: int,
) -> MergeResult:
    """Merge consecutive runs of manifests once a run reaches the target size, and a long tail.

    A single manifest that is already large enough forms a run of its own and is kept as it is.
    """
    result: list[ManifestFileMeta] = []
    written: list[ManifestFileMeta] = []
    candidates: list[ManifestFileMeta] = []
    candidates_size = 0
    for meta in metas:
        candidates.append(meta)
        candidates_size += meta.file_size
        if candidates_size >= target_size:
            _merge_group(candidates, read, write, result, written)
            candidates, candidates_size = [], 0
    if len(candidates) >= merge_min_count:
        _merge_group(candidates, read, write, result, written)
    else:
        result.extend(candidates)
    return MergeResult(result, written)


def _merge_group(
    group: list[ManifestFileMeta],
    read: ReadManifest,
    write: WriteManifests,
    result: list[ManifestFileMeta],
    written: list[ManifestFileMeta],
) -> None:
    if len(group) == 1:
        result.append(group[0])
        return
    merger = EntryMerger("manifest merge")
    for meta in group:
        merger.add_all(read(meta))
    merged = merger.merged()
    if merged:
        new_metas = write(merged)
        result.extend(new_metas)
        written.extend(new_metas)


def try_full_compaction(
    metas: Sequence[ManifestFileMeta],
    read: ReadManifest,
    write: WriteManifests,
    partition_types: Sequence[DataType],
    target_size: int,
    threshold: int,
) -> MergeResult | None:
    """Rewrite every small or delete-carrying manifest once they add up to `threshold` bytes.

    Large manifests without DELETE entries are kept unless a DELETE in the rewritten set may
    cancel one of their files (judged by their partition stats); those are rewritten too, so the
    result carries no DELETE entries at all when the metadata is consistent.
    Returns None when the threshold is not reached.
    """
    is_base = [m.num_deleted_files == 0 and m.file_size >= target_size for m in metas]
    delta_size = sum(m.file_size for m, base in zip(metas, is_base, strict=True) if not base)
    if delta_size < threshold:
        return None

    delta_deletes: list[Entry] = []
    delta_entries: dict[int, list[Entry]] = {}
    for index, (meta, base) in enumerate(zip(metas, is_base, strict=True)):
        if not base:
            entries = read(meta)
            delta_entries[index] = entries
            delta_deletes.extend(e for e in entries if e.kind == DELETE)
    deleted_partitions = {e.partition for e in delta_deletes}
    decoded_partitions = [deserialize_row(p, partition_types) for p in deleted_partitions]

    rewrite = [
        not base or _may_contain_any(meta, decoded_partitions, partition_types)
        for meta, base in zip(metas, is_base, strict=True)
    ]
    kept = [meta for meta, again in zip(metas, rewrite, strict=True) if not again]
    merger = EntryMerger("full manifest compaction")
    for index, (meta, again) in enumerate(zip(metas, rewrite, strict=True)):
        if again:
            merger.add_all(delta_entries[index] if index in delta_entries else read(meta))
    merged = merger.merged()
    new_metas = write(merged) if merged else []
    return MergeResult(kept + new_metas, new_metas)


def _may_contain_any(
    meta: ManifestFileMeta, partitions: list[list[Any]], partition_types: Sequence[DataType]
) -> bool:
    """Whether a manifest's partition stats admit any of the given partitions (conservative)."""
    if not partitions:
        return False
    if not partition_types:
        return True
    try:
        minimum = deserialize_row(meta.partition_stats.min_values, partition_types)
        maximum = deserialize_row(meta.partition_stats.max_values, partition_types)
    except Exception:  # unreadable or missing stats: assume it may contain anything
        return True
    null_counts = meta.partition_stats.null_counts or []
    for values in partitions:
        if all(
            _within(value, minimum[i], maximum[i], null_counts[i] if i < len(null_counts) else None)
            for i, value in enumerate(values)
        ):
            return True
    return False


def _within(value: Any, low: Any, high: Any, null_count: int | None) -> bool:
    if value is None:
        return null_count is None or null_count > 0
    if low is None or high is None:
        return True
    try:
        return low <= value <= high
    except TypeError:
        return True
