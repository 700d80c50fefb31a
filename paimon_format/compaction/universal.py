"""Primary-key minor compaction: Paimon's universal compaction picking, as plain functions.

What Paimon does (read in apache/paimon, `UniversalCompaction`, `ForceUpLevel0Compaction`,
`CompactStrategy`, `Levels`, `MergeTreeCompactManager`, `MergeTreeCompactTask`, the rewriters and
`CoreOptions`; the test oracle's bundle is 1.0, whose rules this module follows):

Sorted runs. A bucket is a merge tree of `num-levels` levels (default: the run trigger + 1, and at
least one above the highest level a file is on). Each level-0 file is a sorted run of its own, the
newest (largest max sequence number, then file name) first; every non-empty level above 0 is one
run, lower levels first. So the run list goes from the newest, smallest data to the oldest.

Picking (`UniversalCompaction.pick`), the first rule that yields a unit wins:
1. `compaction.optimization-interval`: when it has passed since the writer's last full compaction
   (a writer that never did one counts as due), everything is compacted to the top level. Every run
   of this job is a new writer, so with the option set each run is a full compaction.
2. Size amplification: with at least `num-sorted-run.compaction-trigger` runs (default 5), when the
   runs but the oldest hold more than `compaction.max-size-amplification-percent` (default 200) of
   the oldest run's size, everything is compacted to the top level.
3. Size ratio: with at least trigger runs, start from the newest run and keep adding the next older
   run while the candidates' total size * (100 + `compaction.size-ratio` (default 1)) / 100 is not
   below that run's size; more than one run picked makes a unit.
4. Run count: with more than trigger runs, the newest `runs - trigger + 1` runs are taken as
   candidates, then widened by the size-ratio rule of 3 (and picked even if the ratio adds none).
A unit's output level: the top level when it takes every run; otherwise one below the level of the
first run left out. Level 0 is never an output: when that gives 0, the following runs are added up
to and including the first one above level 0, whose level becomes the output (the top level when
that leaves no run out). Paimon 1.4 later also keeps adding level-0/1 runs once a unit is
triggered; the 1.0 rule is the one here. A unit of a single file already at its output level is
dropped (`MergeTreeCompactManager`).

Tables whose writer looks keys up (`needLookup`: first-row, changelog-producer lookup, deletion
vectors, force-lookup) compact with `ForceUpLevel0Compaction`: when the universal rules pick
nothing, the level-0 runs are picked anyway (widened by the size ratio), so no row stays at level 0
(readers of deletion-vector and first-row tables skip level 0).

Retractions (-U/-D) may be dropped only when the output level is not 0 and is at least the highest
non-empty level of the bucket (no older row of the key can remain below), or on deletion-vector
tables (there the lookup marks older rows deleted instead). Elsewhere they are written again, with
their value kinds, so that they still cancel the older rows they retract. Rows keep their sequence
numbers; output files are file source COMPACT, at the output level.

Changelog at compaction: the full-compaction producer writes changelog only when the output is the
top level (a unit with every run); the lookup producer emits it for the keys that have level-0 rows,
with "before" found by looking the key up in the levels above the output (`LookupLevels`).
`full-compaction.delta-commits` is a writer-side trigger: a streaming writer fully compacts every
that many commits; a batch job keeps no commit count, so it is not emulated here (`strategy: full`
is the job's full compaction).

What this job does differently. Paimon's task moves a large file that overlaps nothing to the output
level by metadata alone (an "upgrade"); this job rewrites every file of a unit. Paimon's lookup
rewriters look keys up in the runs left out of a unit: for the lookup changelog ("before" rows),
for deletion vectors (the older row of each rewritten key gets deleted in its vector), for
first-row (a new row of a key an upper level holds is dropped: Paimon's first-row batch read does
not merge levels, it trusts that no key is in two levels above 0) and for the lookup merge (which
merges level-0 rows with only the newest upper row, trusting it holds all the older ones). This
job cannot look into runs it does not read, so on every table that needs lookup a unit that leaves
a run out is widened to the whole bucket at the top level: correct, but a full compaction of that
bucket (ForceUpLevel0 then means: a bucket with level-0 files is compacted whole). So is a unit of a
bucket holding any deletion vector (left from before `deletion-vectors.enabled` was turned off):
the job replaces a compacted bucket's vectors as a whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from paimon_format.compaction.settings import BucketFile, CompactionSettings


@dataclass(frozen=True)
class LevelRun:
    """One sorted run: a level-0 file alone, or every file of one level above 0."""

    level: int
    files: tuple[BucketFile, ...]

    @property
    def size(self) -> int:
        return sum(f.meta.file_size for f in self.files)


@dataclass(frozen=True)
class CompactUnit:
    """The runs one compaction merges and where its output goes."""

    output_level: int
    runs: tuple[LevelRun, ...]

    @property
    def files(self) -> list[BucketFile]:
        return [f for run in self.runs for f in run.files]


@dataclass(frozen=True)
class Placement:
    """Where a primary-key bin's rewrite writes (picklable, travels with the bin)."""

    output_level: int
    drop_deletes: bool


