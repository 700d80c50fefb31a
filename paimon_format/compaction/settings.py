"""The options compaction picking reads from a table, with Paimon's defaults, and a bucket's file.

Kept apart from the picking rules (`rules`, `universal`) so both can use them without importing
each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from paimon_format.errors import UnsupportedOperationError
from paimon_format.manifest.entries import DataFileMeta
from paimon_format.merge.interface import option_flag
from paimon_format.model.options import CoreOptions, parse_memory_size

MIN_FILE_NUM = "compaction.min.file-num"
SMALL_FILE_RATIO = "compaction.small-file-ratio"
DELETE_RATIO_THRESHOLD = "compaction.delete-ratio-threshold"
OPEN_FILE_COST = "source.split.open-file-cost"
NUM_LEVELS = "num-levels"
SORTED_RUN_TRIGGER = "num-sorted-run.compaction-trigger"
MAX_SIZE_AMPLIFICATION = "compaction.max-size-amplification-percent"
SIZE_RATIO = "compaction.size-ratio"
OPTIMIZATION_INTERVAL = "compaction.optimization-interval"
FORCE_LOOKUP = "force-lookup"


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
    # primary-key minor compaction (`universal`)
    sorted_run_trigger: int = 5
    max_size_amplification: int = 200
    size_ratio: int = 1
    optimization_interval: bool = False  # `compaction.optimization-interval` set: every run is full
    needs_lookup: bool = False  # Paimon's `needLookup`: level-0 files are always compacted up
    deletion_vectors: bool = False  # retractions may go at any output level above 0
    lookup_whole_bucket: bool = False  # this job cannot look keys up in runs left out: widen units

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
        trigger = number(SORTED_RUN_TRIGGER, int, 5, 1)
        return CompactionSettings(
            target_file_size=target,
            small_file_ratio=number(SMALL_FILE_RATIO, float, 0.7, 0.0),
            min_file_num=number(MIN_FILE_NUM, int, 5, 1),
            open_file_cost=number(OPEN_FILE_COST, parse_memory_size, 4 * 1024 * 1024, 0),
            delete_ratio_threshold=number(DELETE_RATIO_THRESHOLD, float, 0.2, 0.0),
            num_levels=max(number(NUM_LEVELS, int, trigger + 1, 1), 2),
            sorted_run_trigger=trigger,
            max_size_amplification=number(MAX_SIZE_AMPLIFICATION, int, 200, 0),
            size_ratio=number(SIZE_RATIO, int, 1, 0),
            optimization_interval=bool((core.get(OPTIMIZATION_INTERVAL) or "").strip()),
            **_lookup_flags(core) if has_primary_key else {},
        )


def _lookup_flags(core: CoreOptions) -> dict[str, bool]:
    """The table's lookup traits for the minor picking (see `universal`)."""
    try:
        force_lookup = option_flag(core, FORCE_LOOKUP)
    except UnsupportedOperationError as error:
        raise CompactionSettingError(str(error)) from None
    vectors = core.deletion_vectors_enabled
    lookup_producer = core.changelog_producer == "lookup"
    return {
        "needs_lookup": core.merge_engine == "first-row" or lookup_producer or vectors or force_lookup,
        "deletion_vectors": vectors,
        "lookup_whole_bucket": core.merge_engine == "first-row" or lookup_producer or vectors or force_lookup,
    }


@dataclass(frozen=True)
class BucketFile:
    """One live file of a bucket as the rules see it; `deleted_rows` from its deletion vector (None: none)."""

    meta: DataFileMeta
    deleted_rows: int | None = None

    @property
    def has_deletion_vector(self) -> bool:
        return self.deleted_rows is not None
