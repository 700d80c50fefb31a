"""How many tasks read a Parquet source: small files packed together, big sources spread per core."""

from __future__ import annotations

import pyarrow as pa

from jobs.writing.source import OPEN_COST, ParquetFiles

MIB = 1 << 20


def files(*sizes: int | None) -> ParquetFiles:
    paths = tuple(f"/src/part-{i}.parquet" for i in range(len(sizes)))
    return ParquetFiles(paths, {}, pa.schema([("x", pa.int64())]), sizes=tuple(sizes))


def test_a_few_small_files_are_read_by_one_task() -> None:
    # four 0.5 MiB files: one task, so one data file per partition instead of four
    assert files(*[MIB // 2] * 4).tasks(128 * MIB, 2) == 1


def test_a_big_source_gets_splits_of_the_target_size() -> None:
    # 1 GiB in 100 files on 2 cores: splits of 128 MiB, 8 tasks
    assert files(*[1024 * MIB // 100] * 100).tasks(128 * MIB, 2) == 8


def test_many_cores_get_tasks_of_at_least_the_minimum_size() -> None:
    # 400 MiB on 200 cores: tasks of 32 MiB, not 200 tasks writing 2 MiB files
    assert files(*[4 * MIB] * 100).tasks(128 * MIB, 200) == 13


def test_unknown_sizes_count_as_the_open_cost() -> None:
    assert files(None, None, None).tasks(128 * MIB, 3) == 1
    assert files(*[None] * 20).tasks(4 * OPEN_COST, 1) == 5
