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

Primary-key tables: a bucket is fully compacted (all its sorted runs merged into the top level
`num-levels - 1`) when it has more than one file, a file below the top level, or a deletion vector.
That is also the minor strategy for now: Paimon's universal compaction picking is not implemented.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from paimon_format.manifest.entries import DataFileMeta
from paimon_format.model.options import CoreOptions, parse_memory_size

MIN_FILE_NUM = "compaction.min.file-num"
SMALL_FILE_RATIO = "compaction.small-file-ratio"
DELETE_RATIO_THRESHOLD = "compaction.delete-ratio-threshold"
OPEN_FILE_COST = "source.split.open-file-cost"
NUM_LEVELS = "num-levels"


class CompactionSettingError(ValueError):
    """A compaction option of the table (or the job) that cannot be used."""


@dataclass(frozen=True)
class CompactionSettings:
    """The options the picking rules use, with Paimon's defaults (`CoreOptions`)."""

    target_file_size: int
    small_file_ratio: float = 0.7
    min_file_num: int = 5
    open_file_cost: int = 4 * 1024 * 1024
    delete_ratio_threshold: float = 0.2
    num_levels: int = 6

    @property
    def compaction_file_size(self) -> int:
        """Files from this size on are large enough to be left alone (`compactionFileSize`)."""
        return int(self.target_file_size * self.small_file_ratio)

    @property
    def top_level(self) -> int:
        return self.num_levels - 1

    @staticmethod
    def of(
        options: Mapping[str, str], has_primary_key: bool, target_file_size: str | None = None
    ) -> CompactionSettings:
        """Settings from a table's explicit options; `target_file_size` (job config) overrides the table's."""
        core = options if isinstance(options, CoreOptions) else CoreOptions(options)

        def number(key: str, parse, default, low):
            raw = core.get(key)
            if raw is None:
                return default
            try:
                value = parse(str(raw).strip())
            except ValueError:
                raise CompactionSettingError(f"table option {key}={raw!r} is not a valid value") from None
            if value < low:
                raise CompactionSettingError(f"table option {key}={raw!r} must be at least {low}")
            return value

        try:
            target = (
                parse_memory_size(target_file_size)
                if target_file_size is not None
                else core.target_file_size(has_primary_key)
            )
        except ValueError as error:
            raise CompactionSettingError(f"target-file-size: {error}") from None
        if target <= 0:
            raise CompactionSettingError("target-file-size must be positive")
        trigger = number("num-sorted-run.compaction-trigger", int, 5, 1)
        return CompactionSettings(
            target_file_size=target,
            small_file_ratio=number(SMALL_FILE_RATIO, float, 0.7, 0.0),
            min_file_num=number(MIN_FILE_NUM, int, 5, 1),
            open_file_cost=number(OPEN_FILE_COST, parse_memory_size, 4 * 1024 * 1024, 0),
            delete_ratio_threshold=number(DELETE_RATIO_THRESHOLD, float, 0.2, 0.0),
            num_levels=max(number(NUM_LEVELS, int, trigger + 1, 1), 2),
        )


@dataclass(frozen=True)
class BucketFile:
    """One live file of a bucket as the rules see it; `deleted_rows` from its deletion vector (None: none)."""

    meta: DataFileMeta
    deleted_rows: int | None = None

    @property
    def has_deletion_vector(self) -> bool:
        return self.deleted_rows is not None


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
    """The bins of one (partition, bucket), by table kind and strategy."""
    if primary_key:
        return pick_primary_key_bucket(files, settings)
    if any(f.has_deletion_vector for f in files):
        return [list(files)]  # the bucket's deletion-vector index entries go as a whole
    if unaware_bucket:
        return pick_unaware_append(files, settings, full)
    return pick_bucketed_append(files, settings, full)
