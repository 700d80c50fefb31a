"""mark-partition-done: Paimon's `_SUCCESS` file per partition, by spec or idle time (issue #30).

No Spark: the job runs on the driver. Oracles: the file's JSON as Paimon's SuccessFile writes it
(Jackson, `creationTime` and `modificationTime`), Java reading a Java-written table after marking.
"""

from __future__ import annotations

import json
import os

import pytest
import yaml

from jobs.__main__ import main
from jobs.mark_partition_done import MarkDoneRequest, mark_partition_done
from jobs.runtime.errors import BadInputError, CommitRaceLost
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.support.table_states import IDENTIFIER, build_sample_table, fingerprint, open_table

DAY_MS = 86_400_000


def success(table: Table, dt: str) -> dict | None:
    path = os.path.join(table.path, f"dt={dt}", "_SUCCESS")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture
def warehouse(tmp_path) -> str:
    warehouse = str(tmp_path / "wh")
    build_sample_table(warehouse, commits=2)  # partitions dt=2024-01-0{1,2,3}
    return warehouse


def test_success_file_is_written_as_paimon_and_a_rerun_keeps_its_creation_time(warehouse):
    table = open_table(warehouse)
    request = MarkDoneRequest(specs=({"dt": "2024-01-02"},))
    mark_partition_done(table, request, now_ms=1000)
    path = os.path.join(table.path, "dt=2024-01-02", "_SUCCESS")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    assert text == '{\n  "creationTime" : 1000,\n  "modificationTime" : 1000\n}'  # Jackson's pretty printer
    assert success(table, "2024-01-01") is None and success(table, "2024-01-03") is None

    record = mark_partition_done(table, request, now_ms=5000)
    assert success(table, "2024-01-02") == {"creationTime": 1000, "modificationTime": 5000}
    assert record.counts["success_files_created"] == 0 and record.counts["success_files_written"] == 1


def test_idle_time_marks_only_partitions_idle_long_enough(warehouse):
    table = open_table(warehouse)
    now = int(__import__("time").time() * 1000)
    assert (
        mark_partition_done(table, MarkDoneRequest(idle_time_to_done="1d"), now_ms=now).counts[
            "partitions_to_mark"
        ]
        == 0
    )
    record = mark_partition_done(table, MarkDoneRequest(idle_time_to_done="1d"), now_ms=now + 2 * DAY_MS)
    assert record.counts["partitions_to_mark"] == 3
    assert all(success(table, f"2024-01-0{day}") for day in (1, 2, 3))


def test_dry_run_writes_nothing_and_metastore_actions_and_unknown_partitions_exit_2(
    warehouse, tmp_path, capsys
):
    before = fingerprint(warehouse)

    def cli(keys: dict, *flags: str) -> int:
        config = tmp_path / "mark.yaml"
        config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, **keys}))
        return main(["mark-partition-done", "--config", str(config), *flags])

    assert cli({"partitions": [{"dt": "2024-01-01"}]}, "--dry-run") == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["counts"]["partitions_to_mark"] == 1 and dry["samples"]["partitions_to_mark"] == [
        "dt=2024-01-01"
    ]
    assert cli({"partitions": [{"dt": "2024-01-01"}], "actions": ["done-partition"]}) == 2
    assert "done-partition" in capsys.readouterr().err
    assert cli({"partitions": [{"dt": "2024-01-01"}], "actions": ["mark-event"]}) == 2
    assert "mark-event" in capsys.readouterr().err
    assert cli({"partitions": [{"dt": "2099-01-01"}]}) == 2
    assert "2099-01-01" in capsys.readouterr().err
    assert cli({"partitions": [{"hr": "1"}]}) == 2
    assert cli({}) == 2  # neither partitions nor an idle time (the table has no partition.idle-time-to-done)
    capsys.readouterr()
    assert fingerprint(warehouse) == before
    assert cli({"partitions": [{"dt": "2024-01-01"}]}) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["success_files_created"] == 1


def test_the_table_option_names_the_action(warehouse):
    table = open_table(warehouse)
    object.__setattr__(
        table.schema, "options", {**table.schema.options, "partition.mark-done-action": "mark-event"}
    )
    with pytest.raises(BadInputError, match="mark-event"):
        mark_partition_done(table, MarkDoneRequest(specs=({"dt": "2024-01-01"},)))
    assert success(table, "2024-01-01") is None


