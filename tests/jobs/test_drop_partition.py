"""drop-partition on local Spark, with pypaimon reading the table before and after as the oracle."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from jobs.__main__ import main
from jobs.drop_partition import DropPartitionRequest, drop_partition
from jobs.partitions import scan as partition_scan
from jobs.write import write_dataframe
from jobs.writing.settings import WriteSettings
from paimon_format.commit import SnapshotCommit
from paimon_format.manifest.entries import ADD, DELETE
from paimon_format.scan.snapshot_scan import live_entries, read_entries, read_list
from paimon_format.table import Table
from tests.support.factories import data_file, make_table, message
from tests.support.pypaimon_reads import pypaimon_rows

pytest.importorskip("pypaimon")

EVENTS = "id long, dt string, v string"


def write(spark, warehouse, rows, schema=EVENTS, identifier="db.t", **kwargs):
    write_dataframe(spark.createDataFrame(rows, schema), WriteSettings(warehouse, identifier, **kwargs))


def live_files(table: Table, snapshot_id: int | None = None) -> dict[str, str]:
    """file name -> partition dir of the live files of a snapshot (default latest)."""
    manager = table.snapshot_manager
    snapshot = manager.snapshot(snapshot_id) if snapshot_id else manager.latest()
    return {e.file.file_name: table.partition_dir(e.partition) for e in live_entries(table, snapshot)}


def delta_kinds(table: Table) -> list[tuple[int, str]]:
    snapshot = table.snapshot_manager.latest()
    return [
        (e.kind, table.partition_dir(e.partition))
        for e in read_entries(table, read_list(table, snapshot.delta_manifest_list))
    ]


def test_dropped_partition_is_gone_at_the_new_snapshot_and_still_there_before(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    write(spark_session, warehouse, [(1, "a", "x"), (2, "b", "y"), (3, "c", "z")], partition_keys=["dt"])
    write(spark_session, warehouse, [(4, "a", "x2"), (5, "b", "y2")])
    table = Table.open(warehouse, "db.t")
    before = pypaimon_rows(warehouse, "db.t")
    before_id = table.snapshot_manager.latest_id()
    dropped_files = {name for name, where in live_files(table).items() if where == "dt=a"}

    record = drop_partition(spark_session, table, DropPartitionRequest(specs=[{"dt": "a"}]))

    latest = table.snapshot_manager.latest()
    assert latest.id == before_id + 1 and latest.commit_kind == "OVERWRITE"
    assert pypaimon_rows(warehouse, "db.t") == [r for r in before if r["dt"] != "a"]
    assert pypaimon_rows(warehouse, "db.t", before_id) == before
    kinds = delta_kinds(table)
    assert kinds and all(kind == DELETE and where == "dt=a" for kind, where in kinds)
    assert len(kinds) == len(dropped_files) == record.counts["files_dropped"]
    assert latest.total_record_count == table.snapshot_manager.snapshot(before_id).total_record_count - 2
    assert record.counts["partitions"] == 1 and record.details["partitions"][0]["partition"] == {"dt": "a"}
    for name in dropped_files:  # the files stay until snapshot expiry removes them
        assert (tmp_path / "wh" / "db.db" / "t" / "dt=a" / "bucket-0" / name).exists()


def test_predicate_on_date_and_integer_keys_of_a_two_level_table(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    rows = [(i, dt.date(2024, 1, 1 + i % 3), i % 4, f"v{i}") for i in range(24)]
    write(spark_session, warehouse, rows, "id long, day date, hr int, v string", partition_keys=["day", "hr"])
    table = Table.open(warehouse, "db.t")
    before = pypaimon_rows(warehouse, "db.t")
    before_id = table.snapshot_manager.latest_id()

    record = drop_partition(
        spark_session,
        table,
        DropPartitionRequest(where="day < DATE '2024-01-02' OR (day = '2024-01-03' AND hr IN (1, 2))"),
    )

    def dropped(row):
        return row["day"] < dt.date(2024, 1, 2) or (row["day"] == dt.date(2024, 1, 3) and row["hr"] in (1, 2))

    assert pypaimon_rows(warehouse, "db.t") == [r for r in before if not dropped(r)]
    assert pypaimon_rows(warehouse, "db.t", before_id) == before
    expected_partitions = {(r["day"], r["hr"]) for r in before if dropped(r)}
    assert record.counts["partitions"] == len(expected_partitions)


def test_partial_spec_on_a_multi_level_table_drops_every_matching_partition(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    rows = [(i, f"d{i % 2}", f"{i % 3:02d}", "v") for i in range(12)]
    write(
        spark_session, warehouse, rows, "id long, dt string, hr string, v string", partition_keys=["dt", "hr"]
    )
    table = Table.open(warehouse, "db.t")
    before = pypaimon_rows(warehouse, "db.t")

    drop_partition(spark_session, table, DropPartitionRequest(specs=[{"dt": "d0"}, {"dt": "d1", "hr": "01"}]))

    assert pypaimon_rows(warehouse, "db.t") == [
        r for r in before if r["dt"] != "d0" and not (r["dt"] == "d1" and r["hr"] == "01")
    ]


def test_the_default_partition_by_name_and_by_is_null(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    write(spark_session, warehouse, [(1, None, "x"), (2, "b", "y"), (3, "", "z")], partition_keys=["dt"])
    table = Table.open(warehouse, "db.t")
    assert "dt=__DEFAULT_PARTITION__" in set(live_files(table).values())
    first = table.snapshot_manager.latest_id()

    drop_partition(spark_session, table, DropPartitionRequest(where="dt IS NULL"))
    # '' shares the default directory name but is a value of its own: only null is dropped
    assert sorted(r["id"] for r in pypaimon_rows(warehouse, "db.t")) == [2, 3]
    write(spark_session, warehouse, [(4, None, "w")])
    assert sorted(r["id"] for r in pypaimon_rows(warehouse, "db.t")) == [2, 3, 4]

    drop_partition(spark_session, table, DropPartitionRequest(specs=[{"dt": "__DEFAULT_PARTITION__"}]))
    assert sorted(r["id"] for r in pypaimon_rows(warehouse, "db.t")) == [2, 3]
    assert sorted(r["id"] for r in pypaimon_rows(warehouse, "db.t", first)) == [1, 2, 3]


def test_concurrent_appends_other_partition_kept_dropped_partition_dropped(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    write(spark_session, warehouse, [(1, "a", "x"), (2, "b", "y")], partition_keys=["dt"])
    table = Table.open(warehouse, "db.t")

    def rival_writes() -> None:
        write(spark_session, warehouse, [(10, "b", "rival"), (11, "a", "rival-into-dropped")])

    record = drop_partition(
        spark_session, table, DropPartitionRequest(specs=[{"dt": "a"}]), before_commit=rival_writes
    )

    rows = pypaimon_rows(warehouse, "db.t")
    assert sorted(r["id"] for r in rows) == [2, 10]
    assert record.counts["concurrent_files_dropped"] == 1
    assert table.snapshot_manager.latest().commit_kind == "OVERWRITE"


def test_a_rival_that_rewrites_the_dropped_partition_makes_the_job_plan_again(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    write(spark_session, warehouse, [(1, "a", "x"), (2, "b", "y")], partition_keys=["dt"])
    table = Table.open(warehouse, "db.t")
    manifest_dir = tmp_path / "wh" / "db.db" / "t" / "manifest"
    calls = []

    def rival_overwrites_a() -> None:
        if not calls:
            write(spark_session, warehouse, [(5, "a", "new")], mode="overwrite")
        calls.append(1)

    record = drop_partition(
        spark_session, table, DropPartitionRequest(specs=[{"dt": "a"}]), before_commit=rival_overwrites_a
    )

    assert record.counts["replans"] == 1 and len(calls) == 2
    assert [r["id"] for r in pypaimon_rows(warehouse, "db.t")] == [2]
    named = set()
    for snapshot_id in table.snapshot_manager.snapshot_ids():
        snapshot = table.snapshot_manager.snapshot(snapshot_id)
        for list_name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
            named.add(list_name)
            named.update(m.file_name for m in read_list(table, list_name))
    assert {p.name for p in manifest_dir.iterdir()} - named == set(), "the stale plan's manifests are removed"


def test_many_files_spread_over_several_writers_and_manifests(spark_session, tmp_path, monkeypatch):
    """Metadata-only table (no data files): the DELETE manifests are written by several tasks."""
    monkeypatch.setattr(partition_scan, "FILES_PER_WRITER", 40)
    table = make_table(str(tmp_path / "db.db" / "t"), options={"manifest.target-file-size": "8 kb"})
    committer = SnapshotCommit(table)
    for batch in range(6):
        committer.append(
            [
                message(table, [f"p{p}"], *[data_file(f"data-{batch}-{p}-{i}.parquet") for i in range(10)])
                for p in range(5)
            ]
        )
    # a replaced file in p1: its ADD and DELETE must cancel before the partition is dropped
    committer.append(
        [message(table, ["p1"], data_file("data-new.parquet"), deleted=[data_file("data-0-1-0.parquet")])]
    )
    before = live_files(table)

    record = drop_partition(
        spark_session, table, DropPartitionRequest(where="dt IN ('p1', 'p3') OR dt >= 'p4'")
    )

    after = live_files(table)
    assert after == {
        name: where for name, where in before.items() if where not in ("dt=p1", "dt=p3", "dt=p4")
    }
    delta = read_list(table, table.snapshot_manager.latest().delta_manifest_list)
    assert len(delta) > 1 and sum(m.num_deleted_files for m in delta) == record.counts["files_dropped"] == 180
    assert all(m.num_added_files == 0 for m in delta)


def test_dry_run_reports_partitions_files_and_bytes_and_changes_nothing(spark_session, tmp_path, capsys):
    warehouse = str(tmp_path / "wh")
    write(spark_session, warehouse, [(1, "a", "x"), (2, "b", "y"), (3, "a", "z")], partition_keys=["dt"])
    table = Table.open(warehouse, "db.t")
    latest = table.snapshot_manager.latest_id()
    sizes = [e.file.file_size for e in live_entries(table, table.snapshot_manager.latest()) if e.kind == ADD]
    config = tmp_path / "c.yaml"
    config.write_text(f"warehouse: {warehouse}\ntable: db.t\npartitions: [{{dt: a}}, {{dt: nope}}]\n")

    assert main(["drop-partition", "--config", str(config), "--dry-run"]) == 0

    record = json.loads(capsys.readouterr().out)
    assert record["dry_run"] and record["counts"]["partitions"] == 1
    assert record["details"]["partitions"][0]["partition"] == {"dt": "a"}
    assert record["details"]["partitions"][0]["files"] == record["counts"]["files"] >= 1
    assert 0 < record["bytes"]["files"] < sum(sizes)
    assert record["details"]["missing_partitions"] == ["{'dt': 'nope'}"]
    assert table.snapshot_manager.latest_id() == latest


@pytest.mark.parametrize(
    "selector, message",
    [
        ('where: "dt < "', "position 6"),
        ("where: \"dt = 'a' AND\"", "position 13"),
        ("where: \"v = 'a'\"", "not a partition column"),
        ("partitions: [{dt: a, nope: b}]", "not a partition column"),
        ("partitions: [{dt: nope}]\nstrict: true", "no partition matches"),
        ("partitions: [{dt: a}]\nwhere: \"dt = 'a'\"", "not both"),
    ],
)
def test_bad_selectors_exit_2_and_change_nothing(spark_session, tmp_path, capsys, selector, message):
    warehouse = str(tmp_path / "wh")
    write(spark_session, warehouse, [(1, "a", "x")], partition_keys=["dt"])
    table = Table.open(warehouse, "db.t")
    latest = table.snapshot_manager.latest_id()
    config = tmp_path / "c.yaml"
    config.write_text(f"warehouse: {warehouse}\ntable: db.t\n{selector}\n")

    assert main(["drop-partition", "--config", str(config)]) == 2

    record = json.loads(capsys.readouterr().out)
    assert message in record["error"]
    assert table.snapshot_manager.latest_id() == latest


class _Crash(BaseException):
    """Stands for the process dying at a crash point (no cleanup runs)."""


def test_after_a_crash_and_rerun_expiry_and_orphan_removal_delete_exactly_the_dropped_files(
    spark_session, tmp_path, capsys
):
    pytest.importorskip("jobs.expire_snapshots", reason="expire-snapshots is not committed yet")
    pytest.importorskip("jobs.remove_orphan_files", reason="remove-orphan-files is not committed yet")
    from paimon_format.storage.crash_points import set_crash_handler

    warehouse = str(tmp_path / "wh")
    root = tmp_path / "wh" / "db.db" / "t"
    write(spark_session, warehouse, [(1, "a", "x"), (2, "b", "y")], partition_keys=["dt"])
    write(spark_session, warehouse, [(3, "a", "z"), (4, "b", "w")])
    table = Table.open(warehouse, "db.t")
    dropped = {name for name, where in live_files(table).items() if where == "dt=a"}
    kept = {name for name, where in live_files(table).items() if where != "dt=a"}
    manifests_before = {p.name for p in (root / "manifest").iterdir()}

    def crash(step: str) -> None:
        raise _Crash(step)

    previous = set_crash_handler(crash)
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("PAIMON_CRASH_AT", "drop-partition:after-manifests-written")
    try:
        with pytest.raises(_Crash):
            drop_partition(spark_session, table, DropPartitionRequest(specs=[{"dt": "a"}]))
    finally:
        monkeypatch.undo()
        set_crash_handler(previous)
    assert table.snapshot_manager.latest_id() == 2
    left_behind = {p.name for p in (root / "manifest").iterdir()} - manifests_before
    assert left_behind, "the crash left the DELETE manifests behind"

    drop_partition(spark_session, table, DropPartitionRequest(specs=[{"dt": "a"}]))  # the rerun
    expected_rows = [r for r in pypaimon_rows(warehouse, "db.t", 2) if r["dt"] != "a"]
    assert pypaimon_rows(warehouse, "db.t") == expected_rows

    def data_files() -> set[str]:
        return {p.name for p in root.glob("dt=*/bucket-*/*") if p.is_file()}

    assert data_files() == dropped | kept
    expire = tmp_path / "expire.yaml"
    expire.write_text(
        f"warehouse: {warehouse}\ntable: db.t\nretain_min: 1\nretain_max: 1\nolder_than: 0 ms\n"
    )
    assert main(["expire-snapshots", "--config", str(expire)]) == 0, capsys.readouterr().out
    assert data_files() == kept
    assert pypaimon_rows(warehouse, "db.t") == expected_rows

    orphans = tmp_path / "orphans.yaml"
    orphans.write_text(f"warehouse: {warehouse}\ntable: db.t\nolder_than: 0 ms\nforce: true\n")
    assert main(["remove-orphan-files", "--config", str(orphans)]) == 0, capsys.readouterr().out
    manifests_after = {p.name for p in (root / "manifest").iterdir()}
    assert not (left_behind & manifests_after), "the crashed run's manifests are orphans and removed"
    assert data_files() == kept
    assert pypaimon_rows(warehouse, "db.t") == expected_rows


def test_inconsistent_metadata_is_refused_before_anything_is_written(spark_session, tmp_path):
    from paimon_format.errors import InvalidTableStateError

    table = make_table(str(tmp_path / "db.db" / "t"))
    committer = SnapshotCommit(table)
    twice = data_file("data-twice.parquet")
    committer.append([message(table, ["a"], twice)])
    committer.append([message(table, ["a"], twice)])  # a plain append does not check: now broken
    manifests = {p.name for p in (tmp_path / "db.db" / "t" / "manifest").iterdir()}

    with pytest.raises(InvalidTableStateError, match="data-twice.parquet"):
        drop_partition(spark_session, table, DropPartitionRequest(specs=[{"dt": "a"}]))

    assert table.snapshot_manager.latest_id() == 2
    assert {p.name for p in (tmp_path / "db.db" / "t" / "manifest").iterdir()} == manifests


def test_a_table_pypaimon_wrote_with_an_int_partition(spark_session, tmp_path):
    import pyarrow as pa
    import pypaimon

    warehouse = str(tmp_path / "wh")
    catalog = pypaimon.CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("db", True)
    schema = pa.schema([("id", pa.int64()), ("p", pa.int32()), ("v", pa.string())])
    catalog.create_table("db.t", pypaimon.Schema.from_pyarrow_schema(schema, partition_keys=["p"]), False)
    for batch in range(2):
        builder = catalog.get_table("db.t").new_batch_write_builder()
        writer, commit = builder.new_write(), builder.new_commit()
        rows = [(batch * 10 + i, i % 3, f"v{i}") for i in range(6)]
        writer.write_arrow(
            pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
        )
        commit.commit(writer.prepare_commit())
        writer.close()
        commit.close()
    before = pypaimon_rows(warehouse, "db.t")
    table = Table.open(warehouse, "db.t")

    drop_partition(spark_session, table, DropPartitionRequest(where="p >= 1"))

    assert pypaimon_rows(warehouse, "db.t") == [r for r in before if r["p"] < 1]
    assert pypaimon_rows(warehouse, "db.t", 2) == before


def test_dynamic_bucket_index_of_a_dropped_partition_leaves_the_new_snapshot(spark_session, tmp_path):
    """As in Paimon's overwrite: the HASH index of a dropped partition goes with its files.

    The other partition keeps its very index files; older snapshots keep theirs; a later write of
    the same keys into the dropped partition reads back once; after expiry and orphan removal the
    dropped partition's index files are gone from storage and nothing else is.
    """
    import pyarrow as pa
    import pypaimon

    from jobs.expire_snapshots import ExpiryRequest, expire_snapshots
    from jobs.remove_orphan_files import OrphanSettings, remove_orphan_files
    from paimon_format.maintenance.references import index_file_relpaths
    from paimon_format.scan.snapshot_scan import index_entries

    warehouse = str(tmp_path / "wh")
    catalog = pypaimon.CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("db", True)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("dt", pa.string()), ("v", pa.string())])
    catalog.create_table(
        "db.t",
        pypaimon.Schema.from_pyarrow_schema(
            schema, partition_keys=["dt"], primary_keys=["id", "dt"], options={"bucket": "-1"}
        ),
        False,
    )

    def upsert(rows: list[tuple[int, str, str]]) -> None:
        builder = catalog.get_table("db.t").new_batch_write_builder()
        writer, commit = builder.new_write(), builder.new_commit()
        writer.write_arrow(
            pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema)
        )
        commit.commit(writer.prepare_commit())
        writer.close()
        commit.close()

    upsert([(k, f"p{k % 2}", "a") for k in range(6)])
    upsert([(k, f"p{k % 2}", "b") for k in range(3, 9)])
    table = Table.open(warehouse, "db.t")
    before = table.snapshot_manager.latest()
    index_before = {(table.partition_dir(e.partition), e.file_name) for e in index_entries(table, before)}
    assert {part for part, _name in index_before} == {"dt=p0", "dt=p1"}, "the sample has HASH index files"
    rows_before = pypaimon_rows(warehouse, "db.t")

    drop_partition(spark_session, table, DropPartitionRequest(specs=[{"dt": "p0"}]))

    dropped = table.snapshot_manager.latest()
    index_after = {(table.partition_dir(e.partition), e.file_name) for e in index_entries(table, dropped)}
    assert index_after == {item for item in index_before if item[0] == "dt=p1"}
    assert {
        (table.partition_dir(e.partition), e.file_name) for e in index_entries(table, before)
    } == index_before
    assert pypaimon_rows(warehouse, "db.t") == [r for r in rows_before if r["dt"] == "p1"]
    assert pypaimon_rows(warehouse, "db.t", before.id) == rows_before

    upsert([(k, "p0", "c") for k in (0, 2, 4)])
    upsert([(k, "p0", "d") for k in (0, 2)])
    expected = [r for r in rows_before if r["dt"] == "p1"] + [
        {"id": 0, "dt": "p0", "v": "d"},
        {"id": 2, "dt": "p0", "v": "d"},
        {"id": 4, "dt": "p0", "v": "c"},
    ]
    assert pypaimon_rows(warehouse, "db.t") == sorted(expected, key=lambda r: [str(r[k]) for k in sorted(r)])

    expire_snapshots(spark_session, table, ExpiryRequest(retain_min=1, retain_max=1, older_than="0 ms"))
    remove_orphan_files(
        spark_session, table, OrphanSettings(older_than_ms=0, force=True, max_orphan_ratio=1.0)
    )
    on_disk = {
        os.path.relpath(os.path.join(d, f), table.path) for d, _s, fs in os.walk(table.path) for f in fs
    }
    stale = {f"index/{name}" for part, name in index_before if part == "dt=p0"}
    assert not stale & on_disk
    latest = table.snapshot_manager.latest()
    needed = {
        f"{table.partition_dir(e.partition)}/bucket-{e.bucket}/{e.file.file_name}"
        for e in live_entries(table, latest)
    } | {path for e in index_entries(table, latest) for path in index_file_relpaths(e)}
    assert needed <= on_disk
    assert pypaimon_rows(warehouse, "db.t") == sorted(expected, key=lambda r: [str(r[k]) for k in sorted(r)])


def test_manifests_whose_partition_stats_rule_the_selection_out_are_not_read(spark_session, tmp_path):
    """A nightly drop of one day: each day's commit wrote its own manifest, and only the manifest
    whose partition range includes the selected day is read; the drop is what a full read drops
    (pypaimon's rows). With DELETE entries in the table (the merge path) the same holds."""
    warehouse = str(tmp_path / "wh")
    days = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]
    write(spark_session, warehouse, [(0, days[0], "x")], partition_keys=["dt"])
    for i, day in enumerate(days[1:], start=1):
        write(spark_session, warehouse, [(i, day, "x"), (10 + i, day, "y")])
    table = Table.open(warehouse, "db.t")
    assert len(read_list(table, table.snapshot_manager.latest().delta_manifest_list)) == 1
    before = pypaimon_rows(warehouse, "db.t")

    record = drop_partition(
        spark_session, table, DropPartitionRequest(where="dt >= '2024-01-03' AND dt < '2024-01-04'")
    )
    assert record.details["manifests_skipped"] == 3
    assert record.counts["partitions"] == 1
    assert pypaimon_rows(warehouse, "db.t") == [r for r in before if r["dt"] != "2024-01-03"]

    record = drop_partition(
        spark_session, table, DropPartitionRequest(specs=[{"dt": "2024-01-02"}, {"dt": "2024-01-05"}])
    )
    assert record.details["manifests_skipped"] == 4  # of 5: the other days' and the DELETEs of 2024-01-03
    assert record.details["missing_partitions"] == ["{'dt': '2024-01-05'}"]
    assert pypaimon_rows(warehouse, "db.t") == [r for r in before if r["dt"] in ("2024-01-01", "2024-01-04")]


