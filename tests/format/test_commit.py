"""SnapshotCommit: snapshots, counts, overwrite, conflicts, races, retries and manifest merging."""

from __future__ import annotations

import multiprocessing
import os

import pytest

from paimon_format.commit import OVERWRITE, CommitMessage, SnapshotCommit
from paimon_format.errors import CommitConflictError, CommitRetriesExhaustedError, StorageError
from paimon_format.maintenance.references import referenced_files
from paimon_format.manifest.codec import read_manifest_list
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.support.factories import data_file, make_table, message, partition_of


def live_names(table: Table, snapshot_id: int | None = None) -> set[str]:
    manager = table.snapshot_manager
    snapshot = manager.snapshot(snapshot_id) if snapshot_id else manager.latest()
    return {entry.file.file_name for entry in live_entries(table, snapshot)}


def manifest_dir_names(table: Table) -> set[str]:
    return {
        os.path.basename(s.path) for s in table.file_io.list_dir(table.file_io.join(table.path, "manifest"))
    }


@pytest.fixture
def table(tmp_path) -> Table:
    return make_table(str(tmp_path / "db.db" / "t"))


def test_first_commit_creates_snapshot_one_with_counts_and_hint(table):
    snapshot = SnapshotCommit(table).append([message(table, ["a"], data_file("data-a-0.parquet", rows=7))])

    assert snapshot is not None and snapshot.id == 1
    assert (snapshot.commit_kind, snapshot.total_record_count, snapshot.delta_record_count) == (
        "APPEND",
        7,
        7,
    )
    assert snapshot.commit_identifier == 2**63 - 1
    assert table.file_io.read_bytes(table.file_io.join(table.path, "snapshot", "LATEST")) == b"1"
    assert live_names(table) == {"data-a-0.parquet"}
    reread = table.snapshot_manager.snapshot(1)
    assert reread.base_manifest_list_size == table.file_io.size(
        table.manifest_path(reread.base_manifest_list)
    )
    assert reread.delta_manifest_list_size == table.file_io.size(
        table.manifest_path(reread.delta_manifest_list)
    )


def test_appends_accumulate_files_and_record_counts(table):
    committer = SnapshotCommit(table)
    committer.append([message(table, ["a"], data_file("data-1.parquet", rows=3))])
    committer.append([message(table, ["b"], data_file("data-2.parquet", rows=4))])
    third = committer.append([message(table, ["a"], data_file("data-3.parquet", rows=5))])

    assert third.id == 3 and third.total_record_count == 12 and third.delta_record_count == 5
    assert live_names(table) == {"data-1.parquet", "data-2.parquet", "data-3.parquet"}
    assert live_names(table, 1) == {"data-1.parquet"}


def test_empty_batch_commit_creates_no_snapshot(table):
    assert SnapshotCommit(table).append([]) is None
    assert table.snapshot_manager.latest_id() is None


def test_overwrite_of_one_partition_keeps_the_others(table):
    committer = SnapshotCommit(table)
    committer.append(
        [
            message(table, ["a"], data_file("data-a1.parquet", rows=3)),
            message(table, ["b"], data_file("data-b1.parquet", rows=4)),
        ]
    )
    target = partition_of(table, "a")
    snapshot = committer.overwrite(
        [message(table, ["a"], data_file("data-a2.parquet", rows=2))], partition_filter=lambda p: p == target
    )

    assert snapshot.commit_kind == OVERWRITE
    assert snapshot.delta_record_count == 2 - 3 and snapshot.total_record_count == 6
    assert live_names(table) == {"data-a2.parquet", "data-b1.parquet"}
    assert live_names(table, 1) == {"data-a1.parquet", "data-b1.parquet"}


def test_overwrite_of_the_whole_table(table):
    committer = SnapshotCommit(table)
    committer.append(
        [
            message(table, ["a"], data_file("data-a1.parquet")),
            message(table, ["b"], data_file("data-b1.parquet")),
        ]
    )
    committer.overwrite([message(table, ["c"], data_file("data-c1.parquet", rows=1))])
    assert live_names(table) == {"data-c1.parquet"}
    assert table.snapshot_manager.latest().total_record_count == 1


def test_deleting_a_file_that_is_not_live_is_a_conflict_and_leaves_no_files(table):
    committer = SnapshotCommit(table)
    committer.append([message(table, ["a"], data_file("data-a1.parquet"))])
    before = manifest_dir_names(table)

    with pytest.raises(CommitConflictError, match="not previously added"):
        committer.append([message(table, ["a"], deleted=[data_file("data-ghost.parquet")])])

    assert table.snapshot_manager.latest_id() == 1
    assert manifest_dir_names(table) == before


def test_compact_style_replace_is_checked_against_the_latest_snapshot(table):
    committer = SnapshotCommit(table)
    old = data_file("data-a1.parquet", rows=5)
    committer.append([message(table, ["a"], old)])
    replaced = committer.append([message(table, ["a"], data_file("data-a2.parquet", rows=5), deleted=[old])])
    assert replaced.commit_kind == OVERWRITE and replaced.delta_record_count == 0
    assert live_names(table) == {"data-a2.parquet"}
    with pytest.raises(CommitConflictError):  # the same delete again: the file is gone already
        committer.append([message(table, ["a"], data_file("data-a3.parquet"), deleted=[old])])


