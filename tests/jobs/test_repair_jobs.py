"""purge-files (and the repair jobs of issue #30) on our tables and Java-written ones.

No Spark: purge-files runs on the driver. Oracles: the files left on disk (only the schema), Java
and our reader reading the purged table as empty, and a writer's snapshot surviving a racing purge.
"""

from __future__ import annotations

import json
import os

import pytest
import yaml

import jobs.purge_files as purge_module
from jobs.__main__ import main
from jobs.purge_files import purge_files
from jobs.runtime.errors import CommitRaceLost
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.helpers import our_read
from tests.support.table_states import (
    IDENTIFIER,
    append_rows,
    batch,
    branch_from_t2,
    build_sample_table,
    fingerprint,
    open_table,
)


def files_under(root: str) -> set[str]:
    return {
        os.path.relpath(os.path.join(directory, name), root)
        for directory, _, names in os.walk(root)
        for name in names
    }


@pytest.fixture
def warehouse(tmp_path) -> str:
    warehouse = str(tmp_path / "wh")
    branch_from_t2(build_sample_table(warehouse, commits=3))  # main, tag t2, branch b with its own files
    return warehouse


def cli(tmp_path, warehouse: str, keys: dict, *flags: str) -> int:
    config = tmp_path / "purge.yaml"
    config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, **keys}))
    return main(["purge-files", "--config", str(config), *flags])


def test_without_confirm_nothing_goes_and_a_dry_run_lists_what_would(warehouse, tmp_path, capsys):
    before = fingerprint(warehouse)
    assert cli(tmp_path, warehouse, {}) == 2
    assert "confirm: true" in capsys.readouterr().err
    assert cli(tmp_path, warehouse, {}, "--dry-run") == 0
    dry = json.loads(capsys.readouterr().out)
    assert fingerprint(warehouse) == before
    root = open_table(warehouse).path
    everything = files_under(root)
    listed = dry["counts"]["metadata_files_to_delete"] + dry["counts"]["files_to_delete"]
    assert listed == len({p for p in everything if not p.startswith("schema/")})
    assert dry["details"]["branches"] == ["b"]


def test_purge_leaves_only_the_schema_and_the_table_reads_empty(warehouse, tmp_path, capsys):
    table = open_table(warehouse)
    schemas = {p for p in files_under(table.path) if p.startswith("schema/")}
    assert cli(tmp_path, warehouse, {"confirm": True}) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["counts"]["files_deleted"] > 0
    assert files_under(table.path) == schemas
    table = open_table(warehouse)
    assert table.snapshot_manager.latest_id() is None
    assert table.branch_manager.branch_names() == [] and table.tag_manager.tag_names() == []
    assert cli(tmp_path, warehouse, {"confirm": True}) == 0  # a rerun: nothing left to delete
    assert json.loads(capsys.readouterr().out)["counts"]["files_to_delete"] == 0
    append_rows(table, batch(100, 3))  # the kept schema still takes writes
    assert sorted(row["id"] for row in our_read(table.path, ("snapshot", "1"))) == [100, 101, 102]


def test_a_writer_committing_meanwhile_is_exit_3_and_keeps_its_files(warehouse, monkeypatch):
    table = open_table(warehouse)
    real = purge_module._refuse_new_snapshots

    def commit_then_check(table_: Table) -> None:  # the rival commits right after the metadata went
        append_rows(open_table(warehouse), batch(500, 3))
        real(table_)

    monkeypatch.setattr(purge_module, "_refuse_new_snapshots", commit_then_check)
    with pytest.raises(CommitRaceLost, match="committed while the table was purged"):
        purge_files(table)
    latest = open_table(warehouse).snapshot_manager.latest_id()
    # no manifest or data file went, so the writer's snapshot reads everything it names
    rows = our_read(table.path, ("snapshot", str(latest)))
    assert {500, 501, 502} <= {row["id"] for row in rows}


@pytest.mark.java
def test_java_reads_a_purged_java_table_as_empty(java_paimon, tmp_path):
    path = str(tmp_path / "wh" / "db.db" / "t")
    java_paimon.create_table(path, [("dt", "STRING NOT NULL"), ("k", "BIGINT NOT NULL")], ["dt"])
    java_paimon.write(path, [{"dt": "a", "k": 1}, {"dt": "b", "k": 2}])
    java_paimon.write(path, [{"dt": "a", "k": 3}])
    java_paimon.create_tag(path, "t1", 1)
    purge_files(Table(FileIO.for_path(path), path))
    assert {p.split("/")[0] for p in files_under(path)} == {"schema"}
    assert java_paimon.read(path) == []
    java_paimon.write(path, [{"dt": "c", "k": 9}])
    assert java_paimon.read(path) == [{"dt": "c", "k": 9}]
