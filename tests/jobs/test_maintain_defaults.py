"""maintain with only `tables:`: the built-in defaults run each table's own maintenance.

Tables are written by the write job (old dates in `dt`), read back by pypaimon as the oracle.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from jobs.__main__ import main
from jobs.runtime.config import validate
from jobs.runtime.maintain_config import BUILT_IN, MaintainConfig, plan_tables, table_asks_for
from jobs.write import write_dataframe
from jobs.writing.settings import WriteSettings
from paimon_format.table import Table
from tests.support.pypaimon_reads import pypaimon_rows

pytest.importorskip("pypaimon")

# Snapshot retention and partition expiry come from the table's own options, as Paimon's would.
EXPIRING = {
    "partition.expiration-time": "1 d",
    "snapshot.num-retained.min": "1",
    "snapshot.num-retained.max": "1",
    "snapshot.time-retained": "1 ms",
}
OLD = time.time() - 3 * 24 * 3600


def write(spark, warehouse: str, table: str, rows: list[tuple], **kwargs) -> None:
    df = spark.createDataFrame(rows, "id long, dt string, v string")
    write_dataframe(df, WriteSettings(warehouse, table, **kwargs))


@pytest.fixture(scope="module")
def template(spark_session, tmp_path_factory: pytest.TempPathFactory) -> str:
    """db.events (expiring options, two old partitions and one far in the future, 3 snapshots),
    db.plain (no table options, 2 snapshots, one old orphan), db.broken (corrupt latest snapshot);
    written by the write job once for the module."""
    warehouse = str(tmp_path_factory.mktemp("maintain-defaults") / "wh")
    write(
        spark_session,
        warehouse,
        "db.events",
        [(1, "2020-01-01", "a")],
        partition_keys=["dt"],
        options=EXPIRING,
    )
    write(spark_session, warehouse, "db.events", [(2, "2020-01-02", "b")])
    write(spark_session, warehouse, "db.events", [(3, "2999-01-01", "c")])
    for rows in ([(1, "x", "a")], [(2, "y", "b")]):
        write(spark_session, warehouse, "db.plain", rows)
    orphan = Path(
        warehouse, "db.db", "plain", "bucket-0", "data-0b2e6b4c-1d7f-4c53-9a0e-5a1f1c0d9e11-0.parquet"
    )
    orphan.write_bytes(b"orphan" * 10)
    os.utime(orphan, (OLD, OLD))
    write(spark_session, warehouse, "db.broken", [(1, "x", "a")])
    Path(warehouse, "db.db", "broken", "snapshot", "snapshot-1").write_text("{not json")
    return warehouse


@pytest.fixture
def warehouse(template: str, tmp_path: Path) -> str:
    """A private copy of the template (file times kept: the orphan stays old)."""
    return shutil.copytree(template, str(tmp_path / "wh"))


def run(config: Path, *extra: str, capsys) -> tuple[int, dict]:
    code = main(["maintain", "--config", str(config), *extra])
    return code, json.loads(capsys.readouterr().out)


def test_only_tables_expires_compacts_and_cleans_and_a_broken_table_fails_even_in_a_dry_run(
    spark_session, warehouse, tmp_path, capsys
):
    config = tmp_path / "maintain.yaml"
    config.write_text(f"warehouse: {warehouse}\ntables: ['db.*']\n")
    orphan = next(Path(warehouse, "db.db", "plain", "bucket-0").glob("data-0b2e6b4c-*"))

    code, dry = run(config, "--dry-run", capsys=capsys)
    assert code == 2, "the table that cannot be opened fails the dry run too"
    assert dry["details"]["tables"]["db.broken"]["status"] == "failed"
    assert "snapshot-1" in dry["details"]["tables"]["db.broken"]["reason"]
    assert orphan.exists() and Table.open(warehouse, "db.events").snapshot_manager.latest_id() == 3

    code, record = run(config, capsys=capsys)
    tables = record["details"]["tables"]
    assert (
        code == 2 and tables["db.broken"]["exit_code"] == 2 and "snapshot-1" in tables["db.broken"]["reason"]
    )
    operations = ["expire-snapshots", "compact-manifests", "remove-orphan-files"]
    planned = [
        "create-tag",
        "expire-partitions",
        "mark-partition-done",
        "expire-tags",
        "expire-snapshots",
        "compact",
        "compact-manifests",
        "remove-orphan-files",
    ]  # the conditional defaults are planned, then skipped where the table's options do not ask
    assert record["details"]["plan"]["db.events"] == planned
    assert record["details"]["plan"]["db.plain"] == planned  # planned, then
    assert [op["operation"] for op in tables["db.plain"]["operations"]] == operations  # skipped: no option
    assert [op["operation"] for op in tables["db.events"]["operations"]] == ["expire-partitions", *operations]
    for table in ("db.events", "db.plain"):
        assert tables[table]["status"] == "done", tables[table]
        assert all(op["details"]["config_from"] == [BUILT_IN] for op in tables[table]["operations"])

    # db.events: the two old partitions expired, and snapshots down to the table's own retention (1)
    assert tables["db.events"]["partitions_expired"] == 2
    assert pypaimon_rows(warehouse, "db.events") == [{"id": 3, "dt": "2999-01-01", "v": "c"}]
    manager = Table.open(warehouse, "db.events").snapshot_manager
    assert manager.snapshot_ids() == [manager.latest_id()] and tables["db.events"]["snapshots_expired"] >= 3
    # db.plain: Paimon's default retention keeps its 2 snapshots; the old orphan is gone
    assert Table.open(warehouse, "db.plain").snapshot_manager.snapshot_ids() == [1, 2]
    assert not orphan.exists()
    assert sorted(r["id"] for r in pypaimon_rows(warehouse, "db.plain")) == [1, 2]


def test_nothing_enabled_at_all_is_exit_2_with_the_reason(spark_session, warehouse, tmp_path, capsys):
    config = tmp_path / "maintain.yaml"
    config.write_text(
        f"warehouse: {warehouse}\ntables: [db.plain]\n"
        "defaults:\n  expire_snapshots: {enabled: false}\n"
        "overrides:\n  - {match: db.plain, compact_manifests: {enabled: false}}\n"
    )
    code, record = run(config, capsys=capsys)
    assert code == 2 and record["status"] == "failed"
    assert "no operation is enabled for any of the 1 tables" in record["error"]
    assert Table.open(warehouse, "db.plain").snapshot_manager.snapshot_ids() == [1, 2]


def test_overrides_merge_over_the_built_in_defaults():
    config = validate(
        {
            "warehouse": "/w",
            "tables": ["db.*"],
            "overrides": [
                {"match": "db.audit", "remove_orphan_files": {"enabled": False}},
                {"match": "db.events", "expire_partitions": {"expiration_time": "30d"}},
            ],
        },
        MaintainConfig,
        "test",
    )
    plans = {plan.table: plan for plan in plan_tables(config, ["db.audit", "db.events"])}
    audit = plans["db.audit"].steps
    by_operation = {step.operation: step for step in audit}
    assert list(by_operation) == [
        "create-tag",
        "expire-partitions",
        "mark-partition-done",
        "expire-tags",
        "expire-snapshots",
        "compact",
        "compact-manifests",
    ]
    assert by_operation["expire-partitions"].only_if_options == ("partition.expiration-time",)
    assert by_operation["expire-partitions"].sources == (BUILT_IN,)
    assert by_operation["compact-manifests"].config.mode == "auto"
    assert by_operation["expire-snapshots"].only_if_options == ()
    assert by_operation["create-tag"].config.automatic is True
    assert by_operation["compact"].only_if_options == ("write-only",)
    events = {step.operation: step for step in plans["db.events"].steps}
    dropped = events["expire-partitions"]
    assert dropped.sources == (BUILT_IN, "overrides[1]") and dropped.only_if_options == ()
    assert dropped.config.expiration_time == "30d"
    events = plans["db.events"].steps
    assert events[-1].operation == "remove-orphan-files" and events[-1].config.older_than == "1d"


def test_only_tables_whose_options_ask_run_the_conditional_defaults():
    assert table_asks_for({"write-only": "true"}, ("write-only",))
    assert not table_asks_for({"write-only": "false"}, ("write-only",))
    assert not table_asks_for({}, ("write-only",))
    assert not table_asks_for({"tag.automatic-creation": "none"}, ("tag.automatic-creation",))
    assert table_asks_for({"tag.automatic-creation": "process-time"}, ("tag.automatic-creation",))
    both = ("tag.num-retained-max", "tag.default-time-retained")
    assert table_asks_for({"tag.default-time-retained": "7d"}, both)
    assert not table_asks_for({"tag.num-retained-min": "3"}, both)
