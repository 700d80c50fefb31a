"""The compact job's partial progress and slices on local Spark (issue #29): groups commit one by one,
a rival that removed an input of one group costs only that group (retried once, else given up with
exit 3), a crash at any group keeps the groups before it, and bounded runs add up to one full run."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest

from jobs.__main__ import main
from jobs.compact import compact
from jobs.compaction.run import CompactRequest
from jobs.runtime.errors import CommitRaceLost
from jobs.runtime.report import RunRecord
from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.reader import read_data_file
from paimon_format.data.writer import write_table_files
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage import crash_points
from paimon_format.table import Table
from tests.support.pypaimon_reads import pypaimon_rows
from tests.support.table_states import (
    IDENTIFIER,
    build_sample_table,
    fingerprint,
    open_table,
    unreferenced,
)

pytest.importorskip("pypaimon")

DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
# one bucket per commit group, groups in partition order: group 2 is dt=2024-01-02
ONE_PER_GROUP = {"max_commit_bins": 1, "job_order": "partition-asc"}


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """A partitioned append table: 7 commits of 6 rows over 3 partitions (7 small files each)."""
    warehouse = str(tmp_path_factory.mktemp("groups") / "wh")
    build_sample_table(warehouse, commits=7, rows_per_commit=6)
    return warehouse, by_id(pypaimon_rows(warehouse, IDENTIFIER))


@pytest.fixture
def table(template, tmp_path):
    source, rows = template
    warehouse = shutil.copytree(source, str(tmp_path / "wh"))
    return open_table(warehouse), rows


def by_id(rows):
    return sorted(rows, key=lambda row: row["id"])


def rows_of(table: Table):
    return by_id(pypaimon_rows(table.path.rsplit("/", 2)[0], IDENTIFIER))


def files_per_day(table: Table) -> dict[str, int]:
    counts = dict.fromkeys(DAYS, 0)
    for entry in live_entries(table, table.snapshot_manager.latest()):
        counts[table.partition_spec(entry.partition)["dt"]] += 1
    return counts


def rival_rewrites_a_file(table: Table, day: str) -> None:
    """Another writer's compaction of one file of `day`: its rows into a new file, the old one removed."""
    rival = open_table(table.path.rsplit("/", 2)[0])
    entry = next(
        e
        for e in live_entries(rival, rival.snapshot_manager.latest())
        if rival.partition_spec(e.partition)["dt"] == day
    )
    data = pa.Table.from_batches(list(read_data_file(rival, entry.partition, entry.bucket, entry.file)))
    written = write_table_files(rival.file_io, rival.path, rival.schema, data, entry.file.min_sequence_number)
    SnapshotCommit(rival).append(
        [CommitMessage(p, b, entry.total_buckets, files, [entry.file]) for p, b, files in written]
    )


def rival_at(table: Table, calls: set[int]):
    """A `before_commit` hook: the rival rewrites a file of dt=2024-01-02 before the listed commits."""
    seen = []

    def hook() -> None:
        seen.append(1)
        if len(seen) in calls:
            rival_rewrites_a_file(table, "2024-01-02")

    return hook


def test_a_rival_on_one_group_costs_only_that_group_which_is_retried(spark_session, table):
    table, rows = table
    record = compact(
        spark_session, table, CompactRequest(**ONE_PER_GROUP), before_commit=rival_at(table, {2})
    )
    manager = table.snapshot_manager
    kinds = [manager.snapshot(i).commit_kind for i in range(8, manager.latest_id() + 1)]
    assert kinds == ["COMPACT", "OVERWRITE", "COMPACT", "COMPACT"]  # group 1, the rival, group 2 again, 3
    assert record.snapshot_ids["committed_ids"] == [8, 10, 11]
    assert [g["status"] for g in record.details["groups"]] == ["committed", "committed-on-retry", "committed"]
    assert (record.counts["groups"], record.counts["groups_committed"], record.counts["groups_retried"]) == (
        3,
        3,
        1,
    )
    assert record.counts["groups_given_up"] == 0
    assert record.counts["files_rewritten"] == 21  # the conflicted attempt's files are not counted
    assert files_per_day(table) == dict.fromkeys(DAYS, 1)
    assert rows_of(table) == rows
    assert not unreferenced(table), "the conflicted attempt removed what it wrote"