class PlacedBin(list):
    """A bin (a list of `BucketFile`) that carries its `Placement`."""

    placement: Placement

    def __init__(self, files: Sequence[BucketFile], placement: Placement) -> None:
        super().__init__(files)
        self.placement = placement


def level_sorted_runs(files: Sequence[BucketFile]) -> list[LevelRun]:
    """The bucket's sorted runs, newest first (Paimon's `Levels.levelSortedRuns`)."""
    level0 = sorted(
        (f for f in files if f.meta.level == 0), key=lambda f: (-f.meta.max_sequence_number, f.meta.file_name)
    )
    runs = [LevelRun(0, (f,)) for f in level0]
    for level in sorted({f.meta.level for f in files if f.meta.level > 0}):
        ordered = sorted((f for f in files if f.meta.level == level), key=lambda f: f.meta.min_key)
        runs.append(LevelRun(level, tuple(ordered)))
    return runs


def max_level(files: Sequence[BucketFile], settings: CompactionSettings) -> int:
    """The top level: `num-levels - 1`, raised to the highest level a file is on (`Levels`)."""
    return max([settings.top_level, *(f.meta.level for f in files)])


def create_unit(runs: Sequence[LevelRun], top: int, count: int) -> CompactUnit:
    """The newest `count` runs and their output level, never level 0 (see the module docstring)."""
    output = top if count == len(runs) else max(0, runs[count].level - 1)
    if output == 0:
        while count < len(runs):
            count += 1
            if runs[count - 1].level != 0:
                output = runs[count - 1].level
                break
    if count == len(runs):
        output = top
    return CompactUnit(output, tuple(runs[:count]))


def pick_size_amplification(
    runs: Sequence[LevelRun], top: int, settings: CompactionSettings
) -> CompactUnit | None:
    """Everything, when the newer runs outgrow the oldest by the allowed amplification."""
    if len(runs) < settings.sorted_run_trigger:
        return None
    newer = sum(run.size for run in runs[:-1])
    if newer * 100 > settings.max_size_amplification * runs[-1].size:
        return CompactUnit(top, tuple(runs))
    return None


def pick_size_ratio(
    runs: Sequence[LevelRun], top: int, settings: CompactionSettings, count: int = 1, force: bool = False
) -> CompactUnit | None:
    """The newest `count` runs, widened while the next run is not much larger than them together."""
    size = sum(run.size for run in runs[:count])
    while count < len(runs):
        following = runs[count].size
        if size * (100.0 + settings.size_ratio) / 100.0 < following:
            break
        size += following
        count += 1
    return create_unit(runs, top, count) if force or count > 1 else None


def pick_universal(runs: Sequence[LevelRun], top: int, settings: CompactionSettings) -> CompactUnit | None:
    """Paimon's `UniversalCompaction.pick` (with `ForceUpLevel0Compaction` when the table needs lookup)."""
    if not runs:
        return None
    if settings.optimization_interval:
        return CompactUnit(top, tuple(runs))
    unit = pick_size_amplification(runs, top, settings)
    if unit is None and len(runs) >= settings.sorted_run_trigger:
        unit = pick_size_ratio(runs, top, settings)
    if unit is None and len(runs) > settings.sorted_run_trigger:
        unit = pick_size_ratio(runs, top, settings, len(runs) - settings.sorted_run_trigger + 1)
    if unit is None and settings.needs_lookup:
        level0 = sum(1 for run in runs if run.level == 0)
        if level0:
            unit = pick_size_ratio(runs, top, settings, level0, force=True)
    return unit


def pick_primary_key_minor(
    files: Sequence[BucketFile], settings: CompactionSettings
) -> list[list[BucketFile]]:
    """The bucket's one minor-compaction bin (a `PlacedBin`), or none: what the bucket's writer would
    compact next. The unit is widened to the whole bucket where this job cannot look keys up in the
    runs it leaves out (see the module docstring)."""
    runs = level_sorted_runs(files)
    top = max_level(files, settings)
    unit = pick_universal(runs, top, settings)
    if unit is None:
        return []
    # a bucket's deletion vectors leave the index together (the job drops the bucket's entries)
    vectors = any(f.has_deletion_vector for f in files)
    if (settings.lookup_whole_bucket or vectors) and len(unit.runs) < len(runs):
        unit = CompactUnit(top, tuple(runs))
    chosen = unit.files
    if not chosen or (len(chosen) == 1 and chosen[0].meta.level == unit.output_level):
        return []
    highest = max(f.meta.level for f in files)
    drop = unit.output_level != 0 and (unit.output_level >= highest or settings.deletion_vectors)
    return [PlacedBin(chosen, Placement(unit.output_level, drop))]


def placement_of(chosen: Sequence[BucketFile]) -> Placement | None:
    """The placement a picked bin carries (None: the default, the top level with retractions dropped)."""
    return chosen.placement if isinstance(chosen, PlacedBin) else None
