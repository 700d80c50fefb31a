"""The compact job on local Spark: same rows in pypaimon before and after, old snapshots intact,
a second run a no-op, races and crashes leave nothing behind, bad input exits 2."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pytest

from jobs.__main__ import main
from jobs.compact import compact
from jobs.compaction.run import CompactRequest
from jobs.runtime.errors import CommitRaceLost
from jobs.write import write_dataframe
from jobs.writing.settings import WriteSettings
from paimon_format.commit import SnapshotCommit
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage import crash_points
from paimon_format.table import Table
from tests.support.pypaimon_reads import pypaimon_rows
from tests.support.table_states import (
    IDENTIFIER,
    append_rows,
    batch,
    build_sample_table,
    fingerprint,
    listed_files,
    open_table,
    unreferenced,
)

pytest.importorskip("pypaimon")


def live_files(table: Table, snapshot_id: int | None = None):
    manager = table.snapshot_manager
    snapshot = manager.snapshot(snapshot_id) if snapshot_id else manager.latest()
    return live_entries(table, snapshot)


def by_id(rows):
    return sorted(rows, key=lambda row: row["id"])


@pytest.fixture(scope="module")
def append_template(tmp_path_factory):
    """A partitioned append table: 7 commits of 6 rows over 3 partitions (7 small files each)."""
    warehouse = str(tmp_path_factory.mktemp("append") / "wh")
    table = build_sample_table(warehouse, commits=7, rows_per_commit=6)
    return warehouse, {i: by_id(pypaimon_rows(warehouse, IDENTIFIER, i)) for i in (2, 7)}, table


@pytest.fixture
def append_table(append_template, tmp_path):
    template, rows, _table = append_template
    warehouse = str(tmp_path / "wh")
    shutil.copytree(template, warehouse)
    return warehouse, rows, open_table(warehouse)


def test_small_append_files_become_one_file_per_partition(spark_session, append_table):
    warehouse, rows, table = append_table
    before = live_files(table)
    record = compact(spark_session, table, CompactRequest())

    snapshot = table.snapshot_manager.latest()
    assert snapshot.id == 8 and snapshot.commit_kind == "COMPACT"
    assert snapshot.total_record_count == 42 and snapshot.delta_record_count == 0
    after = live_files(table)
    assert len(before) == 21 and len(after) == 3
    for entry in after:
        assert entry.file.level == 0 and entry.file.file_source == 1 and entry.file.row_count == 14
        inputs = [e.file for e in before if e.partition == entry.partition]
        assert entry.file.min_sequence_number == min(f.min_sequence_number for f in inputs)
    assert record.counts["files_rewritten"] == 21 and record.counts["files_written"] == 3
    assert record.counts["partitions"] == 3 and len(record.details["partitions"]) == 3
    assert by_id(pypaimon_rows(warehouse, IDENTIFIER)) == rows[7]
    assert by_id(pypaimon_rows(warehouse, IDENTIFIER, 7)) == rows[7]
    assert by_id(pypaimon_rows(warehouse, IDENTIFIER, 2)) == rows[2]

    again = compact(spark_session, table, CompactRequest())
    assert table.snapshot_manager.latest_id() == 8 and again.counts["bins"] == 0


def test_full_strategy_partition_selection_and_order_by(spark_session, append_table):
    warehouse, rows, table = append_table
    append_rows(table, batch(1000, 3))  # 8 files in every partition
    expected = by_id(pypaimon_rows(warehouse, IDENTIFIER))
    compact(
        spark_session, table, CompactRequest(strategy="full", specs=[{"dt": "2024-01-02"}], order_by=["v"])
    )
    after = live_files(table)
    compacted = [e for e in after if table.partition_spec(e.partition) == {"dt": "2024-01-02"}]
    assert len(compacted) == 1 and len(after) == 1 + 2 * 8
    assert by_id(pypaimon_rows(warehouse, IDENTIFIER)) == expected
    from paimon_format.data.reader import read_data_file

    entry = compacted[0]
    values = pa.Table.from_batches(list(read_data_file(table, entry.partition, entry.bucket, entry.file)))
    assert values.column("v").to_pylist() == sorted(values.column("v").to_pylist())


def test_dry_run_reports_and_changes_nothing(spark_session, append_table):
    _warehouse, _rows, table = append_table
    before = fingerprint(table.path)
    record = compact(spark_session, table, CompactRequest(), dry_run=True)
    assert fingerprint(table.path) == before
    assert record.counts["bins"] == 3 and record.counts["files_before"] == 21
    assert record.counts["files_after_estimate"] == 3
    # the files were written moments ago: no partition has been idle for an hour
    idle = compact(spark_session, table, CompactRequest(partition_idle_time="1 h"), dry_run=True)
    assert idle.counts["bins"] == 0
    one = compact(
        spark_session, table, CompactRequest(max_buckets_per_run=1, where="dt >= '2024-01-02'"), dry_run=True
    )
    assert one.counts["bins"] == 1 and one.details["partitions"][0]["partition"]["dt"] >= "2024-01-02"
    assert fingerprint(table.path) == before


def test_a_rival_that_removes_an_input_makes_the_run_exit_3_and_clean_up(spark_session, append_table):
    _warehouse, _rows, table = append_table
    files_before = listed_files(table)

    def rival_overwrites_a_partition() -> None:
        rival = Table.open(table.path.rsplit("/", 2)[0], IDENTIFIER)
        SnapshotCommit(rival).overwrite(
            [], partition_filter=lambda p: rival.partition_spec(p)["dt"] == "2024-01-01"
        )

    # one commit (partial progress off); with partial progress the group is replanned and retried
    # (tests/jobs/test_compact_groups.py)
    with pytest.raises(CommitRaceLost, match="removed"):
        compact(
            spark_session,
            table,
            CompactRequest(partial_progress=False),
            before_commit=rival_overwrites_a_partition,
        )
    assert table.snapshot_manager.latest().commit_kind == "OVERWRITE"
    data_files = {path for path in listed_files(table) if "/bucket-" in path}
    assert data_files == {path for path in files_before if "/bucket-" in path}, "the run's files are gone"


def test_a_failed_rewrite_is_not_run_again_to_clean_up(spark_session, append_table, caplog):
    """The cleanup after a failed rewrite reads the finished bins back from Spark's cache; a bin whose
    task failed is not rewritten again (it would write files only to delete them, or fail again and
    stop the cleanup, leaving the finished bins' files behind)."""
    _warehouse, _rows, table = append_table
    broken = next(e for e in live_files(table) if table.partition_spec(e.partition) == {"dt": "2024-01-02"})
    (path,) = [
        table.full_path(p) for p in table.data_file_relpaths(broken.partition, broken.bucket, broken.file)
    ]
    with open(path, "r+b") as handle:  # the footer's magic overwritten: the file cannot be read
        handle.seek(-4, os.SEEK_END)
        handle.write(b"XXXX")
    caplog.set_level("INFO", logger="jobs.compact")
    with pytest.raises(Exception, match=broken.file.file_name):
        compact(spark_session, table, CompactRequest(specs=[{"dt": "2024-01-02"}], partial_progress=False))
    messages = [record.getMessage() for record in caplog.records]
    assert not [m for m in messages if "could not remove" in m], messages
    assert [m for m in messages if m.startswith("nothing committed: removed the 0 data files")], messages
    assert table.snapshot_manager.latest().commit_kind != "COMPACT"


def test_a_concurrent_append_is_kept(spark_session, append_table):
    warehouse, rows, table = append_table

    def rival_appends() -> None:
        append_rows(open_table(warehouse), batch(500, 3))

    compact(spark_session, table, CompactRequest(), before_commit=rival_appends)
    snapshot = table.snapshot_manager.latest()
    assert snapshot.commit_kind == "COMPACT" and snapshot.id == 9
    assert {r["id"] for r in pypaimon_rows(warehouse, IDENTIFIER)} == {r["id"] for r in rows[7]} | {
        500,
        501,
        502,
    }


def test_crash_after_files_written_then_rerun_then_orphans_cleared(spark_session, append_table):
    from jobs.remove_orphan_files import OrphanSettings, remove_orphan_files

    warehouse, rows, table = append_table

    class Crash(BaseException):  # like a kill: no cleanup handler of the job runs
        pass

    def crash(step: str) -> None:
        raise Crash(step)

    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(crash)
    try:
        os.environ[crash_points.CRASH_ENV] = "compact:after-files-written"
        with pytest.raises(Crash):
            compact(spark_session, table, CompactRequest())
    finally:
        os.environ.pop(crash_points.CRASH_ENV, None)
        crash_points.set_crash_handler(previous)
    assert table.snapshot_manager.latest_id() == 7
    leftovers = unreferenced(table)
    assert leftovers, "the crashed run's new files are on storage, unreferenced"

    compact(spark_session, table, CompactRequest())
    assert by_id(pypaimon_rows(warehouse, IDENTIFIER)) == rows[7]
    assert len(live_files(table)) == 3
    remove_orphan_files(
        spark_session, table, OrphanSettings(older_than_ms=0, force=True, max_orphan_ratio=1.0)
    )
    assert not unreferenced(table) and not (leftovers & listed_files(table))
    assert by_id(pypaimon_rows(warehouse, IDENTIFIER, 2)) == rows[2]


def test_primary_key_table_of_20_upserts_ends_with_one_top_level_file_per_bucket(spark_session, tmp_path):
    from paimon_format.commit import CommitMessage
    from paimon_format.data.writer import write_table_files
    from tests.support.factories import make_table

    warehouse = str(tmp_path / "wh")
    table = make_table(
        f"{warehouse}/db.db/pk", partition_keys=(), primary_keys=("id",), options={"bucket": "2"}
    )
    for step in range(20):  # the format layer's writer, as the write job's tasks use it: no Spark job each
        ids = list(range(step, 40, 3))
        if step % 7 == 3:
            ids = ids[:2]
        data = pa.table(
            {"id": pa.array(ids, pa.int64()), "dt": ["d"] * len(ids), "v": [f"v{step}-{k}" for k in ids]}
        )
        written = write_table_files(table.file_io, table.path, table.schema, data, step * 100)
        SnapshotCommit(table).append([CommitMessage(p, b, 2, files) for p, b, files in written])
    expected = by_id(pypaimon_rows(warehouse, "db.pk"))
    assert len(live_files(table)) > 20  # every upsert left files at level 0
    record = compact(spark_session, table, CompactRequest())
    after = live_files(table)
    assert sorted(e.bucket for e in after) == [0, 1]
    assert all(e.file.level == 5 and e.file.file_source == 1 for e in after)
    assert record.counts["buckets"] == 2
    assert by_id(pypaimon_rows(warehouse, "db.pk")) == expected
    again = compact(spark_session, table, CompactRequest())
    assert again.counts["bins"] == 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("strategy: major\n", "strategy"),
        ("order_strategy: zorder\n", "order_by"),
        ("order_strategy: hilbert\norder_by: [v]\n", "hilbert needs at least two order_by columns"),
        ("partition_idle_time: soon\n", "partition_idle_time"),
        ('where: "dt =="\n', "where"),
        ("order_by: [nope]\n", "order_by: no column 'nope'"),
        ("where: \"x = '1'\"\n", "where"),
        ("buckets: '3-1'\n", "buckets"),
        ("max_bytes_per_run: lots\n", "max_bytes_per_run"),
        ("job_order: random\n", "job_order"),
        ("max_commit_bins: 0\n", "max_commit_bins"),
    ],
)
def test_bad_config_exits_2_with_the_reason(spark_session, append_table, tmp_path, capsys, body, message):
    warehouse, _rows, table = append_table
    before = fingerprint(table.path)
    config = tmp_path / "compact.yaml"
    config.write_text(f"warehouse: {warehouse}\ntable: {IDENTIFIER}\n{body}")
    assert main(["compact", "--config", str(config)]) == 2
    assert message in capsys.readouterr().err
    assert fingerprint(table.path) == before