def test_a_group_that_conflicts_twice_is_given_up_with_exit_3_and_the_others_stay(spark_session, table):
    table, rows = table
    record = RunRecord(operation="compact", table=table.path)
    with pytest.raises(CommitRaceLost, match="1 of 3 commit groups gave up .* 2 groups were committed"):
        compact(
            spark_session,
            table,
            CompactRequest(**ONE_PER_GROUP),
            record=record,
            before_commit=rival_at(table, {2, 3}),
        )
    assert [g["status"] for g in record.details["groups"]] == ["committed", "given-up", "committed"]
    assert (record.counts["groups_committed"], record.counts["groups_given_up"]) == (2, 1)
    assert files_per_day(table) == {"2024-01-01": 1, "2024-01-02": 7, "2024-01-03": 1}
    assert rows_of(table) == rows
    assert not unreferenced(table)
    rerun = compact(spark_session, table, CompactRequest(**ONE_PER_GROUP))  # the next run takes the rest
    assert rerun.counts["groups"] == 1 and files_per_day(table) == dict.fromkeys(DAYS, 1)


def test_without_partial_progress_one_commit_and_a_rival_is_exit_3(spark_session, table):
    table, rows = table
    request = CompactRequest(partial_progress=False, max_commit_bins=1)
    with pytest.raises(CommitRaceLost, match="removed"):
        compact(spark_session, table, request, before_commit=rival_at(table, {1}))
    assert table.snapshot_manager.latest().commit_kind == "OVERWRITE" and not unreferenced(table)
    record = compact(spark_session, table, request)
    assert record.counts["groups"] == 1 and record.snapshot_ids["committed_ids"] == [9]
    assert files_per_day(table) == dict.fromkeys(DAYS, 1) and rows_of(table) == rows


class Crash(BaseException):  # like a kill: no cleanup handler of the job runs
    pass


def _crash(step: str) -> None:
    raise Crash(step)


@pytest.mark.parametrize(
    ("step", "committed"),
    [("compact:after-commit#1", 1), ("compact:after-files-written#2", 1)],  # the matrix: scripts/chaos.py
)
def test_a_crash_at_a_group_keeps_the_groups_before_it_and_a_rerun_finishes(
    spark_session, table, step, committed
):
    from jobs.remove_orphan_files import OrphanSettings, remove_orphan_files

    table, rows = table
    name, _, nth = step.partition("#")
    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(_crash)
    os.environ[crash_points.CRASH_ENV], os.environ[crash_points.SKIP_ENV] = name, str(int(nth) - 1)
    try:
        with pytest.raises(Crash):
            compact(spark_session, table, CompactRequest(**ONE_PER_GROUP))
    finally:
        os.environ.pop(crash_points.CRASH_ENV, None)
        os.environ.pop(crash_points.SKIP_ENV, None)
        crash_points.set_crash_handler(previous)
    assert table.snapshot_manager.latest_id() == 7 + committed
    assert rows_of(table) == rows
    rerun = compact(spark_session, table, CompactRequest(**ONE_PER_GROUP))
    assert rerun.counts["groups"] == 3 - committed
    assert table.snapshot_manager.latest_id() == 10, "three COMPACT snapshots in all, none twice"
    assert files_per_day(table) == dict.fromkeys(DAYS, 1) and rows_of(table) == rows
    leftovers = unreferenced(table)
    assert bool(leftovers) == ("files-written" in step), "only the group in flight leaves files"
    remove_orphan_files(
        spark_session, table, OrphanSettings(older_than_ms=0, force=True, max_orphan_ratio=1.0)
    )
    assert not unreferenced(table) and rows_of(table) == rows


