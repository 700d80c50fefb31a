"""A small table's compaction is planned in the driver (the same code on a LocalSession): the same bins
as Spark plans, and only plain requests and small plans take that way."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

import jobs.compaction.run as compaction_run
from jobs.compact import compact
from jobs.compaction.run import CompactRequest, _bins, planned_entries
from jobs.runtime.local_frame import LocalSession
from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.compaction.rules import CompactionSettings
from paimon_format.data.writer import write_table_files
from paimon_format.table import Table
from tests.support.factories import make_table
from tests.support.table_states import build_sample_table

BIN_KEY = ("partition", "bucket", "bin")


def upsert(table: Table, step: int) -> None:
    ids = list(range(step, 60, 2 + step % 3))
    data = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "dt": ["a" if k % 2 else "b" for k in ids],
            "v": [f"v{step}-{k}" for k in ids],
        }
    )
    written = write_table_files(table.file_io, table.path, table.schema, data, step * 1000)
    SnapshotCommit(table).append([CommitMessage(p, b, 3, files) for p, b, files in written])


def pk_table(spark, root: str) -> Table:
    """Two partitions x 3 buckets of a deduplicate table: 4 upserts, a compaction (its manifests hold
    DELETE entries the plan must net out), 4 more upserts."""
    table = make_table(root, partition_keys=("dt",), primary_keys=("id", "dt"), options={"bucket": "3"})
    for step in range(4):
        upsert(table, step)
    compact(spark, table, CompactRequest())
    for step in range(4, 8):
        upsert(table, step)
    return Table(table.file_io, table.path)


def rows_of(frame) -> list[dict]:
    """The bins, each payload as (its files by name, deletion files, placement): the order of a bin's
    files depends on how the rows reached the planning task, and every rewrite sorts them first."""
    rows = []
    for row in frame.collect():
        found = row.asDict()
        metas, deletions, placement = pickle.loads(found.pop("payload"))
        found["payload"] = (sorted(metas, key=lambda meta: meta.file_name), deletions, placement)
        rows.append(found)
    return sorted(rows, key=lambda row: tuple(row[k] for k in BIN_KEY))


@pytest.fixture(scope="module")
def tables(spark_session, tmp_path_factory) -> list[Table]:
    root = tmp_path_factory.mktemp("plan")
    append = build_sample_table(str(root / "append"), commits=7, rows_per_commit=6)
    return [Table(append.file_io, append.path), pk_table(spark_session, str(root / "wh" / "db.db" / "pk"))]


@pytest.mark.parametrize("strategy", ["full", "minor"])
@pytest.mark.parametrize("kind", [0, 1], ids=["append", "primary-key"])
def test_the_driver_plans_the_bins_spark_plans(spark_session, tables, strategy, kind):
    table = tables[kind]
    latest = table.snapshot_manager.latest()
    settings = CompactionSettings.of(table.schema.options, bool(table.schema.primary_keys), None)
    request = CompactRequest(strategy=strategy)
    expected = rows_of(_bins(spark_session, table, latest, None, settings, request))
    local = rows_of(_bins(LocalSession(row_limit=10_000), table, latest, None, settings, request))
    assert expected  # the check can fail: there is something to plan
    assert local == expected


def test_a_plain_small_plan_is_made_in_the_driver_the_rest_on_spark(spark_session, tmp_path, monkeypatch):
    table = pk_table(spark_session, str(tmp_path / "wh" / "db.db" / "pk"))
    latest = table.snapshot_manager.latest()
    small = compact(spark_session, table, CompactRequest(), dry_run=True)
    assert small.details["planned_in"] == "driver"
    monkeypatch.setattr(compaction_run, "LOCAL_PLAN_ENTRIES", planned_entries(table, latest) - 1)
    big = compact(spark_session, table, CompactRequest(), dry_run=True)
    assert big.details["planned_in"] == "spark"
    assert big.counts["bins"] == small.counts["bins"] > 0
    monkeypatch.undo()
    monkeypatch.setattr(compaction_run, "LOCAL_PLAN_BYTES", 1000)  # wide payloads: bounded by bytes too
    assert compact(spark_session, table, CompactRequest(), dry_run=True).details["planned_in"] == "spark"
    monkeypatch.undo()
    some = compact(spark_session, table, CompactRequest(buckets=[(b"", 0)]), dry_run=True)
    assert some.details["planned_in"] == "spark"  # a bucket filter plans on Spark
    done = compact(spark_session, table, CompactRequest())
    assert done.details["planned_in"] == "driver"
    assert table.snapshot_manager.latest().id == latest.id + 1
    assert compact(spark_session, table, CompactRequest()).counts["bins"] == 0
