"""expire-partitions on local Spark: values-time and update-time, caps, batches, bad settings."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from jobs.__main__ import main
from jobs.expire_partitions import ExpirePartitionsRequest, expire_partitions
from jobs.write import write_dataframe
from jobs.writing.settings import WriteSettings
from paimon_format.commit import SnapshotCommit
from paimon_format.scan.snapshot_scan import data_manifests, live_entries
from paimon_format.table import Table
from tests.support.factories import data_file, make_table, message
from tests.support.partition_tables import days_ago, live_partitions, metadata_table
from tests.support.pypaimon_reads import pypaimon_rows

pytest.importorskip("pypaimon")


def unreferenced_manifests(table: Table) -> set[str]:
    """Manifest files on disk that no snapshot's manifest lists name (a plan that was left behind)."""
    named = set()
    for snapshot_id in table.snapshot_manager.snapshot_ids():
        snapshot = table.snapshot_manager.snapshot(snapshot_id)
        named |= {meta.file_name for meta in data_manifests(table, snapshot)}
    on_disk = {
        name
        for name in os.listdir(os.path.join(table.path, "manifest"))
        if name.startswith("manifest-") and not name.startswith("manifest-list-")
    }
    return on_disk - named


def test_values_time_drops_old_partitions_and_older_snapshots_keep_them(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    dates = [days_ago(40), days_ago(31), days_ago(29), days_ago(0)]
    rows = [(i, d, f"v{i}") for i, d in enumerate(dates)]
    write_dataframe(
        spark_session.createDataFrame(rows, "id long, dt string, v string"),
        WriteSettings(warehouse, "db.t", partition_keys=["dt"]),
    )
    table = Table.open(warehouse, "db.t")
    before_id = table.snapshot_manager.latest_id()
    before = pypaimon_rows(warehouse, "db.t")

    record = expire_partitions(
        spark_session,
        table,
        ExpirePartitionsRequest(
            expiration_time="30 d", strategy="values-time", timestamp_formatter="yyyy-MM-dd"
        ),
    )

    assert pypaimon_rows(warehouse, "db.t") == [r for r in before if r["dt"] not in dates[:2]]
    assert pypaimon_rows(warehouse, "db.t", before_id) == before
    assert record.counts["partitions"] == 2 and record.counts["commits"] == 1
    assert table.snapshot_manager.latest().commit_kind == "OVERWRITE"


@pytest.mark.parametrize(
    "columns, keys, make_values, pattern, formatter",
    [
        (
            (("id", "BIGINT"), ("year", "STRING"), ("month", "STRING"), ("day", "STRING")),
            ("year", "month", "day"),
            lambda d: tuple(d.strftime("%Y-%m-%d").split("-")),
            "$year-$month-$day",
            None,
        ),
        (
            (("id", "BIGINT"), ("dt", "STRING"), ("hr", "INT")),
            ("dt", "hr"),
            lambda d: (d.strftime("%Y%m%d"), d.hour),
            "$dt $hr:00:00",
            "yyyyMMdd H:mm:ss",
        ),
        ((("id", "BIGINT"), ("day", "DATE")), ("day",), lambda d: (d.date(),), None, None),
        (
            (("id", "BIGINT"), ("dt", "INT")),
            ("dt",),
            lambda d: (int(d.strftime("%Y%m%d")),),
            None,
            "yyyyMMdd",
        ),
    ],
    ids=["year-month-day", "dt-and-hour", "date-column", "integer-yyyyMMdd"],
)
def test_values_time_with_patterns_and_formatters(
    spark_session, tmp_path, columns, keys, make_values, pattern, formatter
):
    now = dt.datetime(2024, 6, 15, 12, 0)
    moments = [now - dt.timedelta(days=d, hours=h) for d, h in [(10, 0), (3, 1), (2, 13), (0, 2)]]
    partitions = [make_values(m) for m in moments]
    table = metadata_table(tmp_path, partitions, columns=columns, keys=keys)

    request = ExpirePartitionsRequest(
        expiration_time="3 d",
        strategy="values-time",
        timestamp_formatter=formatter,
        timestamp_pattern=pattern,
    )
    expire_partitions(spark_session, table, request, now=now)

    cutoff = now - dt.timedelta(days=3)
    hourly = pattern is not None and "$hr" in pattern
    kept = {
        p
        for p, m in zip(partitions, moments, strict=True)
        if (m.replace(minute=0) if hourly else m.replace(hour=0, minute=0)) >= cutoff
    }
    assert live_partitions(table) == kept
    assert len(kept) < len(partitions)


def test_update_time_uses_the_newest_file_creation_time(spark_session, tmp_path):
    now = dt.datetime.now()
    created = {("old",): now - dt.timedelta(days=5), ("fresh",): now - dt.timedelta(hours=1)}
    table = metadata_table(tmp_path, [("old",), ("fresh",), ("mixed",)], created=created)
    newer = data_file("data-new-in-mixed.parquet")
    newer.creation_time = now - dt.timedelta(hours=2)  # "mixed" also holds a file from 2024-01-01
    SnapshotCommit(table).append([message(table, ["mixed"], newer)])
    newest: dict[tuple, dt.datetime] = {}
    for entry in live_entries(table, table.snapshot_manager.latest()):
        key = tuple(table.partition_values(entry.partition))
        newest[key] = max(newest.get(key, entry.file.creation_time), entry.file.creation_time)

    expire_partitions(
        spark_session, table, ExpirePartitionsRequest(expiration_time="1 d", strategy="update-time"), now=now
    )

    assert live_partitions(table) == {p for p, t in newest.items() if t >= now - dt.timedelta(days=1)}
    assert live_partitions(table) == {("fresh",), ("mixed",)}


def test_max_expires_and_batches_several_commits_in_value_order(spark_session, tmp_path):
    now = dt.datetime(2024, 6, 15)
    dates = [f"2024-05-0{d}" for d in (5, 1, 4, 2, 3)] + ["2024-06-14"]
    table = metadata_table(tmp_path, [(d,) for d in dates])
    before_id = table.snapshot_manager.latest_id()

    request = ExpirePartitionsRequest(
        expiration_time="1 d", strategy="values-time", max_expires=4, batch_size=3
    )
    record = expire_partitions(spark_session, table, request, now=now)

    assert live_partitions(table) == {("2024-05-05",), ("2024-06-14",)}
    assert table.snapshot_manager.latest_id() == before_id + 2
    assert record.counts["commits"] == 2 and record.counts["partitions_expired_total"] == 5
    assert [p["partition"]["dt"] for p in record.details["partitions"]] == sorted(dates[:5])[:4]
    assert unreferenced_manifests(table) == set(), "DELETEs written for all 5 expired are removed"


def test_one_commit_of_every_partition_expired_by_value_leaves_no_manifest_behind(spark_session, tmp_path):
    now = dt.datetime(2024, 6, 15)
    dates = ["2024-05-01", "2024-05-02", "2024-06-14"]
    table = metadata_table(tmp_path, [(d,) for d in dates])
    before_id = table.snapshot_manager.latest_id()

    record = expire_partitions(
        spark_session, table, ExpirePartitionsRequest(expiration_time="1 d", strategy="values-time"), now=now
    )

    assert live_partitions(table) == {("2024-06-14",)}
    assert table.snapshot_manager.latest_id() == before_id + 1 and record.counts["commits"] == 1
    assert unreferenced_manifests(table) == set()


def test_null_and_unreadable_values_never_expire_by_value(spark_session, tmp_path):
    now = dt.datetime(2024, 6, 15)
    table = metadata_table(tmp_path, [(None,), ("not-a-date",), ("2024-01-01",)])

    record = expire_partitions(
        spark_session, table, ExpirePartitionsRequest(expiration_time="1 d", strategy="values-time"), now=now
    )

    assert live_partitions(table) == {(None,), ("not-a-date",)}
    assert record.counts["partitions_without_time"] == 2
    assert {"dt": "__DEFAULT_PARTITION__"} in record.details["partitions_without_time"]


def test_dry_run_from_table_options_reports_and_changes_nothing(spark_session, tmp_path, capsys):
    table = make_table(
        str(tmp_path / "wh" / "db.db" / "t"),
        options={"partition.expiration-time": "7 d", "partition.timestamp-formatter": "yyyyMMdd"},
    )
    SnapshotCommit(table).append(
        [message(table, [days_ago(30, "%Y%m%d")], data_file("data-a.parquet", size=123))]
        + [message(table, [days_ago(0, "%Y%m%d")], data_file("data-b.parquet"))]
    )
    config = tmp_path / "c.yaml"
    config.write_text(f"warehouse: {tmp_path / 'wh'}\ntable: db.t\n")

    assert main(["expire-partitions", "--config", str(config), "--dry-run"]) == 0

    record = json.loads(capsys.readouterr().out)
    assert record["dry_run"] and record["counts"]["partitions"] == 1 and record["bytes"]["files"] == 123
    assert record["details"]["partitions"][0]["partition"] == {"dt": days_ago(30, "%Y%m%d")}
    assert table.snapshot_manager.latest_id() == 1


@pytest.mark.parametrize(
    "keys, message",
    [
        ("expiration_time: 1d\ntimestamp_formatter: yyyy-QQ", "pattern letter 'Q'"),
        ("expiration_time: soon", "expiration_time"),
        ("strategy: values-time", "no expiration time"),
        ("expiration_time: 1d\ntimestamp_pattern: $nope", "not a partition column"),
    ],
)
def test_bad_settings_exit_2(spark_session, tmp_path, capsys, keys, message):
    table = make_table(str(tmp_path / "wh" / "db.db" / "t"))
    SnapshotCommit(table).append([message_for(table)])
    config = tmp_path / "c.yaml"
    config.write_text(f"warehouse: {tmp_path / 'wh'}\ntable: db.t\n{keys}\n")

    assert main(["expire-partitions", "--config", str(config)]) == 2

    assert message in json.loads(capsys.readouterr().out)["error"]
    assert table.snapshot_manager.latest_id() == 1


def message_for(table: Table):
    return message(table, ["2020-01-01"], data_file("data-x.parquet"))