def test_two_bounded_runs_compact_what_one_unbounded_run_does(spark_session, table, tmp_path):
    table, rows = table
    whole = open_table(shutil.copytree(table.path.rsplit("/", 2)[0], str(tmp_path / "whole")))
    plan = compact(spark_session, table, CompactRequest(), dry_run=True)
    bound = plan.bytes["files_before"] * 7 // 10  # two of the three (equal) partitions fit
    first = compact(spark_session, table, CompactRequest(max_bytes_per_run=bound))
    assert first.counts["buckets"] == 2 and first.counts["buckets_left_for_next_run"] == 1
    assert sorted(files_per_day(table).values()) == [1, 1, 7]
    second = compact(spark_session, table, CompactRequest(max_bytes_per_run=bound))
    assert second.counts["buckets"] == 1 and "buckets_left_for_next_run" not in second.counts
    assert compact(spark_session, table, CompactRequest(max_bytes_per_run=bound)).counts["bins"] == 0
    compact(spark_session, whole, CompactRequest())
    assert files_per_day(table) == files_per_day(whole) == dict.fromkeys(DAYS, 1)
    assert rows_of(table) == rows_of(whole) == rows


def test_dry_run_lists_the_commit_groups_and_changes_nothing(spark_session, table):
    table, _rows = table
    before = fingerprint(table.path)
    record = compact(spark_session, table, CompactRequest(**ONE_PER_GROUP), dry_run=True)
    assert record.counts["groups"] == 3
    assert [(g["group"], g["bins"], g["files"], g["status"]) for g in record.details["groups"]] == [
        (1, 1, 7, "planned"),
        (2, 1, 7, "planned"),
        (3, 1, 7, "planned"),
    ]
    assert fingerprint(table.path) == before


def test_bucket_ranges_compact_only_those_buckets(spark_session, tmp_path, capsys):
    from tests.support.factories import make_table

    warehouse = str(tmp_path / "wh")
    pk = make_table(f"{warehouse}/db.db/pk", partition_keys=(), primary_keys=("id",), options={"bucket": "4"})
    for step in range(3):
        ids = list(range(40))
        data = pa.table({"id": pa.array(ids, pa.int64()), "dt": ["d"] * 40, "v": [f"v{step}"] * 40})
        written = write_table_files(pk.file_io, pk.path, pk.schema, data, step * 100)
        SnapshotCommit(pk).append([CommitMessage(p, b, 4, files) for p, b, files in written])
    expected = by_id(pypaimon_rows(warehouse, "db.pk"))
    compact(spark_session, pk, CompactRequest(strategy="full", bucket_ranges=((0, 1), (3, 3))))
    per_bucket: dict[int, int] = {}
    for entry in live_entries(pk, pk.snapshot_manager.latest()):
        per_bucket[entry.bucket] = per_bucket.get(entry.bucket, 0) + 1
    assert per_bucket == {0: 1, 1: 1, 2: 3, 3: 1}
    assert by_id(pypaimon_rows(warehouse, "db.pk")) == expected
    before = fingerprint(pk.path)
    config = tmp_path / "compact.yaml"
    config.write_text(f"warehouse: {warehouse}\ntable: db.pk\nbuckets: '2,5-7'\n")
    assert main(["compact", "--config", str(config)]) == 2
    assert "buckets 5-7 do not exist (the table has 4 buckets" in capsys.readouterr().err
    assert fingerprint(pk.path) == before
    config.write_text(f"warehouse: {warehouse}\ntable: db.pk\nbuckets: '2-x'\n")
    assert main(["compact", "--config", str(config)]) == 2
    assert "'2-x' is not a bucket id" in capsys.readouterr().err


def test_the_rival_check_skips_the_snapshots_of_the_runs_own_groups(spark_session, table):
    """Group 1's snapshot expires (a writer's own expiry) before group 3 commits: group 3's check of
    rivals since the plan does not read it (it compacted other buckets), so nothing is retried; the
    check reading it would find it gone and throw group 3's work away."""
    table, rows = table
    seen: list[int] = []

    def expire_group_1() -> None:
        seen.append(1)
        if len(seen) == 3:
            os.remove(os.path.join(table.path, "snapshot", "snapshot-8"))

    record = compact(spark_session, table, CompactRequest(**ONE_PER_GROUP), before_commit=expire_group_1)
    assert [g["status"] for g in record.details["groups"]] == ["committed"] * 3
    assert record.snapshot_ids["committed_ids"] == [8, 9, 10] and record.counts["groups_retried"] == 0
    assert rows_of(table) == rows
