"""compact-manifests (by blocks in the driver, or partition-sorted on local Spark): same rows everywhere,
fewer manifests, races handled."""

from __future__ import annotations

import json

import pytest

from jobs.__main__ import main
from jobs.compact_manifests import compact_manifests, plan_compaction
from paimon_format.commit import COMPACT, SnapshotCommit
from paimon_format.errors import InvalidTableStateError
from paimon_format.manifest.codec import read_manifest, write_manifest
from paimon_format.manifest.entries import ManifestFileMeta, SimpleStats, delete_entry
from paimon_format.manifest.files import manifest_file_meta
from paimon_format.model.binary_row import deserialize_row
from paimon_format.scan.snapshot_scan import data_manifests, live_entries
from paimon_format.table import Table
from tests.support.factories import data_file, make_table, message
from tests.support.pypaimon_reads import pypaimon_rows

NO_AUTO_MERGE = {"manifest.merge-min-count": "1000", "manifest.full-compaction-threshold-size": "1 gb"}


def many_commits(root: str, commits: int = 24) -> Table:
    """A partitioned table with one manifest per commit, a replaced file, and an overwrite."""
    table = make_table(root, options=NO_AUTO_MERGE)
    committer = SnapshotCommit(table)
    replaced = data_file("data-replaced.parquet")
    committer.append([message(table, ["p0"], replaced)])
    for i in range(commits):
        committer.append([message(table, [f"p{i % 5}"], data_file(f"data-{i}.parquet", rows=i + 1))])
    committer.append([message(table, ["p0"], data_file("data-new.parquet"), deleted=[replaced])])
    committer.overwrite(
        [message(table, ["p3"], data_file("data-p3.parquet"))],
        partition_filter=lambda p: deserialize_row(p, table.partition_types) == ["p3"],
    )
    return table


def current_manifests(table: Table) -> list[ManifestFileMeta]:
    return data_manifests(table, table.snapshot_manager.latest())


def entry_names(table: Table) -> list[str]:
    """The file names of every entry of the latest snapshot's manifests, in order."""
    return [
        e.file.file_name
        for meta in current_manifests(table)
        for e in read_manifest(table.file_io, table.manifest_path(meta.file_name))
    ]


def live(table: Table, snapshot_id: int | None = None) -> set[str]:
    manager = table.snapshot_manager
    snapshot = manager.snapshot(snapshot_id) if snapshot_id else manager.latest()
    return {e.file.file_name for e in live_entries(table, snapshot)}


@pytest.mark.parametrize("order", ["none", "partition"])
def test_full_compaction_keeps_every_snapshot_readable_with_fewer_manifests(spark_session, tmp_path, order):
    """order none: the live entries keep their order (untouched manifests copied by blocks);
    order partition: they are sorted by partition across the new manifests."""
    table = many_commits(str(tmp_path / "db.db" / "t"))
    before_latest = table.snapshot_manager.latest()
    older = {i: live(table, i) for i in table.snapshot_manager.snapshot_ids()}
    before_count = len(data_manifests(table, before_latest))
    in_order = [e.file.file_name for e in live_entries(table, before_latest)]

    record = compact_manifests(spark_session, table, mode="full", order=order)

    snapshot = table.snapshot_manager.latest()
    assert snapshot.id == before_latest.id + 1 and snapshot.commit_kind == "COMPACT"
    assert (
        snapshot.total_record_count == before_latest.total_record_count and snapshot.delta_record_count == 0
    )
    manifests = data_manifests(table, snapshot)
    assert len(manifests) < before_count and record.counts["manifests_after"] == len(manifests)
    assert live(table) == older[before_latest.id]
    for snapshot_id, files in older.items():
        assert live(table, snapshot_id) == files
    partitions_seen, names_seen = [], []
    for meta in manifests:
        entries = read_manifest(table.file_io, table.manifest_path(meta.file_name))
        assert all(e.kind == 0 for e in entries), "a full compaction leaves no DELETE entries"
        expected = manifest_file_meta(meta.file_name, meta.file_size, entries, 0, table.partition_types)
        assert meta == expected
        partitions_seen.extend(deserialize_row(e.partition, table.partition_types)[0] for e in entries)
        names_seen.extend(e.file.file_name for e in entries)
    if order == "partition":
        assert partitions_seen == sorted(partitions_seen), "entries are written sorted by partition"
    else:
        assert names_seen == in_order, "entries keep their order"


def test_pypaimon_reads_identical_rows_after_compaction(spark_session, tmp_path):
    from jobs.write import write_dataframe
    from jobs.writing.settings import WriteSettings

    warehouse = str(tmp_path / "wh")
    for i in range(6):
        write_dataframe(
            spark_session.createDataFrame([(i, f"d{i % 3}", f"v{i}")], "id long, dt string, v string"),
            WriteSettings(warehouse, "db.t", partition_keys=["dt"], options=NO_AUTO_MERGE),
        )
    before = pypaimon_rows(warehouse, "db.t")
    table = Table.open(warehouse, "db.t")
    compact_manifests(spark_session, table, mode="full")
    assert pypaimon_rows(warehouse, "db.t") == before
    assert {r["id"] for r in pypaimon_rows(warehouse, "db.t", 3)} == {0, 1, 2}  # older snapshots still read
    assert len(data_manifests(table, table.snapshot_manager.latest())) == 1


