"""Which data files one compaction rewrites together: Paimon's picking rules, without Spark.

The `compact` job plans on the executors, one (partition, bucket) at a time; this module decides,
from the live files of that bucket alone (their sizes, sequence numbers, levels, deletion vectors),
which groups of files ("bins") one task rewrites. Each bin becomes one task, and its output
replaces exactly its inputs, so the rules below are also what makes a second run a no-op.

Append tables (no primary key), after Paimon's `AppendCompactCoordinator` (bucket -1) and
`BucketedAppendCompactManager` (fixed buckets with `bucket-key`):

* A file is "small" below `target-file-size * compaction.small-file-ratio` (default 0.7); larger
  files are left alone (rewriting them would only move bytes), unless a deletion vector hides more
  than `compaction.delete-ratio-threshold` of its rows (default 0.2).
* Unaware buckets (`bucket: -1`, rows in any order): the small files of a partition, smallest
  first, are packed into bins closed when they hold more than one file and reach twice the target
  (each file counted with `source.split.open-file-cost`, 4 MB); the last bin is rewritten only with
  at least `compaction.min.file-num` files (default 5).
* Fixed buckets (rows in sequence order): windows of consecutive files in sequence-number order,
  as Paimon's `pickCompactBefore` slides them: a window is picked as soon as it holds
  `compaction.min.file-num` files; it drops its oldest file while it holds twice the target.
  Consecutive files keep the bucket's sequence order intact (the output takes the window's first
  sequence number).
* `strategy: full`: unaware buckets pack every small file and every file with a deletion vector
  (the last bin needs only two files); a fixed bucket with more than one small file, or any
  deletion vector, is rewritten whole. Large files without deletion vectors stay in both
  strategies, so a second run finds nothing to do.

Deletion vectors: an append bucket with any deletion vector is rewritten whole (every live file,
vectors applied), so all of the bucket's deletion-vector index entries leave the index manifest
together; Paimon instead groups files by index file and rewrites the index file's remainder.

Primary-key tables: `strategy: full` compacts a bucket fully (all its sorted runs merged into the
top level `num-levels - 1`) when it has more than one file, a file below the top level, or a
deletion vector. `strategy: minor` picks as Paimon's writer does (universal compaction, with
`ForceUpLevel0Compaction` where the table needs lookup): at most one unit of the bucket's newest
sorted runs per run of the job, written at the level those runs belong to (`universal`).
"""

from __future__ import annotations

from collections.abc import Sequence

from paimon_format.compaction.settings import (
    DELETE_RATIO_THRESHOLD,
    MIN_FILE_NUM,
    NUM_LEVELS,
    OPEN_FILE_COST,
    SMALL_FILE_RATIO,
    BucketFile,
    CompactionSettingError,
    CompactionSettings,
)
from paimon_format.compaction.universal import pick_primary_key_minor

__all__ = [
    "DELETE_RATIO_THRESHOLD",
    "MIN_FILE_NUM",
    "NUM_LEVELS",
    "OPEN_FILE_COST",
    "SMALL_FILE_RATIO",
    "BucketFile",
    "CompactionSettingError",
    "CompactionSettings",
    "pick_bins",
]


def _mostly_deleted(file: BucketFile, settings: CompactionSettings) -> bool:
    if file.deleted_rows is None:
        return False
    return file.deleted_rows > file.meta.row_count * settings.delete_ratio_threshold


def _small(file: BucketFile, settings: CompactionSettings) -> bool:
    return file.meta.file_size < settings.compaction_file_size


def pick_unaware_append(
    files: Sequence[BucketFile], settings: CompactionSettings, full: bool
) -> list[list[BucketFile]]:
    """Bins of one partition of an unaware-bucket append table (see the module docstring)."""
    candidates = [
        f
        for f in files
        if _small(f, settings) or (f.has_deletion_vector if full else _mostly_deleted(f, settings))
    ]
    candidates.sort(key=lambda f: (f.meta.file_size, f.meta.file_name))
    bins: list[list[BucketFile]] = []
    current: list[BucketFile] = []
    weight = 0
    for file in candidates:
        current.append(file)
        weight += file.meta.file_size + settings.open_file_cost
        if len(current) > 1 and weight >= settings.target_file_size * 2:
            bins.append(current)
            current, weight = [], 0
    enough = len(current) > 1 if full else len(current) >= settings.min_file_num
    if current and (
        enough or any(_mostly_deleted(f, settings) or (full and f.has_deletion_vector) for f in current)
    ):
        bins.append(current)
    return bins


def pick_bucketed_append(
    files: Sequence[BucketFile], settings: CompactionSettings, full: bool
) -> list[list[BucketFile]]:
    """Bins of one fixed bucket of an append table: consecutive files in sequence order."""
    ordered = sorted(files, key=lambda f: (f.meta.min_sequence_number, f.meta.file_name))
    if full:
        rewrite = sum(_small(f, settings) for f in ordered) > 1 or any(f.has_deletion_vector for f in ordered)
        return [ordered] if rewrite else []
    bins: list[list[BucketFile]] = []
    window: list[BucketFile] = []
    size = 0
    for file in ordered:
        window.append(file)
        size += file.meta.file_size
        if len(window) >= settings.min_file_num:
            bins.append(window)
            window, size = [], 0
        elif size >= settings.target_file_size * 2:
            size -= window.pop(0).meta.file_size
    return bins


def pick_primary_key_bucket(
    files: Sequence[BucketFile], settings: CompactionSettings
) -> list[list[BucketFile]]:
    """One bin (the whole bucket) when it is not already one clean file at the top level."""
    if not files:
        return []
    settled = (
        len(files) == 1 and files[0].meta.level == settings.top_level and not files[0].has_deletion_vector
    )
    return [] if settled else [list(files)]


def pick_bins(
    files: Sequence[BucketFile],
    settings: CompactionSettings,
    *,
    primary_key: bool,
    unaware_bucket: bool,
    full: bool,
) -> list[list[BucketFile]]:
    """The bins of one (partition, bucket), by table kind and strategy. A primary-key minor bin is a
    `universal.PlacedBin` carrying its output level (`universal.placement_of`)."""
    if primary_key:
        return pick_primary_key_bucket(files, settings) if full else pick_primary_key_minor(files, settings)
    if any(f.has_deletion_vector for f in files):
        return [list(files)]  # the bucket's deletion-vector index entries go as a whole
    if unaware_bucket:
        return pick_unaware_append(files, settings, full)
    return pick_bucketed_append(files, settings, full)
