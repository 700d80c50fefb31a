"""Planning a read: a snapshot's live files grouped into splits, and how each split must be read.

A split is the unit of work of a read (one Spark task): files of one partition and bucket, small
and picklable. Planning happens on the driver from metadata only; `split_read.read_split` reads a
split on an executor.

What a reader must respect (spec §7, Paimon's `MergeTreeSplitGenerator`, `IntervalPartition`,
`CoreOptions.batchScanSkipLevel0`):

* append tables: files are independent; a split is any group of files of one bucket;
* primary-key tables: a key may be in several files of a bucket, so a bucket is one split. Its
  files fall into *sections* of overlapping key ranges; a section that is one file without
  retractions is read raw (it holds each key once), as is a bucket whose files all sit on one
  level >= 1 without retractions; any other section is merged by key;
* with deletion vectors (or the first-row engine) batch scans skip level 0: those rows become
  visible only after compaction, and the level >= 1 files, minus their deleted rows, hold every
  key at most once, so they are read raw;
* the postpone bucket (-2) is invisible to batch reads until compaction moves its files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from paimon_format.errors import UnsupportedOperationError
from paimon_format.index.deletion_vectors import DeletionFile, snapshot_deletion_files
from paimon_format.manifest.entries import DataFileMeta, ManifestEntry, ManifestFileMeta
from paimon_format.model.binary_row import deserialize_row
from paimon_format.model.file_layout import key_fields
from paimon_format.model.options import parse_memory_size
from paimon_format.model.types import DataType
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.snapshot import Snapshot
from paimon_format.storage.paths import POSTPONE_BUCKET
from paimon_format.table import Table

PartitionFilter = Callable[[bytes], bool]
DEFAULT_SPLIT_TARGET_SIZE = 128 * 1024 * 1024  # Paimon `source.split.target-size`
DEFAULT_OPEN_FILE_COST = 4 * 1024 * 1024  # Paimon `source.split.open-file-cost`


@dataclass
class Split:
    """Files of one partition and bucket that one task reads together.

    `deletion_files` maps a data file name to where its deletion vector is. `raw` = every file
    can be read as it is (no merge): always for append tables.
    """

    partition: bytes
    bucket: int
    files: list[DataFileMeta]
    total_buckets: int = -1
    deletion_files: dict[str, DeletionFile] = field(default_factory=dict)
    raw: bool = True
    snapshot_id: int | None = None

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files)

    @property
    def file_size(self) -> int:
        return sum(f.file_size for f in self.files)


def skips_level0(table: Table) -> bool:
    """Whether batch scans of this table ignore level-0 files (Paimon `batchScanSkipLevel0`)."""
    options = table.options
    return bool(table.schema.primary_keys) and (
        options.deletion_vectors_enabled or options.merge_engine == "first-row"
    )


def _size_option(table: Table, key: str, default: int) -> int:
    text = table.options.get(key)
    return parse_memory_size(text) if text else default


def plan_splits(
    table: Table,
    snapshot: Snapshot,
    partition_filter: PartitionFilter | None = None,
    *,
    all_levels: bool = False,
    target_split_size: int | None = None,
    manifest_filter: Callable[[ManifestFileMeta], bool] | None = None,
    file_filter: Callable[[ManifestEntry], bool] | None = None,
) -> list[Split]:
    """The splits a batch read of `snapshot` needs, for partitions accepted by `partition_filter`.

    `all_levels=True` keeps level-0 files of tables whose batch scans skip them (compaction needs
    every file). Append buckets are packed into splits of about `target_split_size` bytes
    (default: the table's `source.split.target-size`, 128 MB); a primary-key bucket is one split.
    `manifest_filter` leaves out manifests (see `live_entries`), `file_filter` live files a read
    provably needs no row of (`value_filter.FileSkipping`: safe for merges only by key columns).
    """
    if table.options.data_evolution_enabled:
        raise UnsupportedOperationError(
            f"{table.path}: data-evolution.enabled tables (files holding some columns, merged by row id) "
            "cannot be read here"
        )
    has_pk = bool(table.schema.primary_keys)
    skip_level0 = skips_level0(table) and not all_levels
    groups: dict[tuple[bytes, int], list[ManifestEntry]] = {}
    for entry in live_entries(table, snapshot, manifest_filter):
        if entry.bucket == POSTPONE_BUCKET:
            continue
        if skip_level0 and entry.file.level == 0:
            continue
        if partition_filter is not None and not partition_filter(entry.partition):
            continue
        if file_filter is not None and not file_filter(entry):
            continue
        groups.setdefault((entry.partition, entry.bucket), []).append(entry)
    deletions = snapshot_deletion_files(table, snapshot) if snapshot.index_manifest else {}
    target = target_split_size or _size_option(table, "source.split.target-size", DEFAULT_SPLIT_TARGET_SIZE)
    open_cost = _size_option(table, "source.split.open-file-cost", DEFAULT_OPEN_FILE_COST)
    key_types = [f.type for f in key_fields(table.schema)] if has_pk else []
    splits: list[Split] = []
    for (partition, bucket), entries in groups.items():
        files = sorted((e.file for e in entries), key=lambda f: (f.min_sequence_number, f.file_name))
        bucket_deletions = deletions.get((partition, bucket), {})
        if has_pk:
            raw = skip_level0 or _one_level_without_retractions(files)
            raw = raw or all(len(s) == 1 and _no_retractions(s[0]) for s in key_sections(files, key_types))
            groups_and_raw = [(files, raw)]
        else:
            groups_and_raw = [(group, True) for group in _pack(files, target, open_cost)]
        for group, raw in groups_and_raw:
            vectors = {
                f.file_name: bucket_deletions[f.file_name] for f in group if f.file_name in bucket_deletions
            }
            splits.append(
                Split(partition, bucket, group, entries[0].total_buckets, vectors, raw, snapshot.id)
            )
    return splits


def _pack(files: Sequence[DataFileMeta], target: int, open_cost: int) -> list[list[DataFileMeta]]:
    """Consecutive files grouped up to `target` bytes, each file weighing at least `open_cost`."""
    groups: list[list[DataFileMeta]] = []
    current: list[DataFileMeta] = []
    weight = 0
    for meta in files:
        cost = max(meta.file_size, open_cost)
        if current and weight + cost > target:
            groups.append(current)
            current, weight = [], 0
        current.append(meta)
        weight += cost
    if current:
        groups.append(current)
    return groups


# -- primary-key buckets: sections and sorted runs ----------------------------------------------


def _no_retractions(meta: DataFileMeta) -> bool:
    """No -U/-D rows; an unknown count (files of old writers) counts as none, as in Paimon."""
    return not meta.delete_row_count


def _one_level_without_retractions(files: Sequence[DataFileMeta]) -> bool:
    levels = {f.level for f in files}
    return len(levels) == 1 and 0 not in levels and all(_no_retractions(f) for f in files)


def key_of(row: bytes, key_types: Sequence[DataType]) -> tuple:
    """A serialized key as a tuple that sorts as Paimon compares keys (nulls first)."""
    return tuple((value is not None, value) for value in deserialize_row(row, key_types))


def key_sections(files: Sequence[DataFileMeta], key_types: Sequence[DataType]) -> list[list[DataFileMeta]]:
    """Files grouped into sections of overlapping [min key, max key], in key order.

    Keys in different sections never meet, so sections are read one after the other; only the
    files inside one section need merging.
    """
    bounds = sorted(
        ((key_of(f.min_key, key_types), key_of(f.max_key, key_types), f) for f in files),
        key=lambda item: (item[0], item[1]),
    )
    sections: list[list[DataFileMeta]] = []
    section_max: Any = None
    for low, high, meta in bounds:
        if sections and low <= section_max:
            sections[-1].append(meta)
            section_max = max(section_max, high)
        else:
            sections.append([meta])
            section_max = high
    return sections


def sorted_runs(
    files: Sequence[DataFileMeta], key_types: Sequence[DataType] | None = None
) -> list[list[DataFileMeta]]:
    """The sorted runs of a primary-key bucket's files, oldest first, each run's files in key order.

    Level 0: each file is its own run, ordered by max sequence number. Levels >= 1: higher levels
    are older; with `key_types`, each level is one run ordered by min key (its files never
    overlap). Without key types the files of a level cannot be put in key order, so each becomes
    its own run: the merge result is the same, it only keeps more files open at once.
    """
    upper = sorted({f.level for f in files if f.level > 0}, reverse=True)
    runs: list[list[DataFileMeta]] = []
    for level in upper:
        level_files = [f for f in files if f.level == level]
        if key_types is None:
            runs.extend([f] for f in sorted(level_files, key=lambda f: (f.max_sequence_number, f.file_name)))
        else:
            runs.append(sorted(level_files, key=lambda f: key_of(f.min_key, key_types)))
    level0 = sorted((f for f in files if f.level == 0), key=lambda f: (f.max_sequence_number, f.file_name))
    runs.extend([f] for f in level0)
    return runs