def test_a_read_manifest_deleting_a_file_of_an_unread_one_does_not_look_inconsistent(spark_session, tmp_path):
    """Pruning and the merge path: the manifest that is read deletes a file of another partition
    whose ADD sits in a manifest that is not read. That partition is not counted (its counts would
    be negative), so the table is not taken for inconsistent, and the drop is right."""
    from paimon_format.commit import SnapshotCommit

    table = make_table(str(tmp_path / "db.db" / "t"), partition_keys=("dt",))
    first, second, third = (data_file(f"data-{n}.parquet") for n in "abc")
    committer = SnapshotCommit(table)
    committer.append([message(table, ["2024-01-01"], first)])
    committer.append([message(table, ["2024-01-02"], second)])
    committer.append([message(table, ["2024-01-01"], deleted=[first]), message(table, ["2024-01-05"], third)])
    assert sum(m.num_deleted_files for m in data_manifests_of(table)) == 1

    for selection in ({"specs": [{"dt": "2024-01-05"}]}, {"where": "dt = '2024-01-05'"}):
        record = drop_partition(spark_session, table, DropPartitionRequest(**selection), dry_run=True)
        assert record.details["manifests_skipped"] == 2 and record.counts["partitions"] == 1
    drop_partition(spark_session, table, DropPartitionRequest(specs=[{"dt": "2024-01-05"}]))
    assert set(live_files(table)) == {"data-b.parquet"}


def data_manifests_of(table: Table):
    from paimon_format.scan.snapshot_scan import data_manifests

    return data_manifests(table, table.snapshot_manager.latest())
