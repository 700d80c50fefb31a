"""Primary-key minor compaction: Paimon's universal compaction picking (`compaction.universal`)."""

from __future__ import annotations

import dataclasses

import pytest

from paimon_format.compaction.rules import CompactionSettingError, CompactionSettings, pick_bins
from paimon_format.compaction.settings import BucketFile
from paimon_format.compaction.universal import (
    Placement,
    level_sorted_runs,
    pick_primary_key_minor,
    placement_of,
)
from tests.support.factories import data_file

SETTINGS = CompactionSettings(target_file_size=1 << 30)
_sequence = iter(range(0, 1 << 40, 1000))


def bucket(*runs: tuple[int, float]) -> list[BucketFile]:
    """Files (level, size) given oldest first; each gets higher sequence numbers than the last."""
    result = []
    for index, (level, size) in enumerate(runs):
        meta = data_file(f"f{index}", rows=10, level=level, sequence=next(_sequence))
        result.append(BucketFile(dataclasses.replace(meta, file_size=int(size))))
    return result


def pick(
    files: list[BucketFile], settings: CompactionSettings = SETTINGS
) -> tuple[list[str], Placement | None]:
    bins = pick_primary_key_minor(files, settings)
    assert len(bins) <= 1
    if not bins:
        return [], None
    return sorted(f.meta.file_name for f in bins[0]), placement_of(bins[0])


def test_sorted_runs_level0_newest_first_then_one_run_per_level() -> None:
    files = bucket((5, 100), (3, 10), (3, 10), (0, 1), (0, 1), (0, 1))
    runs = level_sorted_runs(files)
    assert [run.level for run in runs] == [0, 0, 0, 3, 5]
    assert [f.meta.file_name for f in runs[0].files] == ["f5"]  # the newest level-0 file first
    assert [sorted(f.meta.file_name for f in run.files) for run in runs[3:]] == [["f1", "f2"], ["f0"]]
    assert runs[3].size == 20


def test_fewer_runs_than_the_trigger_pick_nothing() -> None:
    # one big top-level run and three small level-0 runs: four runs < trigger 5
    assert pick(bucket((5, 1000), (0, 1), (0, 1), (0, 1))) == ([], None)
    assert pick(
        bucket((5, 1000), (0, 1), (0, 1), (0, 1)), dataclasses.replace(SETTINGS, sorted_run_trigger=4)
    )[0]


def test_size_ratio_takes_the_small_new_runs_into_the_level_below_the_big_one() -> None:
    files = bucket((5, 1000), (0, 1), (0, 1), (0, 1), (0, 1))
    chosen, placement = pick(files)
    assert chosen == ["f1", "f2", "f3", "f4"]  # the top run stays
    # output one below the first run left out; retractions kept: level 5 still holds older rows
    assert placement == Placement(output_level=4, drop_deletes=False)


def test_size_ratio_stops_at_a_run_larger_than_the_candidates_by_the_ratio() -> None:
    # 1+1+2 = 4: 4 * 1.01 >= 4 takes the 4-byte run, 8 * 1.01 < 9 stops before the 9-byte one
    files = bucket((5, 1000), (4, 9), (0, 4), (0, 2), (0, 1), (0, 1))
    chosen, placement = pick(files)
    assert chosen == ["f2", "f3", "f4", "f5"]
    assert placement == Placement(3, False)
    # compaction.size-ratio 20: 8 * 1.2 >= 9 takes level 4 too, 17 * 1.2 < 1000 stops there
    chosen, placement = pick(files, dataclasses.replace(SETTINGS, size_ratio=20))
    assert chosen == ["f1", "f2", "f3", "f4", "f5"] and placement == Placement(4, False)


def test_size_amplification_compacts_everything_to_the_top_level() -> None:
    # newer runs 4 bytes against an oldest run of 1: 400% > 200%
    files = bucket((5, 1), (0, 1), (0, 1), (0, 1), (0, 1))
    chosen, placement = pick(files)
    assert chosen == ["f0", "f1", "f2", "f3", "f4"] and placement == Placement(5, True)
    # newer 103 against 50 (206% > 200%), though the size ratio alone would stop at the level-3 run
    files = bucket((5, 50), (3, 100), (0, 1), (0, 1), (0, 1))
    assert pick(files) == (["f0", "f1", "f2", "f3", "f4"], Placement(5, True))
    no_amplification = dataclasses.replace(SETTINGS, max_size_amplification=300)
    assert pick(files, no_amplification) == (["f2", "f3", "f4"], Placement(2, False))
    files = bucket((5, 1), (0, 1), (0, 1), (0, 1), (0, 1))
    # compaction.max-size-amplification-percent 500: not amplified enough, the size ratio rule picks
    chosen, placement = pick(files, dataclasses.replace(SETTINGS, max_size_amplification=500))
    assert chosen == ["f0", "f1", "f2", "f3", "f4"]  # 4 * 1.01 >= 1: ratio reaches the top run too


def test_run_count_takes_the_newest_runs_and_never_outputs_level_0() -> None:
    # sizes grow tenfold: no ratio pick; 7 runs > 5: the newest 3 are taken, the next run is level 0
    # -> the output moves up to the next run above level 0 (level 1), which joins the unit
    files = bucket((5, 10**7), (3, 10**5), (2, 10**4), (1, 1000), (0, 100), (0, 10), (0, 1))
    assert len(level_sorted_runs(files)) == 7
    chosen, placement = pick(files)
    assert chosen == ["f3", "f4", "f5", "f6"]
    assert placement == Placement(1, False)


