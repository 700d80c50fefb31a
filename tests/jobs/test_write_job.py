"""The write job on local Spark: appends, PK updates, overwrites, bad input; read back by pypaimon."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.__main__ import main
from jobs.write import write_dataframe
from jobs.writing.settings import WriteSettings
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.support.pypaimon_reads import pypaimon_rows

pytest.importorskip("pypaimon")


def rows_df(spark, rows):
    return spark.createDataFrame(rows, "id long, dt string, v string")


def latest_id(warehouse: str, identifier: str) -> int | None:
    return Table.open(warehouse, identifier).snapshot_manager.latest_id()


def test_appends_to_a_partitioned_table_are_read_back_at_every_snapshot(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    first = [(1, "2024-01-01", "a"), (2, "2024-01-02", "b")]
    second = [(3, "2024-01-01", "c")]
    write_dataframe(
        rows_df(spark_session, first), WriteSettings(warehouse, "db.events", partition_keys=["dt"])
    )
    write_dataframe(rows_df(spark_session, second), WriteSettings(warehouse, "db.events"))

    as_dicts = [{"id": i, "dt": d, "v": v} for i, d, v in first + second]
    assert pypaimon_rows(warehouse, "db.events", 1) == sorted(as_dicts[:2], key=lambda r: r["id"])
    assert sorted(pypaimon_rows(warehouse, "db.events"), key=lambda r: r["id"]) == as_dicts
    table = Table.open(warehouse, "db.events")
    assert table.schema.partition_keys == ("dt",)
    assert (tmp_path / "wh" / "db.db" / "events" / "dt=2024-01-01" / "bucket-0").is_dir()


def test_primary_key_updates_over_several_commits_keep_one_row_per_key(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    options = {"bucket": "4"}
    write_dataframe(
        rows_df(spark_session, [(k, "d", f"v0-{k}") for k in range(20)]),
        WriteSettings(warehouse, "db.pk", primary_keys=["id"], options=options),
    )
    write_dataframe(
        rows_df(spark_session, [(k, "d", f"v1-{k}") for k in range(0, 20, 2)]),
        WriteSettings(warehouse, "db.pk"),
    )
    write_dataframe(
        rows_df(spark_session, [(3, "d", "first"), (3, "d", "last"), (25, "d", "new")]),
        WriteSettings(warehouse, "db.pk"),
    )

    expected = {k: f"v0-{k}" for k in range(20)}
    expected.update({k: f"v1-{k}" for k in range(0, 20, 2)})
    expected.update({3: "last", 25: "new"})
    rows = pypaimon_rows(warehouse, "db.pk")
    assert {r["id"]: r["v"] for r in rows} == expected
    assert len(rows) == len(expected)  # a key hashed to two buckets would come back twice
    assert {r["id"]: r["v"] for r in pypaimon_rows(warehouse, "db.pk", 1)} == {
        k: f"v0-{k}" for k in range(20)
    }


def test_overwrite_replaces_only_the_partitions_the_input_touches(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    write_dataframe(
        rows_df(spark_session, [(1, "a", "x"), (2, "b", "y")]),
        WriteSettings(warehouse, "db.t", partition_keys=["dt"]),
    )
    write_dataframe(
        rows_df(spark_session, [(3, "a", "z")]), WriteSettings(warehouse, "db.t", mode="overwrite")
    )
    assert {(r["id"], r["dt"]) for r in pypaimon_rows(warehouse, "db.t")} == {(3, "a"), (2, "b")}

    write_dataframe(
        rows_df(spark_session, [(4, "c", "w")]),
        WriteSettings(warehouse, "db.t", mode="overwrite", overwrite_scope="table"),
    )
    assert {(r["id"], r["dt"]) for r in pypaimon_rows(warehouse, "db.t")} == {(4, "c")}
    assert {(r["id"], r["dt"]) for r in pypaimon_rows(warehouse, "db.t", 2)} == {(3, "a"), (2, "b")}


def test_empty_input_creates_no_snapshot(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    write_dataframe(
        rows_df(spark_session, [(1, "a", "x")]), WriteSettings(warehouse, "db.t", partition_keys=["dt"])
    )
    record = write_dataframe(rows_df(spark_session, []), WriteSettings(warehouse, "db.t"))
    assert record.counts["files_written"] == 0
    assert latest_id(warehouse, "db.t") == 1


def write_yaml(tmp_path, text: str) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return str(path)


def test_cli_writes_from_parquet_files_and_reports(spark_session, tmp_path, capsys):
    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(
        pa.table({"id": [1, 2, 3], "dt": ["x", "y", "x"], "v": ["a", "b", "c"]}), source / "p.parquet"
    )
    config = write_yaml(
        tmp_path,
        f"""