def test_lookup_table_compaction_commits_its_changelog(spark_session, tmp_path, capsys):
    """changelog-producer lookup: the COMPACT snapshot names changelog files (prefix `changelog-`, at the
    top level, file source APPEND) with the rewrite's changes: keys with level-0 rows, each diffed
    against its row above level 0 (none: +I; else -U old, +U new); a key only above level 0: nothing."""
    from paimon_format.data.reader import read_data_file
    from paimon_format.manifest.codec import read_manifest
    from paimon_format.scan.snapshot_scan import read_list

    warehouse = str(tmp_path / "wh")
    options = {"bucket": "1", "changelog-producer": "lookup"}
    columns = "id long, dt string, v string"
    write_dataframe(
        spark_session.createDataFrame([(1, "d", "a"), (2, "d", "b")], columns),
        WriteSettings(warehouse, "db.cl", primary_keys=["id"], options=options),
    )
    table = Table.open(warehouse, "db.cl")
    compact(spark_session, table, CompactRequest())  # everything at level 0: +I for both keys
    write_dataframe(
        spark_session.createDataFrame([(1, "d", "a2"), (3, "d", "c")], columns),
        WriteSettings(warehouse, "db.cl"),
    )
    table = Table.open(warehouse, "db.cl")
    before = listed_files(table)

    def fails() -> None:
        raise RuntimeError("a failure before the commit")

    with pytest.raises(RuntimeError):  # the run removes its data, changelog and manifest files
        compact(spark_session, table, CompactRequest(), before_commit=fails)
    assert listed_files(table) == before
    compact(spark_session, table, CompactRequest())
    assert any("/changelog-" in path for path in listed_files(table) - before)
    snapshots = [table.snapshot_manager.snapshot(i) for i in (2, 4)]
    assert [s.commit_kind for s in snapshots] == ["COMPACT", "COMPACT"]
    changes = []
    for snapshot in snapshots:
        rows = []
        for meta in read_list(table, snapshot.changelog_manifest_list):
            for entry in read_manifest(table.file_io, table.manifest_path(meta.file_name)):
                assert entry.file.file_name.startswith("changelog-") and entry.file.level == 5
                assert entry.file.file_source == 0
                for chunk in read_data_file(
                    table, entry.partition, entry.bucket, entry.file, system_columns=True
                ):
                    rows += [(r["_VALUE_KIND"], r["id"], r["v"]) for r in chunk.to_pylist()]
        assert snapshot.changelog_record_count == len(rows)
        changes.append(sorted(rows))
    assert changes == [[(0, 1, "a"), (0, 2, "b")], [(0, 3, "c"), (1, 1, "a"), (2, 1, "a2")]]
    assert sorted(r["v"] for r in pypaimon_rows(warehouse, "db.cl")) == ["a2", "b", "c"]

    config = tmp_path / "compact.yaml"
    config.write_text(f"warehouse: {warehouse}\ntable: db.bad\n")
    write_dataframe(
        spark_session.createDataFrame([(1, "d", "a")], columns),
        WriteSettings(
            warehouse,
            "db.bad",
            primary_keys=["id"],
            options={
                **options,
                "changelog-producer.row-deduplicate": "true",
                "changelog-producer.row-deduplicate-ignore-fields": "nope",
            },
        ),
    )
    assert main(["compact", "--config", str(config)]) == 2
    assert "row-deduplicate-ignore-fields: no column 'nope'" in capsys.readouterr().err