def test_lost_race_retries_on_top_of_the_winner_and_removes_its_own_files(table):
    rival = SnapshotCommit(table)
    ours = SnapshotCommit(table, sleep=lambda _s: None)
    calls = []

    def build(ctx):
        calls.append(ctx.latest.id if ctx.latest else None)
        if len(calls) == 1:  # a rival lands between our read of LATEST and our snapshot write
            rival.append([message(table, ["b"], data_file("data-rival.parquet"))])
        return CommitMessage(partition_of(table, "a"), 0, -1, [data_file("data-ours.parquet")]).entries()

    snapshot = ours.commit(build, kind="APPEND")

    assert calls == [None, 1]
    assert snapshot.id == 2
    assert live_names(table) == {"data-rival.parquet", "data-ours.parquet"}
    assert manifest_dir_names(table) <= {
        p.split("/", 1)[1] for p in referenced_files(table) if p.startswith("manifest/")
    }


def test_retries_are_bounded(table):
    rival = SnapshotCommit(table)
    ours = SnapshotCommit(table, options={"commit.max-retries": "2"}, sleep=lambda _s: None)
    counter = iter(range(100))

    def build(_ctx):
        rival.append([message(table, ["b"], data_file(f"data-rival-{next(counter)}.parquet"))])
        return CommitMessage(partition_of(table, "a"), 0, -1, [data_file("data-ours.parquet")]).entries()

    with pytest.raises(CommitRetriesExhaustedError, match="after 3 attempts"):
        ours.commit(build, kind="APPEND")
    assert "data-ours.parquet" not in live_names(table)


def test_uncertain_snapshot_write_that_landed_counts_as_success(table, monkeypatch):
    committer = SnapshotCommit(table)
    manager = table.snapshot_manager
    real_try_commit = manager.try_commit

    def write_then_fail(snapshot):
        real_try_commit(snapshot)
        raise StorageError("connection reset after the upload")

    monkeypatch.setattr(manager, "try_commit", write_then_fail)
    snapshot = committer.append([message(table, ["a"], data_file("data-a1.parquet"))])

    assert snapshot.id == 1 and manager.latest_id() == 1
    assert live_names(table) == {"data-a1.parquet"}


def test_manifests_are_merged_once_enough_accumulate(table):
    committer = SnapshotCommit(table, options={"manifest.merge-min-count": "3"})
    for i in range(6):
        committer.append([message(table, [f"p{i % 2}"], data_file(f"data-{i}.parquet", rows=1))])
    latest = table.snapshot_manager.latest()
    base = read_manifest_list(table.file_io, table.manifest_path(latest.base_manifest_list))

    assert len(base) < 5  # without merging the base list would hold 5 manifests
    assert live_names(table) == {f"data-{i}.parquet" for i in range(6)}
    for snapshot_id in range(1, 7):  # older snapshots still read their own files
        assert len(live_names(table, snapshot_id)) == snapshot_id


def test_full_compaction_cancels_deletes_in_the_base(table):
    committer = SnapshotCommit(
        table, options={"manifest.full-compaction-threshold-size": "1", "manifest.merge-min-count": "100"}
    )
    first = data_file("data-1.parquet")
    committer.append([message(table, ["a"], first)])
    committer.append([message(table, ["a"], data_file("data-2.parquet"), deleted=[first])])
    committer.append([message(table, ["b"], data_file("data-3.parquet"))])
    latest = table.snapshot_manager.latest()
    base = read_manifest_list(table.file_io, table.manifest_path(latest.base_manifest_list))

    assert sum(meta.num_deleted_files for meta in base) == 0
    assert live_names(table) == {"data-2.parquet", "data-3.parquet"}


def _commit_many(root: str, worker: int, commits: int) -> None:
    table = Table(FileIO.for_path(root), root)
    committer = SnapshotCommit(
        table, options={"commit.max-retries": "100", "commit.max-retry-wait": "200 ms"}
    )
    for i in range(commits):
        committer.append([message(table, [f"w{worker}"], data_file(f"data-w{worker}-{i}.parquet", rows=1))])


def test_concurrent_processes_lose_no_commit_and_leave_no_gap(tmp_path):
    root = str(tmp_path / "db.db" / "race")
    make_table(root)
    workers, commits = 4, 5
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_commit_many, args=(root, w, commits)) for w in range(workers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
        assert process.exitcode == 0

    table = Table(FileIO.for_path(root), root)
    assert table.snapshot_manager.snapshot_ids() == list(range(1, workers * commits + 1))
    expected = {f"data-w{w}-{i}.parquet" for w in range(workers) for i in range(commits)}
    assert live_names(table) == expected
    assert table.snapshot_manager.latest().total_record_count == workers * commits
