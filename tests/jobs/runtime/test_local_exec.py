"""Small tables maintained in the driver process: the same results as on Spark, and no Spark at all.

One template table has everything the three jobs must respect: snapshots with compactions, a tag,
a branch made from snapshot 1, decoupled changelog retention (expired snapshots become changelogs,
old changelogs expire) and planted orphans of every kind. Each job runs on two identical copies,
once in the driver (`local: always`, with a session that fails if anything asks for Spark) and once
on Spark (`local: never`), dry run first, then for real; both must report the same counts, delete
the same files and leave the same snapshots.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from jobs.runtime.config import validate
from jobs.runtime.local_frame import LocalLimitExceeded, LocalSession, functions_for
from jobs.runtime.registry import JobContext, load
from jobs.runtime.report import RunRecord
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.table import Table
from tests.interop import oracle
from tests.support.changelog_tables import decoupled_table
from tests.support.partition_tables import days_ago, live_partitions, metadata_table
from tests.support.planted_files import age_tree, files_on_disk, plant_orphans
from tests.support.table_states import table_root

pytest.importorskip("pypaimon")  # the oracle reads every copy

LOG = logging.getLogger("test_local_exec")
# engine-specific counts: how the listing was split into waves depends on the number of cores
ENGINE_COUNTS = {"listing_waves"}


def no_spark() -> Any:
    raise AssertionError("the local path asked for a SparkSession")


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> str:
    warehouse = str(tmp_path_factory.mktemp("local-template"))
    table = decoupled_table(warehouse)
    root = Path(table.path)
    branch = root / "branch" / "branch-b"
    (branch / "schema").mkdir(parents=True)
    (branch / "snapshot").mkdir()
    shutil.copy(root / "schema" / "schema-0", branch / "schema" / "schema-0")
    shutil.copy(root / "snapshot" / "snapshot-1", branch / "snapshot" / "snapshot-1")
    age_tree(root)
    plant_orphans(str(root))
    (root / "consumer" / "consumer-reader1").unlink()  # it would hold back snapshot expiry
    return warehouse


def copy_of(template: str, target: Path) -> str:
    shutil.copytree(template, target)
    return str(target)


def run_job(operation: str, warehouse: str, spark: Any, dry_run: bool = False, **keys: Any) -> RunRecord:
    module = load(operation)
    config = validate({"warehouse": warehouse, "table": "db.t", **keys}, module.CONFIG_MODEL, "test")
    record = RunRecord(operation=operation, table="db.t", dry_run=dry_run)
    provider = no_spark if spark is None else (lambda: spark)
    module.run(JobContext(operation, config, dry_run, record, LOG, spark_provider=provider), config)
    return record


def comparable(record: RunRecord) -> dict[str, Any]:
    counts = {key: value for key, value in record.counts.items() if key not in ENGINE_COUNTS}
    return {"counts": counts, "bytes": record.bytes, "snapshot_ids": record.snapshot_ids}


def both_ways(
    operation: str,
    template: str,
    tmp_path: Path,
    spark_session: Any,
    on_spark: tuple[str, RunRecord] | None = None,
    **keys: Any,
) -> tuple[str, str, RunRecord]:
    """`operation` on two copies: in the driver (a dry run first, which must delete nothing and plan
    what the real runs then do), and on Spark; both real runs must report the same. `on_spark`: the
    Spark run already made on a copy of the template (its warehouse and record), shared with another
    test."""
    local = copy_of(template, tmp_path / "local")
    before = files_on_disk(table_root(local))
    dry = run_job(operation, local, None, dry_run=True, local="always", **keys)
    assert files_on_disk(table_root(local)) == before
    real_local = run_job(operation, local, None, local="always", **keys)
    if on_spark is None:
        remote = copy_of(template, tmp_path / "spark")
        real_spark = run_job(operation, remote, spark_session, local="never", **keys)
    else:
        remote, real_spark = on_spark
    assert (real_local.details["executed_in"], real_spark.details["executed_in"]) == ("driver", "spark")
    assert comparable(real_local) == comparable(real_spark)
    planned = {key: value for key, value in comparable(real_spark)["counts"].items() if key in dry.counts}
    assert comparable(dry)["counts"] == planned
    return local, remote, real_local


@pytest.fixture(scope="module")
def expired_on_spark(template, spark_session, tmp_path_factory) -> tuple[str, RunRecord]:
    """expire-snapshots on Spark (`local: never`) on a copy of the template: (warehouse, record),
    made once for the two tests that compare a driver run with it."""
    remote = copy_of(template, tmp_path_factory.mktemp("local-exec-spark") / "wh")
    return remote, run_job("expire-snapshots", remote, spark_session, local="never")


def test_expire_snapshots_in_the_driver_deletes_what_spark_deletes(
    template, tmp_path, spark_session, expired_on_spark
):
    local, remote, record = both_ways(
        "expire-snapshots", template, tmp_path, spark_session, on_spark=expired_on_spark
    )
    # 8 snapshots, 2 retained: 6 become changelogs, of which the oldest 4 expire with their lists
    assert record.counts["snapshots_expired"] == record.counts["changelogs_written"] == 6
    assert record.counts["changelogs_expired"] == 4 and record.counts["changelog_manifest_lists_deleted"] > 0
    assert files_on_disk(table_root(local)) == files_on_disk(table_root(remote))
    assert oracle.read_rows(local, "db.t", tag="t3") == oracle.read_rows(remote, "db.t", tag="t3")


def test_remove_orphan_files_in_the_driver_deletes_what_spark_deletes(template, tmp_path, spark_session):
    before = files_on_disk(table_root(template))
    local, remote, record = both_ways("remove-orphan-files", template, tmp_path, spark_session)
    after = files_on_disk(table_root(local))
    assert record.counts["files_deleted"] == len(before - after) == 12
    assert after == files_on_disk(table_root(remote))


def test_compact_manifests_in_the_driver_commits_what_spark_commits(template, tmp_path, spark_session):
    """The partition-sorted rewrite in the driver and on Spark, and the block merge (always in the
    driver, also with `local: never`): the same live files and rows."""
    local, remote, record = both_ways(
        "compact-manifests", template, tmp_path, spark_session, mode="full", order="partition"
    )
    assert record.counts["manifests_after"] < record.counts["manifests_before"]
    blocks = copy_of(template, tmp_path / "blocks")
    by_blocks = run_job("compact-manifests", blocks, spark_session, mode="full", local="never")
    assert by_blocks.details["executed_in"] == "driver"
    assert comparable(by_blocks)["counts"] == comparable(record)["counts"]
    tables = [Table.open(warehouse, "db.t") for warehouse in (local, remote, blocks)]
    latest = [table.snapshot_manager.latest() for table in tables]
    assert [snapshot.id for snapshot in latest] == [9, 9, 9]
    assert [snapshot.commit_kind for snapshot in latest] == ["COMPACT"] * 3
    files = [
        sorted(e.file.file_name for e in live_entries(t, s)) for t, s in zip(tables, latest, strict=True)
    ]
    assert files[0] == files[1] == files[2]
    assert (
        oracle.read_rows(local, "db.t")
        == oracle.read_rows(remote, "db.t")
        == oracle.read_rows(blocks, "db.t")
    )


@pytest.mark.parametrize(
    "operation, keys",
    [
        ("drop-partition", {"partitions": [{"dt": "2024-01-01"}]}),
        ("expire-partitions", {"expiration_time": "1d", "timestamp_formatter": "yyyy-MM-dd"}),
    ],
)
def test_partition_jobs_in_the_driver_commit_what_spark_commits(
    template, tmp_path, spark_session, operation, keys
):
    local, remote, record = both_ways(operation, template, tmp_path, spark_session, **keys)
    assert record.counts["files_dropped"] > 0
    tables = [Table.open(warehouse, "db.t") for warehouse in (local, remote)]
    latest = [table.snapshot_manager.latest() for table in tables]
    assert latest[0].id == latest[1].id and latest[0].commit_kind == latest[1].commit_kind == "OVERWRITE"
    files = [
        sorted(e.file.file_name for e in live_entries(t, s)) for t, s in zip(tables, latest, strict=True)
    ]
    assert files[0] == files[1]
    assert oracle.read_rows(local, "db.t") == oracle.read_rows(remote, "db.t")


def test_auto_sizes_the_table_and_takes_spark_above_the_threshold(template, tmp_path, spark_session):
    warehouse = copy_of(template, tmp_path / "w")
    small = run_job("remove-orphan-files", warehouse, None, dry_run=True)
    assert small.details["executed_in"] == "driver"
    size = small.details["table_size"]
    assert size["branches"] == 2 and size["roots"] >= 8 + 1 + 1 and size["manifest_entries"] > 0
    large = run_job("remove-orphan-files", warehouse, spark_session, dry_run=True, local_max_entries=10)
    assert large.details["executed_in"] == "spark"
    assert comparable(small) == comparable(large)


def test_expire_snapshots_on_a_table_of_many_files_runs_in_the_driver_when_the_names_fit(
    template, tmp_path, spark_session, expired_on_spark
):
    """A table above local_max_files still expires in the driver (its work is bounded by what the
    roots name), with what Spark does (`expired_on_spark`); orphan cleaning, which lists every file,
    goes to Spark; and an expiry whose roots name more than the row limit goes to Spark too."""
    local = copy_of(template, tmp_path / "local")
    remote, on_spark = expired_on_spark
    expiry = run_job("expire-snapshots", local, None, local_max_files=1)
    assert expiry.details["executed_in"] == "driver"
    assert expiry.details["table_size"]["live_files"] > 1 and expiry.details["table_size"]["manifests"] > 0
    assert comparable(expiry) == comparable(on_spark) and expiry.counts["snapshots_expired"] == 6
    assert files_on_disk(table_root(local)) == files_on_disk(table_root(remote))
    orphans = run_job("remove-orphan-files", local, spark_session, dry_run=True, local_max_files=1)
    assert orphans.details["executed_in"] == "spark"
    too_many = copy_of(template, tmp_path / "names")
    names = run_job(
        "expire-snapshots", too_many, spark_session, dry_run=True, local_max_files=1, local_max_entries=1
    )
    assert names.details["executed_in"] == "spark"


def test_a_local_run_outgrowing_its_row_limit_starts_again_on_spark(
    template, tmp_path, spark_session, monkeypatch
):
    monkeypatch.setattr("jobs.runtime.local_exec.row_limit", lambda _entries, _files: 5)
    warehouse = copy_of(template, tmp_path / "w")
    before = files_on_disk(table_root(warehouse))
    record = run_job("remove-orphan-files", warehouse, spark_session)
    assert record.details["executed_in"] == "spark"
    assert "row limit" in record.details["local_abandoned"]
    assert record.counts["files_deleted"] == len(before - files_on_disk(table_root(warehouse))) == 12


def test_maintain_over_small_tables_starts_no_spark(template, tmp_path):
    warehouse = tmp_path / "w"
    for name in ("t", "u"):
        shutil.copytree(table_root(template), warehouse / "db.db" / name)
    module = load("maintain")
    config = validate({"warehouse": str(warehouse), "tables": ["db.*"]}, module.CONFIG_MODEL, "test")
    record = RunRecord(operation="maintain")
    module.run(JobContext("maintain", config, False, record, LOG, spark_provider=no_spark), config)
    assert record.counts["tables_done"] == 2
    for outcome in record.details["tables"].values():
        steps = {op["operation"]: op["details"]["executed_in"] for op in outcome["operations"]}
        assert steps == dict.fromkeys(
            ("expire-snapshots", "compact-manifests", "remove-orphan-files"), "driver"
        )
    assert record.counts["files_removed"] > 0


# -- the in-process frame itself (no Spark) ------------------------------------------------------------


def test_the_local_frame_keeps_the_spark_semantics_the_jobs_rely_on():
    session = LocalSession()
    F = functions_for(session)
    rows = [("a", 0, 5), ("a", 1, 9), ("b", 1, 2), ("c", 0, 7)]
    entries = session.createDataFrame(rows, "path string, kind int, ord long")
    last = entries.groupBy("path").agg(F.max_by("kind", "ord").alias("kind"), F.max("ord").alias("ord"))
    assert sorted(tuple(r) for r in last.collect()) == [("a", 1, 9), ("b", 1, 2), ("c", 0, 7)]
    kept = session.createDataFrame([("a",), ("z",)], "path string")
    assert sorted(r["path"] for r in entries.join(kept, "path", "left_anti").collect()) == ["b", "c"]
    assert entries.join(kept, "path", "left_semi").count() == 2
    assert entries.filter("kind = 1").count() == 2 and entries.filter(f"ord < {7}").count() == 2
    widened = entries.select("path", "kind").unionByName(
        entries.select("path", F.lit(2**40).alias("kind"))  # a BIGINT literal widens the INT column
    )
    assert widened.table.schema.field("kind").type == pa.int64() and widened.count() == 8
    totals = entries.groupBy("kind").agg({"path": "count", "ord": "sum"}).collect()
    assert sorted((r["kind"], r["count(path)"], r["sum(ord)"]) for r in totals) == [(0, 2, 12), (1, 2, 11)]
    labelled = entries.select(F.when(F.col("kind") == 1, F.lit("x")).otherwise(F.lit("y")).alias("s"))
    assert [r[0] for r in labelled.collect()] == ["y", "x", "x", "y"]
    assert entries.dropDuplicates(["path"]).count() == 3 and entries.select("kind").distinct().count() == 2


def test_a_local_frame_stops_an_unbounded_producer_at_the_row_limit():
    produced = []

    def endless(_batches):
        while True:
            produced.append(1)
            yield pa.RecordBatch.from_pydict({"path": ["f"] * 100})

    session = LocalSession(row_limit=1_000)
    with pytest.raises(LocalLimitExceeded, match="row limit of 1,000"):
        session.createDataFrame([("",)], "path string").mapInArrow(endless, "path string")
    assert len(produced) == 11  # stopped at the first batch past the limit, nothing more was read


def test_partition_jobs_stream_in_the_driver_without_deletes_up_to_the_scan_bound(tmp_path, spark_session):
    """drop-partition and expire-partitions (values-time) scan a snapshot that counts no DELETE entry
    in the driver above local_max_entries, up to local_max_scan_entries (their scan streams); one
    entry past that bound, a DELETE in the snapshot, or update-time (which merges every partition)
    takes Spark. Either way the same partitions go. drop-partition counts only the entries of the
    manifests it reads: those whose partition stats may hold the selection (one of four here)."""
    dates = [days_ago(100), days_ago(99), days_ago(98), days_ago(0)]
    tables = {}
    for name in ("driver", "spark", "bound", "update"):
        tables[name] = metadata_table(tmp_path / name, [(d,) for d in dates])
    entries = len(dates)
    tight = {"local_max_entries": 1}  # not "small": only the scan bound can keep a run in the driver

    def run(name: str, operation: str, spark: Any, **keys: Any) -> RunRecord:
        return run_job(operation, str(tmp_path / name), spark, **tight, **keys)

    dropped = run("driver", "drop-partition", None, partitions=[{"dt": dates[0]}], local_max_scan_entries=1)
    assert dropped.details["executed_in"] == "driver" and dropped.counts["files_dropped"] == 1
    assert dropped.details["table_size"]["scan_entries"] == 1 < entries
    on_spark = run(
        "spark", "drop-partition", spark_session, partitions=[{"dt": dates[0]}], local_max_scan_entries=0
    )
    assert on_spark.details["executed_in"] == "spark"
    assert live_partitions(tables["driver"]) == live_partitions(tables["spark"])

    expiry = {"expiration_time": "30d", "timestamp_formatter": "yyyy-MM-dd"}
    after_drop = run("driver", "expire-partitions", spark_session, **expiry)
    assert after_drop.details["executed_in"] == "spark", "the drop left DELETE entries to merge"
    fresh = run("bound", "expire-partitions", None, **expiry)
    assert fresh.details["executed_in"] == "driver" and fresh.counts["files_dropped"] == 3
    assert live_partitions(tables["bound"]) == live_partitions(tables["driver"]) == {(dates[-1],)}
    by_update = run("update", "expire-partitions", spark_session, **expiry, strategy="update-time")
    assert by_update.details["executed_in"] == "spark"