warehouse: {tmp_path}/wh
table: db.events
source: {{format: parquet, path: {source}}}
create: {{partition_keys: [dt]}}
""",
    )
    assert main(["write", "--config", config]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["status"] == "done" and record["counts"]["rows_written"] == 3
    assert record["details"]["path"].startswith("direct")  # executors read the Parquet files themselves
    assert record["snapshot_ids"]["committed"] == 1
    assert len(pypaimon_rows(f"{tmp_path}/wh", "db.events")) == 3


def test_cli_dry_run_writes_nothing(spark_session, tmp_path, capsys):
    config = write_yaml(
        tmp_path,
        f"""
warehouse: {tmp_path}/wh
table: db.events
source: {{query: "SELECT CAST(id AS BIGINT) AS id FROM range(5)"}}
""",
    )
    assert main(["write", "--config", config, "--dry-run"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["dry_run"] is True and record["counts"]["input_rows"] == 5
    assert not (tmp_path / "wh").exists()


@pytest.mark.parametrize(
    "body, message",
    [
        (
            "warehouse: {wh}\ntable: db.t\nsource: {{path: /nope, format: parquet}}\nbogus: 1\n",
            "bogus: unknown key",
        ),
        ("warehouse: {wh}\ntable: nodot\nsource: {{query: 'SELECT 1'}}\n", "table: Value error"),
        ("warehouse: {wh}\ntable: db.t\nsource: {{path: {wh}/missing, format: parquet}}\n", "source.path"),
        ("warehouse: {wh}\ntable: db.t\nsource: [unclosed\n", "invalid YAML"),
    ],
)
def test_cli_bad_input_exits_2_with_a_one_line_cause(spark_session, tmp_path, capsys, body, message):
    config = write_yaml(tmp_path, body.format(wh=tmp_path / "wh"))
    assert main(["write", "--config", config]) == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert json.loads(captured.out)["status"] == "failed"


def test_cli_schema_mismatch_exits_2_naming_the_columns(spark_session, tmp_path, capsys):
    warehouse = str(tmp_path / "wh")
    write_dataframe(
        rows_df(spark_session, [(1, "a", "x")]), WriteSettings(warehouse, "db.t", partition_keys=["dt"])
    )
    config = write_yaml(
        tmp_path,
        f"""