def test_retractions_dropped_when_the_output_is_the_highest_non_empty_level() -> None:
    # the oldest run is at level 2 (num-levels 6): an output at level 1 still has level 2 below
    files = bucket((2, 10**6), (1, 1000), (0, 1), (0, 1), (0, 1), (0, 1))
    assert pick(files)[1] == Placement(1, False)
    # no ratio pick: 4 * 1.01 < 5 stops before the level-2 run, which stays below the output
    assert pick(bucket((2, 5), (0, 1), (0, 1), (0, 1), (0, 1)))[1] == Placement(1, False)
    # the unit reaching the oldest run (size amplification 400% > 200%) goes to the top and drops them
    assert pick(bucket((2, 1), (0, 1), (0, 1), (0, 1), (0, 1)))[1] == Placement(5, True)
    # deletion vectors: dropped at any output level above 0
    vectors = dataclasses.replace(SETTINGS, deletion_vectors=True)
    assert pick(bucket((5, 1000), (0, 1), (0, 1), (0, 1), (0, 1)), vectors)[1] == Placement(4, True)


def test_force_up_level0_when_the_table_needs_lookup() -> None:
    files = bucket((5, 1000), (0, 1))
    assert pick(files) == ([], None)  # two runs: the universal rules pick nothing
    lookup = dataclasses.replace(SETTINGS, needs_lookup=True)
    assert pick(files, lookup) == (["f1"], Placement(4, False))  # the level-0 file goes up alone
    assert pick(bucket((5, 1000)), lookup) == ([], None)  # nothing at level 0
    # a table whose compaction must look keys up in the runs left out: the whole bucket
    whole = dataclasses.replace(lookup, lookup_whole_bucket=True)
    assert pick(files, whole) == (["f0", "f1"], Placement(5, True))


def test_a_bucket_with_deletion_vectors_is_compacted_whole() -> None:
    files = bucket((5, 1000), (0, 1), (0, 1), (0, 1), (0, 1))
    files[0] = dataclasses.replace(files[0], deleted_rows=2)  # vectors left from an earlier setting
    assert pick(files) == (["f0", "f1", "f2", "f3", "f4"], Placement(5, True))


def test_optimization_interval_compacts_fully_unless_settled() -> None:
    interval = dataclasses.replace(SETTINGS, optimization_interval=True)
    assert pick(bucket((5, 1000), (0, 1)), interval) == (["f0", "f1"], Placement(5, True))
    assert pick(bucket((5, 1000)), interval) == ([], None)  # one file already at its output level


def test_top_level_follows_files_above_num_levels() -> None:
    # num-levels 3 but a file on level 4 (the option was lowered): Paimon's Levels keep 5 levels
    files = bucket((4, 1), (0, 1), (0, 1), (0, 1), (0, 1))
    assert pick(files, dataclasses.replace(SETTINGS, num_levels=3))[1] == Placement(4, True)


def test_pick_bins_minor_vs_full_on_primary_key_tables() -> None:
    files = bucket((5, 1000), (0, 1), (0, 1))
    assert pick_bins(files, SETTINGS, primary_key=True, unaware_bucket=False, full=False) == []
    (full,) = pick_bins(files, SETTINGS, primary_key=True, unaware_bucket=False, full=True)
    assert len(full) == 3 and placement_of(full) is None  # the whole bucket, at the top level


@pytest.mark.parametrize(
    ("options", "flags"),
    [
        ({}, (False, False, False)),
        ({"merge-engine": "first-row"}, (True, False, True)),
        ({"force-lookup": "true"}, (True, False, True)),
        ({"changelog-producer": "lookup"}, (True, False, True)),
        ({"changelog-producer": "full-compaction"}, (False, False, False)),
        ({"deletion-vectors.enabled": "true"}, (True, True, True)),
    ],
)
def test_settings_lookup_traits(options: dict[str, str], flags: tuple[bool, bool, bool]) -> None:
    settings = CompactionSettings.of(options, has_primary_key=True)
    assert (settings.needs_lookup, settings.deletion_vectors, settings.lookup_whole_bucket) == flags


def test_settings_universal_options_and_defaults() -> None:
    default = CompactionSettings.of({}, has_primary_key=True)
    assert (default.sorted_run_trigger, default.max_size_amplification, default.size_ratio) == (5, 200, 1)
    assert not default.optimization_interval
    tuned = CompactionSettings.of(
        {
            "num-sorted-run.compaction-trigger": "3",
            "compaction.max-size-amplification-percent": "50",
            "compaction.size-ratio": "10",
            "compaction.optimization-interval": "1 h",
        },
        has_primary_key=True,
    )
    assert (tuned.sorted_run_trigger, tuned.max_size_amplification, tuned.size_ratio) == (3, 50, 10)
    assert tuned.optimization_interval and tuned.top_level == 3
    with pytest.raises(CompactionSettingError, match="compaction.size-ratio"):
        CompactionSettings.of({"compaction.size-ratio": "-1"}, has_primary_key=True)
    with pytest.raises(CompactionSettingError, match="force-lookup"):
        CompactionSettings.of({"force-lookup": "maybe"}, has_primary_key=True)
