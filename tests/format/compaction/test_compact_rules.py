"""Paimon's compaction picking rules (paimon_format.compaction.rules), on file metadata alone."""

from __future__ import annotations

import dataclasses

import pytest

from paimon_format.compaction.rules import (
    BucketFile,
    CompactionSettingError,
    CompactionSettings,
    pick_bucketed_append,
    pick_primary_key_bucket,
    pick_unaware_append,
)
from tests.support.factories import data_file

MB = 1024 * 1024
SETTINGS = CompactionSettings(target_file_size=100 * MB, open_file_cost=0)


def files(*sizes_mb: float, level: int = 0) -> list[BucketFile]:
    result = []
    for index, size in enumerate(sizes_mb):
        meta = data_file(f"f{index}", rows=10, level=level, sequence=index * 10)
        result.append(BucketFile(dataclasses.replace(meta, file_size=int(size * MB))))
    return result


def names(bins: list[list[BucketFile]]) -> list[list[str]]:
    return [[f.meta.file_name for f in b] for b in bins]


def test_settings_defaults_and_overrides() -> None:
    settings = CompactionSettings.of({}, has_primary_key=False)
    assert settings.target_file_size == 256 * MB
    assert settings.compaction_file_size == int(256 * MB * 0.7)
    assert (settings.min_file_num, settings.top_level) == (5, 5)
    tuned = CompactionSettings.of(
        {
            "compaction.min.file-num": "3",
            "num-sorted-run.compaction-trigger": "3",
            "target-file-size": "64 mb",
        },
        has_primary_key=True,
        target_file_size="32 mb",
    )
    assert (tuned.min_file_num, tuned.top_level, tuned.target_file_size) == (3, 3, 32 * MB)
    with pytest.raises(CompactionSettingError, match="compaction.min.file-num"):
        CompactionSettings.of({"compaction.min.file-num": "many"}, has_primary_key=False)


def test_unaware_minor_packs_small_files_and_needs_min_file_num() -> None:
    # 80 MB and 90 MB are large (>= 70 MB); four small files are fewer than five: nothing to do
    assert pick_unaware_append(files(1, 2, 3, 4, 80, 90), SETTINGS, full=False) == []
    picked = pick_unaware_append(files(5, 1, 4, 2, 3, 95), SETTINGS, full=False)
    assert names(picked) == [["f1", "f3", "f4", "f2", "f0"]]  # smallest first, the large file stays


def test_unaware_minor_closes_a_bin_at_twice_the_target() -> None:
    picked = pick_unaware_append(files(60, 60, 60, 60, 1), SETTINGS, full=False)
    # 1 + 60 + 60 + 60 = 181 < 200; + 60 = 241 closes the first bin; nothing is left
    assert names(picked) == [["f4", "f0", "f1", "f2", "f3"]]
    two = pick_unaware_append(files(*[65] * 7), SETTINGS, full=False)
    assert [len(b) for b in two] == [4]  # 4 x 65 = 260 >= 200; the 3 left over are fewer than 5


def test_unaware_full_rewrites_any_two_small_files() -> None:
    assert names(pick_unaware_append(files(1, 2, 90), SETTINGS, full=True)) == [["f0", "f1"]]
    assert pick_unaware_append(files(1, 90), SETTINGS, full=True) == []


def test_bucketed_minor_slides_a_window_in_sequence_order() -> None:
    picked = pick_bucketed_append(files(1, 1, 1, 1, 1, 1, 1), SETTINGS, full=False)
    assert names(picked) == [["f0", "f1", "f2", "f3", "f4"]]
    # a big file at the start is dropped from the window once it holds twice the target
    picked = pick_bucketed_append(files(250, 1, 1, 1, 1, 1), SETTINGS, full=False)
    assert names(picked) == [["f1", "f2", "f3", "f4", "f5"]]


def test_primary_key_bucket_is_settled_only_as_one_top_level_file() -> None:
    assert pick_primary_key_bucket(files(1, level=5), SETTINGS) == []
    assert names(pick_primary_key_bucket(files(1, level=0), SETTINGS)) == [["f0"]]
    assert len(pick_primary_key_bucket(files(1, 1, level=5), SETTINGS)[0]) == 2