def test_a_partition_dropped_meanwhile_is_exit_3_and_its_new_file_goes(warehouse, monkeypatch):
    import jobs.mark_partition_done as module

    table = open_table(warehouse)
    # the rival: after the files are written, the latest snapshot is another one, without dt=2024-01-01
    calls = {"n": 0}
    real = module._live_partitions

    def live_then_dropped(table_: Table, record=None):
        calls["n"] += 1
        found = real(table_, record)
        if calls["n"] > 1:
            found.pop(next(p for p in found if table_.partition_dir(p) == "dt=2024-01-01"))
        return found

    monkeypatch.setattr(module, "_live_partitions", live_then_dropped)
    monkeypatch.setattr(table.snapshot_manager, "latest_id", lambda: -1)  # another snapshot landed
    with pytest.raises(CommitRaceLost, match="dt=2024-01-01"):
        mark_partition_done(table, MarkDoneRequest(specs=({"dt": "2024-01-01"}, {"dt": "2024-01-02"})))
    assert success(table, "2024-01-01") is None and success(table, "2024-01-02") is not None


@pytest.mark.java
def test_java_reads_a_java_written_table_after_marking(java_paimon, tmp_path):
    path = str(tmp_path / "wh" / "db.db" / "t")
    java_paimon.create_table(path, [("dt", "STRING NOT NULL"), ("k", "BIGINT NOT NULL")], ["dt"])
    rows = [{"dt": "a", "k": 1}, {"dt": "b", "k": 2}]
    java_paimon.write(path, rows)
    table = Table(FileIO.for_path(path), path)
    record = mark_partition_done(table, MarkDoneRequest(specs=({"dt": "a"},)))
    assert record.counts["success_files_created"] == 1
    assert os.path.exists(os.path.join(path, "dt=a", "_SUCCESS"))
    assert java_paimon.read(path) == sorted(rows, key=lambda row: [str(row[k]) for k in sorted(row)])


@pytest.mark.java
def test_java_reads_our_success_files_and_we_keep_the_creation_time_of_javas(java_paimon, tmp_path):
    """Differential with Paimon's SuccessFileMarkDoneAction: Java marks dt=b, we mark dt=a and dt=b;
    Paimon's SuccessFile reads ours, dt=b keeps Java's creation time, and both files have one layout."""
    path = str(tmp_path / "wh" / "db.db" / "t")
    java_paimon.create_table(path, [("dt", "STRING NOT NULL"), ("k", "BIGINT NOT NULL")], ["dt"])
    java_paimon.write(path, [{"dt": "a", "k": 1}, {"dt": "b", "k": 2}, {"dt": "c", "k": 3}])
    javas = java_paimon.mark_partition_done(path, partitions=["dt=b"], read=["dt=b"])["dt=b"]
    with open(os.path.join(path, "dt=b", "_SUCCESS"), encoding="utf-8") as handle:
        java_text = handle.read()
    table = Table(FileIO.for_path(path), path)
    now = javas["creationTime"] + 60_000
    mark_partition_done(table, MarkDoneRequest(specs=({"dt": "a"}, {"dt": "b"})), now_ms=now)
    read = java_paimon.mark_partition_done(path, read=["dt=a", "dt=b", "dt=c"])
    assert read == {
        "dt=a": {"creationTime": now, "modificationTime": now},
        "dt=b": {"creationTime": javas["creationTime"], "modificationTime": now},
        "dt=c": None,
    }
    with open(os.path.join(path, "dt=a", "_SUCCESS"), encoding="utf-8") as handle:
        ours = handle.read()
    assert ours == java_text.replace(str(javas["creationTime"]), str(now)).replace(
        str(javas["modificationTime"]), str(now)
    )


def test_maintain_marks_the_partitions_idle_for_the_tables_option(warehouse, tmp_path, capsys):
    import dataclasses

    from jobs.runtime.maintain_config import BUILT_IN_DEFAULTS

    assert any(d.key == "mark_partition_done" for d in BUILT_IN_DEFAULTS)  # tables asking get it by default
    table = open_table(warehouse)
    altered = dataclasses.replace(
        table.schema,
        id=table.schema.id + 1,
        options={**table.schema.options, "partition.idle-time-to-done": "1 ms"},
    )
    assert table.schema_manager.commit_new_schema(altered)
    config = tmp_path / "maintain.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "warehouse": warehouse,
                "tables": [IDENTIFIER],
                "defaults": {"mark_partition_done": {}},
                "lock": {"enabled": False},
            }
        )
    )
    assert main(["maintain", "--config", str(config)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert all(success(table, f"2024-01-0{day}") for day in (1, 2, 3))