warehouse: {warehouse}
table: db.t
source: {{query: "SELECT 'text' AS id, 'a' AS dt, 1.5 AS other"}}
""",
    )
    assert main(["write", "--config", config]) == 2
    error = capsys.readouterr().err
    assert "id (STRING -> table BIGINT)" in error and "missing columns: v" in error and "other" in error
    assert latest_id(warehouse, "db.t") == 1
    assert FileIO.for_path(warehouse).exists(f"{warehouse}/db.db/t/snapshot/snapshot-2") is False


@pytest.mark.parametrize(
    "options",
    [
        {"file.format": "orc"},
        {"file.format": "avro"},
        {"bucket": "3", "bucket-key": "id", "file.compression": "snappy"},
    ],
)
def test_formats_and_fixed_bucket_append_tables_read_back(spark_session, tmp_path, options):
    warehouse = str(tmp_path / "wh")
    rows = [(i, f"d{i % 2}", f"v{i}") for i in range(12)]
    write_dataframe(
        rows_df(spark_session, rows), WriteSettings(warehouse, "db.t", partition_keys=["dt"], options=options)
    )
    write_dataframe(rows_df(spark_session, [(99, "d0", "late")]), WriteSettings(warehouse, "db.t"))
    expected = sorted(
        ({"id": i, "dt": d, "v": v} for i, d, v in rows + [(99, "d0", "late")]), key=lambda r: r["id"]
    )
    assert sorted(pypaimon_rows(warehouse, "db.t"), key=lambda r: r["id"]) == expected
    files = [p.name for p in (tmp_path / "wh" / "db.db" / "t").rglob("data-*")]
    assert files and all(name.endswith("." + options.get("file.format", "parquet")) for name in files)


def test_overwrite_of_named_partitions(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    write_dataframe(
        rows_df(spark_session, [(1, "a", "x"), (2, "b", "y"), (3, "c", "z")]),
        WriteSettings(warehouse, "db.t", partition_keys=["dt"]),
    )
    write_dataframe(
        rows_df(spark_session, [(4, "a", "new")]),
        WriteSettings(
            warehouse,
            "db.t",
            mode="overwrite",
            overwrite_scope="partitions",
            overwrite_partitions=[{"dt": "a"}, {"dt": "b"}],
        ),
    )
    assert {(r["id"], r["dt"]) for r in pypaimon_rows(warehouse, "db.t")} == {(4, "a"), (3, "c")}


def test_a_failed_commit_leaves_no_snapshot_and_removes_its_files(spark_session, tmp_path, monkeypatch):
    from paimon_format.commit import SnapshotCommit
    from paimon_format.errors import CommitConflictError

    warehouse = str(tmp_path / "wh")
    write_dataframe(
        rows_df(spark_session, [(1, "a", "x")]), WriteSettings(warehouse, "db.t", partition_keys=["dt"])
    )
    before = {p.name for p in (tmp_path / "wh").rglob("data-*")}

    def refuse(self, messages, **kwargs):
        raise CommitConflictError("simulated conflict")

    monkeypatch.setattr(SnapshotCommit, "append", refuse)
    with pytest.raises(CommitConflictError):
        write_dataframe(rows_df(spark_session, [(2, "b", "y")]), WriteSettings(warehouse, "db.t"))
    assert latest_id(warehouse, "db.t") == 1
    assert {p.name for p in (tmp_path / "wh").rglob("data-*")} == before


@pytest.mark.parametrize(
    "partition_keys, primary_keys, options, message",
    [
        (["dt"], ["id", "dt"], {"bucket": "-2"}, "bucket=-2"),
        (["dt"], ["id"], {}, "cross-partition upsert"),  # bucket -1 without every partition key
        (["dt"], ["id", "dt"], {"dynamic-bucket.target-row-num": "0"}, "at least 1"),
    ],
    ids=["postpone", "cross_partition", "target_row_num"],
)
def test_postpone_and_cross_partition_tables_are_refused_before_anything_is_written(
    spark_session, tmp_path, partition_keys, primary_keys, options, message
):
    from jobs.runtime.errors import BadInputError

    with pytest.raises(BadInputError, match=message):
        write_dataframe(
            rows_df(spark_session, [(1, "a", "x")]),
            WriteSettings(
                str(tmp_path / "wh"),
                "db.pk",
                partition_keys=partition_keys,
                primary_keys=primary_keys,
                options=options,
            ),
        )
    assert not (tmp_path / "wh").exists()


def test_dynamic_bucket_write_onto_a_pypaimon_table_keeps_each_key_in_its_bucket(spark_session, tmp_path):
    """pypaimon writes dynamic-bucket tables with its own HASH index; our write on top keeps every
    existing key in the bucket pypaimon gave it (pypaimon then reads each key once), and the new keys
    open buckets past the target row number."""
    import pypaimon

    from paimon_format.data.bucket import hash_array
    from paimon_format.index.hash_index import hash_index_entries, read_hash_index
    from paimon_format.model.types import BIGINT

    warehouse = str(tmp_path / "wh")
    catalog = pypaimon.CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database("db", True)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("dt", pa.string()), ("v", pa.string())])
    options = {"dynamic-bucket.target-row-num": "3"}
    catalog.create_table(
        "db.t", pypaimon.Schema.from_pyarrow_schema(schema, ["dt"], ["id", "dt"], options), False
    )
    table = catalog.get_table("db.t")
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.table({"id": [1, 2, 3], "dt": ["a", "a", "b"], "v": ["p", "p", "p"]}, schema=schema))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()
    ours = [(2, "a", "ours"), (3, "b", "ours"), (4, "a", "new"), (5, "a", "new"), (6, "a", "new")]
    write_dataframe(rows_df(spark_session, ours), WriteSettings(warehouse, "db.t"))
    rows = {(r["id"], r["dt"]): r["v"] for r in pypaimon_rows(warehouse, "db.t")}
    assert len(pypaimon_rows(warehouse, "db.t")) == 6
    assert rows == {
        (1, "a"): "p",
        (2, "a"): "ours",
        (3, "b"): "ours",
        (4, "a"): "new",
        (5, "a"): "new",
        (6, "a"): "new",
    }
    target = Table.open(warehouse, "db.t")
    index = hash_index_entries(target, target.snapshot_manager.latest())
    partition_a = next(p for p in index if target.partition_values(p) == ["a"])
    # 5 keys, at most 3 a bucket (how many buckets depends on the assigners: Spark's parallelism)
    assert sum(e.row_count for e in index[partition_a]) == 5
    assert max(e.row_count for e in index[partition_a]) <= 3 and len(index[partition_a]) >= 2
    bucket_0 = next(e for e in index[partition_a] if e.bucket == 0)  # pypaimon's: keys 1 and 2 stay
    hashes = hash_array([pa.array([1, 2], pa.int64())], [BIGINT()])
    assert set(hashes.tolist()) <= set(read_hash_index(target, bucket_0).tolist())


def test_a_corrupt_hash_index_file_is_exit_2_naming_it_and_nothing_is_committed(
    spark_session, tmp_path, capsys
):
    warehouse = str(tmp_path / "wh")
    write_dataframe(
        rows_df(spark_session, [(1, "a", "x"), (2, "b", "y")]),
        WriteSettings(warehouse, "db.t", partition_keys=["dt"], primary_keys=["id", "dt"]),
    )
    index_files = sorted((tmp_path / "wh" / "db.db" / "t" / "index").iterdir())
    assert len(index_files) == 2  # one HASH file per (partition, bucket)
    index_files[0].write_bytes(b"\x00\x00\x01")  # not a whole int32
    before = {p.name for p in (tmp_path / "wh").rglob("*")}
    source = tmp_path / "in"
    pq.write_table(pa.table({"id": [3, 4], "dt": ["a", "b"], "v": ["z", "z"]}), source)
    config = write_yaml(tmp_path, f"warehouse: {warehouse}\ntable: db.t\nsource: {{path: {source}}}\n")
    assert main(["write", "--config", config]) == 2
    assert index_files[0].name in capsys.readouterr().err
    assert latest_id(warehouse, "db.t") == 1
    assert {p.name for p in (tmp_path / "wh").rglob("*")} == before


def test_a_dynamic_bucket_commit_refuses_when_another_writer_changed_the_hash_index(tmp_path):
    """Buckets were assigned from snapshot 1's index; another writer's new HASH file for the same
    partition lands first: committing ours could put one key in two buckets, so it is a conflict."""
    import numpy as np

    from jobs.writing.dynamic_bucket import index_update
    from paimon_format.commit import IndexUpdate, SnapshotCommit
    from paimon_format.errors import CommitConflictError
    from paimon_format.index.hash_index import hash_index_entries, write_hash_index
    from tests.support.factories import data_file, make_table, message, partition_of

    table = make_table(str(tmp_path / "db.db" / "t"), primary_keys=("id", "dt"), options={"bucket": "-1"})
    a, b = partition_of(table, "a"), partition_of(table, "b")

    def commit_hash(partition: bytes, name: str, hashes: list[int]) -> None:
        entry = write_hash_index(table, partition, 0, np.array(hashes))
        update = IndexUpdate(add=[entry], drop=lambda e: (bytes(e.partition), e.bucket) == (partition, 0))
        values = table.partition_values(partition)
        SnapshotCommit(table).append([message(table, values, data_file(name))], index=update)

    commit_hash(a, "data-1.parquet", [1])
    ours = write_hash_index(table, a, 0, np.array([1, 2]))
    update = index_update(table, 1, [ours], {a}, None)
    commit_hash(b, "data-2.parquet", [5])  # another partition: no conflict
    SnapshotCommit(table).append([message(table, ["a"], data_file("data-3.parquet"))], index=update)
    latest = table.snapshot_manager.latest()
    assert [e.file_name for e in hash_index_entries(table, latest)[a]] == [ours.file_name]

    stale = index_update(table, latest.id, [write_hash_index(table, a, 0, np.array([1, 2, 3]))], {a}, None)
    commit_hash(a, "data-4.parquet", [1, 2, 4])  # the same partition's index changed meanwhile
    with pytest.raises(CommitConflictError, match="hash index of partition dt=a"):
        SnapshotCommit(table).append([message(table, ["a"], data_file("data-5.parquet"))], index=stale)


def test_hive_style_source_directories_go_through_spark(spark_session, tmp_path):
    from jobs.writing.source import parquet_files

    flat = tmp_path / "flat"
    flat.mkdir()
    pq.write_table(pa.table({"id": [1]}), flat / "a.parquet")
    (flat / "_SUCCESS").write_text("")
    hive = tmp_path / "hive" / "dt=x"
    hive.mkdir(parents=True)
    pq.write_table(pa.table({"id": [1]}), hive / "a.parquet")

    found = parquet_files(str(flat), {})
    assert found is not None and [p.rsplit("/", 1)[1] for p in found.paths] == ["a.parquet"]
    assert parquet_files(str(tmp_path / "hive"), {}) is None  # Spark adds `dt` from the directory names
    assert parquet_files(str(tmp_path / "missing"), {}) is None


def test_an_overwrite_record_says_what_it_replaced(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    first = [(1, "a", "x"), (2, "a", "y"), (3, "b", "z"), (4, "c", "w")]
    write_dataframe(rows_df(spark_session, first), WriteSettings(warehouse, "db.t", partition_keys=["dt"]))
    record = write_dataframe(
        rows_df(spark_session, [(5, "a", "n"), (6, "b", "m")]),
        WriteSettings(warehouse, "db.t", mode="overwrite"),
    )
    assert record.snapshot_ids == {"base": 1, "committed": 2, "committed_ids": [2]}
    assert record.details["replaced"] == {
        "scope": "touched",
        "partition_count": 2,
        "partitions": ["dt=a", "dt=b"],
    }
    assert record.counts["rows_replaced"] == 3  # the rows of dt=a and dt=b that snapshot 1 had
    live_before = {f["file"] for f in _live_files(warehouse, 1) if f["dt"] in ("a", "b")}
    assert record.counts["files_replaced"] == len(live_before) and record.bytes["replaced"] > 0
    assert {(r["id"], r["dt"]) for r in pypaimon_rows(warehouse, "db.t")} == {(5, "a"), (6, "b"), (4, "c")}


def _live_files(warehouse: str, snapshot_id: int) -> list[dict]:
    from paimon_format.scan.snapshot_scan import live_entries

    table = Table.open(warehouse, "db.t")
    snapshot = table.snapshot_manager.snapshot(snapshot_id)
    return [
        {"file": e.file.file_name, "dt": table.partition_dir(e.partition).split("=")[1]}
        for e in live_entries(table, snapshot)
    ]


def test_a_create_block_that_differs_from_the_table_warns_or_with_strict_create_exits_2(
    spark_session, tmp_path, capsys
):
    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(pa.table({"id": [1, 2], "dt": ["x", "y"], "v": ["a", "b"]}), source / "p.parquet")
    warehouse = tmp_path / "wh"
    body = f"warehouse: {warehouse}\ntable: db.events\nsource: {{format: parquet, path: {source}}}\n"
    assert main(["write", "--config", write_yaml(tmp_path, body + "create: {partition_keys: [dt]}\n")]) == 0
    capsys.readouterr()

    changed = body + "create: {partition_keys: [id], options: {bucket: '2', bucket-key: id}}\n"
    assert main(["write", "--config", write_yaml(tmp_path, changed)]) == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert record["details"]["create_mismatch"] == [
        "partition_keys ['id'] (table: ['dt'])",
        "bucket 2 (table: -1)",
    ]
    assert "create: differs from the existing table db.events" in captured.err and "WARNING" in captured.err

    strict = write_yaml(tmp_path, changed + "strict_create: true\n")
    snapshots = latest_id(str(warehouse), "db.events")
    assert main(["write", "--config", strict]) == 2
    record = json.loads(capsys.readouterr().out)
    assert "partition_keys ['id'] (table: ['dt'])" in record["error"] and "strict_create" in record["error"]
    assert latest_id(str(warehouse), "db.events") == snapshots == 2


def test_a_table_whose_first_commit_fails_is_removed_so_a_corrected_create_applies(
    spark_session, tmp_path, monkeypatch
):
    from paimon_format.commit import SnapshotCommit
    from paimon_format.errors import CommitConflictError

    warehouse = str(tmp_path / "wh")
    original_append = SnapshotCommit.append

    def refuse(self, messages, **kwargs):
        raise CommitConflictError("simulated conflict")

    monkeypatch.setattr(SnapshotCommit, "append", refuse)
    with pytest.raises(CommitConflictError):
        write_dataframe(
            rows_df(spark_session, [(1, "a", "x")]), WriteSettings(warehouse, "db.t", partition_keys=["v"])
        )
    assert not (tmp_path / "wh" / "db.db" / "t").exists()  # no schema, no empty directories left

    monkeypatch.setattr(SnapshotCommit, "append", original_append)
    write_dataframe(
        rows_df(spark_session, [(1, "a", "x")]), WriteSettings(warehouse, "db.t", partition_keys=["dt"])
    )
    assert Table.open(warehouse, "db.t").schema.partition_keys == ("dt",)
    assert pypaimon_rows(warehouse, "db.t") == [{"id": 1, "dt": "a", "v": "x"}]