# -- primary-key tables pypaimon wrote, one per merge engine --------------------------------------

PK_SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("a", pa.string()), ("b", pa.string())])
PK_BATCHES = [
    [(k, 1, f"x{k}", None) for k in range(6)],
    [(k, 10, None, "y") for k in range(3)],
    [(1, 100, "z", None)],
]
FIRST = {k: (1, f"x{k}", None) for k in range(6)}
ENGINES = {
    "deduplicate": ({}, {**FIRST, 0: (10, None, "y"), 1: (100, "z", None), 2: (10, None, "y")}),
    "partial-update": (
        {"merge-engine": "partial-update"},
        {**FIRST, 0: (10, "x0", "y"), 1: (100, "z", "y"), 2: (10, "x2", "y")},
    ),
    "aggregation": (
        {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
        {**FIRST, 0: (11, "x0", "y"), 1: (111, "z", "y"), 2: (11, "x2", "y")},
    ),
    "first-row": ({"merge-engine": "first-row"}, FIRST),
    "dynamic-bucket": (
        {"bucket": "-1"},
        {**FIRST, 0: (10, None, "y"), 1: (100, "z", None), 2: (10, None, "y")},
    ),
}


def pypaimon_pk_table(warehouse: str, options: dict[str, str]) -> None:
    import pypaimon

    catalog = pypaimon.CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("db", True)
    schema = pypaimon.Schema.from_pyarrow_schema(
        PK_SCHEMA, primary_keys=["id"], options={"bucket": "2", **options}
    )
    catalog.create_table("db.pk", schema, False)
    for rows in PK_BATCHES:
        builder = catalog.get_table("db.pk").new_batch_write_builder()
        writer, commit = builder.new_write(), builder.new_commit()
        writer.write_arrow(
            pa.Table.from_pylist([dict(zip(PK_SCHEMA.names, r, strict=True)) for r in rows], PK_SCHEMA)
        )
        commit.commit(writer.prepare_commit())
        writer.close()
        commit.close()


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_pypaimon_primary_key_tables_compact_with_their_merge_engine(spark_session, tmp_path, engine):
    options, expected = ENGINES[engine]
    warehouse = str(tmp_path / "wh")
    pypaimon_pk_table(warehouse, options)
    table = Table.open(warehouse, "db.pk")
    index_before = table.snapshot_manager.latest().index_manifest

    compact(spark_session, table, CompactRequest(strategy="full"))

    snapshot = table.snapshot_manager.latest()
    assert snapshot.id == 4 and snapshot.commit_kind == "COMPACT"
    assert snapshot.index_manifest == index_before, "the dynamic-bucket hash index is unchanged"
    after = live_files(table)
    assert len({e.bucket for e in after}) == len(after) and all(e.file.level == 5 for e in after)
    rows = {r["id"]: (r["v"], r["a"], r["b"]) for r in pypaimon_rows(warehouse, "db.pk")}
    assert rows == expected
    # first-row readers skip level 0 (as Paimon's batch scan does): the rows appear once compacted
    assert len(pypaimon_rows(warehouse, "db.pk", 1)) == (0 if engine == "first-row" else 6)
    assert compact(spark_session, table, CompactRequest()).counts["bins"] == 0


def test_deletion_vectors_are_applied_and_leave_the_index(spark_session, tmp_path):
    from pyroaring import BitMap

    from paimon_format.model.schema import new_table_schema
    from paimon_format.model.type_parsing import parse_type
    from paimon_format.scan.snapshot_scan import index_entries
    from tests.support.dv_tables import delete_rows

    warehouse = str(tmp_path / "wh")
    table = Table.open(warehouse, IDENTIFIER)
    columns = [("id", parse_type("BIGINT")), ("dt", parse_type("STRING")), ("v", parse_type("STRING"))]
    options = {"deletion-vectors.enabled": "true"}
    table.schema_manager.create_table(new_table_schema(columns, partition_keys=["dt"], options=options))
    table.refresh()
    for commit in range(3):
        append_rows(table, batch(commit * 4, 4, days=2))
    first = sorted(live_files(table), key=lambda e: e.file.min_sequence_number)[0]
    delete_rows(table, first.partition, first.bucket, {first.file.file_name: BitMap([0])})
    before = by_id(pypaimon_rows(warehouse, IDENTIFIER))
    assert len(before) == 11, "pypaimon applies the deletion vector"

    record = compact(spark_session, table, CompactRequest())

    snapshot = table.snapshot_manager.latest()
    assert snapshot.commit_kind == "COMPACT" and record.counts["rows_written"] == 5
    assert not [e for e in index_entries(table, snapshot) if e.index_type == "DELETION_VECTORS"]
    rewritten = [e for e in live_files(table) if e.partition == first.partition]
    assert len(rewritten) == 1 and rewritten[0].file.row_count == 5
    assert by_id(pypaimon_rows(warehouse, IDENTIFIER)) == before
    assert len(pypaimon_rows(warehouse, IDENTIFIER, snapshot.id - 1)) == 11


def test_fixed_bucket_append_table_compacts_windows_in_sequence_order(spark_session, tmp_path):
    from paimon_format.commit import CommitMessage
    from paimon_format.data.writer import write_table_files
    from tests.support.factories import make_table

    warehouse = str(tmp_path / "wh")
    table = make_table(
        f"{warehouse}/db.db/fixed", partition_keys=(), options={"bucket": "2", "bucket-key": "id"}
    )
    for commit in range(6):
        written = write_table_files(
            table.file_io, table.path, table.schema, batch(commit * 10, 10), commit * 100
        )
        SnapshotCommit(table).append([CommitMessage(p, b, 2, files) for p, b, files in written])
    before = by_id(pypaimon_rows(warehouse, "db.fixed"))

    compact(spark_session, table, CompactRequest())

    after = live_files(table)
    for bucket in (0, 1):
        files = sorted((e.file for e in after if e.bucket == bucket), key=lambda f: f.min_sequence_number)
        # the five oldest files became one, which keeps their first sequence number; the sixth stays
        assert [f.file_source for f in files] == [1, 0] and files[0].min_sequence_number == 0
        assert files[0].max_sequence_number < files[1].min_sequence_number
    assert by_id(pypaimon_rows(warehouse, "db.fixed")) == before
