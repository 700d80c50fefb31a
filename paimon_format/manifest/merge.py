"""Merging small manifest files into fewer, larger ones (seed 003, "Compact (Merge) Manifest Files").

Every commit adds at least one manifest; without merging, a table with a commit a minute has a
million manifests within two years and every reader lists them all. The commit path runs the
automatic merge below; the compact-manifests job runs the same rules (or a full rewrite).

The rules are pure: which manifests merge together is decided here from the manifest list, and
the merging itself is a `MergeOps` (`manifest_concat.BlockMergeOps` copies untouched manifests by
blocks), so the rules are tested without storage.

Ordering rule that makes partial rewrites safe: a DELETE entry must come after the ADD it cancels.
Kept files only ever hold ADD entries that no later DELETE touches, so moving them in front of the
rewritten ones keeps that rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from paimon_format.errors import InvalidTableStateError
from paimon_format.manifest.entries import DELETE, ManifestFileMeta
from paimon_format.model.binary_row import deserialize_row
from paimon_format.model.types import DataType


@dataclass
class Deletes:
    """The DELETE entries of a set of manifests: how many per file identifier, and their partitions."""

    counts: dict[tuple, int] = field(default_factory=dict)
    partitions: set[bytes] = field(default_factory=set)


class MergeOps(Protocol):
    """How manifests are read and merged for the rules below."""

    def read_deletes(self, metas: Sequence[ManifestFileMeta]) -> Deletes:
        """The DELETEs of `metas` (only manifests whose record counts deletes need reading)."""
        ...

    def merge(self, metas: Sequence[ManifestFileMeta], deletes: Deletes) -> list[ManifestFileMeta]:
        """New manifests holding `metas`' entries in order, less the ADD/DELETE pairs that cancel
        (`deletes` = read_deletes(metas)); DELETEs whose ADD is elsewhere are kept."""
        ...


@dataclass
class MergeResult:
    """The manifests that replace the input, and the files this merge wrote (to clean up on failure)."""

    manifests: list[ManifestFileMeta]
    written: list[ManifestFileMeta] = field(default_factory=list)

    def differs_from(self, metas: Sequence[ManifestFileMeta]) -> bool:
        return [m.file_name for m in self.manifests] != [m.file_name for m in metas]


def merge_manifests(
    metas: Sequence[ManifestFileMeta],
    ops: MergeOps,
    partition_types: Sequence[DataType],
    target_size: int,
    merge_min_count: int,
    full_compaction_threshold: int,
) -> MergeResult:
    """Paimon's automatic merge: try a full compaction, else a minor one, else keep everything."""
    full = try_full_compaction(metas, ops, partition_types, target_size, full_compaction_threshold)
    if full is not None:
        return full
    return minor_compaction(metas, ops, target_size, merge_min_count)


def minor_compaction(
    metas: Sequence[ManifestFileMeta], ops: MergeOps, target_size: int, merge_min_count: int
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
            _merge_group(candidates, ops, result, written)
            candidates, candidates_size = [], 0
    if len(candidates) >= merge_min_count:
        _merge_group(candidates, ops, result, written)
    else:
        result.extend(candidates)
    return MergeResult(result, written)


def _merge_group(
    group: list[ManifestFileMeta],
    ops: MergeOps,
    result: list[ManifestFileMeta],
    written: list[ManifestFileMeta],
) -> None:
    if len(group) == 1:
        result.append(group[0])
        return
    new_metas = ops.merge(group, ops.read_deletes(group))
    result.extend(new_metas)
    written.extend(new_metas)


def try_full_compaction(
    metas: Sequence[ManifestFileMeta],
    ops: MergeOps,
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
    deletes = ops.read_deletes([m for m, base in zip(metas, is_base, strict=True) if not base])
    decoded_partitions = [deserialize_row(p, partition_types) for p in deletes.partitions]
    rewrite = [
        not base or may_contain_any(meta, decoded_partitions, partition_types)
        for meta, base in zip(metas, is_base, strict=True)
    ]
    kept = [meta for meta, again in zip(metas, rewrite, strict=True) if not again]
    new_metas = ops.merge([meta for meta, again in zip(metas, rewrite, strict=True) if again], deletes)
    return MergeResult(kept + new_metas, new_metas)


class Canceller:
    """Which entries of a merge survive, streamed in manifest order (EntryMerger's result, holding
    only the state of files that have a DELETE in the merge).

    The k-th ADD of such a file is dropped when the merge holds at least k DELETEs of it (each DELETE
    follows the ADD it cancels); a DELETE whose ADD was not seen is kept (`dangling`). An ADD of a
    tracked file that is already live, or that follows its unmatched DELETE, is an error, as in
    EntryMerger (a second ADD of an untracked file is not noticed: that needs every identifier).
    """

    def __init__(self, deletes: dict[tuple, int], source: str) -> None:
        self._deletes = deletes
        self._added: dict[tuple, int] = {}
        self._deleted: dict[tuple, int] = {}
        self._source = source
        self.dangling: list[Any] = []

    def keeps(self, entry: Any) -> bool:
        identifier = entry.identifier()
        total = self._deletes.get(identifier)
        if total is None:
            return True
        adds, dels = self._added.get(identifier, 0), self._deleted.get(identifier, 0)
        if entry.kind == DELETE:
            self._deleted[identifier] = dels + 1
            if adds > dels:
                return False  # it cancels an ADD seen before
            self.dangling.append(entry)
            return True
        if adds != dels:  # already live, or after its unmatched DELETE
            raise InvalidTableStateError(
                f"{self._source}: trying to add {entry.describe()} which is already added"
            )
        self._added[identifier] = adds + 1
        return adds + 1 > total  # no DELETE left for it: it stays live


def may_contain_any(
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