def test_a_concurrent_append_during_the_job_is_kept(spark_session, tmp_path):
    table = many_commits(str(tmp_path / "db.db" / "t"), commits=6)
    rival = SnapshotCommit(table)

    def append_meanwhile() -> None:
        rival.append([message(table, ["p9"], data_file("data-concurrent.parquet"))])

    expected = live(table) | {"data-concurrent.parquet"}
    compact_manifests(spark_session, table, mode="full", before_commit=append_meanwhile)
    latest = table.snapshot_manager.latest()
    assert latest.commit_kind == "COMPACT"
    assert live(table) == expected


def test_auto_mode_with_nothing_to_do_commits_nothing(spark_session, tmp_path):
    table = make_table(str(tmp_path / "db.db" / "t"))
    SnapshotCommit(table).append([message(table, ["a"], data_file("data-1.parquet"))])
    record = compact_manifests(spark_session, table, mode="auto")
    assert table.snapshot_manager.latest_id() == 1
    assert record.counts["manifests_rewritten"] == 0


def test_dry_run_reports_and_changes_nothing(spark_session, tmp_path, capsys):
    root = tmp_path / "wh" / "db.db" / "t"
    table = many_commits(str(root), commits=4)
    latest = table.snapshot_manager.latest_id()
    config = tmp_path / "c.yaml"
    config.write_text(f"warehouse: {tmp_path / 'wh'}\ntable: db.t\nmode: full\n")
    assert main(["compact-manifests", "--config", str(config), "--dry-run"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (
        record["dry_run"] and record["counts"]["manifests_rewritten"] == record["counts"]["manifests_before"]
    )
    assert record["counts"]["entries_after"] < record["counts"]["entries_before"]
    assert table.snapshot_manager.latest_id() == latest


def meta(size: int, deleted: int = 0) -> ManifestFileMeta:
    return ManifestFileMeta(f"m{size}-{deleted}", size, 1, deleted, SimpleStats.empty(), 0)


@pytest.mark.parametrize(
    "sizes, expected_groups",
    [
        ([10] * 5, [[0, 1, 2, 3, 4]]),
        ([10] * 2, []),
        ([500, 10, 10, 10], [[1, 2, 3]]),
        ([300, 300, 10], [[0, 1]]),
    ],
)
def test_auto_plan_follows_the_minor_rules(sizes, expected_groups):
    plan = plan_compaction([meta(s) for s in sizes], "auto", target=500, threshold=10_000, min_count=3)
    assert plan.groups == expected_groups and not plan.full


def test_auto_plan_goes_full_past_the_threshold():
    plan = plan_compaction([meta(100, deleted=1), meta(100)], "auto", target=500, threshold=150, min_count=30)
    assert plan.full and plan.groups == [[0, 1]]


def test_inconsistent_metadata_is_refused_and_nothing_is_left_behind(spark_session, tmp_path):
    """A file added twice: the partition-sorted rewrite (every entry merged) refuses it. The block
    merge copies manifests without DELETEs unread, as Paimon's merge does: it keeps both entries,
    the table as it was; a DELETE whose ADD is missing is refused by both."""
    table = make_table(str(tmp_path / "db.db" / "t"), options=NO_AUTO_MERGE)
    committer = SnapshotCommit(table)
    twice = data_file("data-twice.parquet")
    committer.append([message(table, ["a"], twice)])
    committer.append(
        [message(table, ["a"], twice)]
    )  # a plain append does not check: the metadata is now broken
    manifest_dir = tmp_path / "db.db" / "t" / "manifest"
    before = sorted(p.name for p in manifest_dir.iterdir())

    with pytest.raises(InvalidTableStateError, match="data-twice.parquet"):
        compact_manifests(spark_session, table, mode="full", order="partition")
    assert table.snapshot_manager.latest_id() == 2
    assert sorted(p.name for p in manifest_dir.iterdir()) == before

    compact_manifests(None, table, mode="full", order="none")
    assert table.snapshot_manager.latest_id() == 3 and entry_names(table) == ["data-twice.parquet"] * 2

    # a DELETE of a file never added, in a manifest of its own
    gone = delete_entry(
        read_manifest(table.file_io, table.manifest_path(current_manifests(table)[0].file_name))[0]
    )
    gone.file = data_file("data-never-added.parquet")
    size = write_manifest(table.file_io, table.manifest_path("manifest-ghost-0"), [gone])
    with_ghost = current_manifests(table) + [
        manifest_file_meta("manifest-ghost-0", size, [gone], 0, table.partition_types)
    ]
    SnapshotCommit(table).commit(
        lambda _ctx: [],
        kind=COMPACT,
        allow_empty=True,
        rewrite_base=lambda _ctx, _previous: with_ghost,
        check_conflicts=False,
    )
    before = sorted(p.name for p in manifest_dir.iterdir())
    with pytest.raises(InvalidTableStateError, match="data-never-added.parquet.*not previously added"):
        compact_manifests(None, table, mode="full", order="none")
    assert sorted(p.name for p in manifest_dir.iterdir()) == before
