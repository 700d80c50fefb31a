"""purge-files (and the repair jobs of issue #30) on our tables and Java-written ones.

No Spark: purge-files runs on the driver. Oracles: the files left on disk (only the schema), Java
and our reader reading the purged table as empty, and a writer's snapshot surviving a racing purge.
"""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest
import yaml

import jobs.purge_files as purge_module
from jobs.__main__ import main
from jobs.purge_files import purge_files
from jobs.runtime.errors import CommitRaceLost
from paimon_format.commit import SnapshotCommit
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


# -- remove-unexisting-manifests -------------------------------------------------------------------


def lose_manifest(table: Table, index: int = -1) -> tuple[str, set[int]]:
    """Delete one data manifest of the latest snapshot (by position); its name and the ids of the
    rows of the files it added."""
    from paimon_format.manifest.codec import decode_manifest
    from paimon_format.scan.snapshot_scan import data_manifests

    meta = data_manifests(table, table.snapshot_manager.latest())[index]
    path = table.manifest_path(meta.file_name)
    ids: set[int] = set()
    for entry in decode_manifest(table.file_io.read_bytes(path), path):
        ids |= set(pq.ParquetFile(table.data_file_path(entry)).read(columns=["id"]).column("id").to_pylist())
    table.file_io.delete(path)
    return meta.file_name, ids


def test_a_lost_manifest_leaves_the_latest_state_by_one_commit(tmp_path, capsys):
    warehouse = str(tmp_path / "wh")
    table = build_sample_table(warehouse, commits=4)
    before = {row["id"] for row in our_read(table.path, ("snapshot", "4"))}
    name, lost = lose_manifest(table)
    assert lost and lost <= before
    config = tmp_path / "manifests.yaml"
    config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, "max_missing_ratio": 0.5}))
    untouched = fingerprint(warehouse)
    assert main(["remove-unexisting-manifests", "--config", str(config), "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["counts"]["missing_manifests"] == 1 and dry["samples"]["missing_manifests"] == [name]
    assert fingerprint(warehouse) == untouched
    assert main(["remove-unexisting-manifests", "--config", str(config)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["snapshot_ids"]["committed"] == 5
    assert {row["id"] for row in our_read(table.path, ("snapshot", "5"))} == before - lost
    # the total counts the rows left, not those of the lost manifest's files (as the dry run said)
    assert open_table(warehouse).snapshot_manager.snapshot(5).total_record_count == len(before - lost)
    assert dry["details"]["total_record_count"] == {"before": len(before), "after": len(before - lost)}
    assert main(["remove-unexisting-manifests", "--config", str(config)]) == 0  # rerun: nothing missing
    assert json.loads(capsys.readouterr().out)["counts"]["missing_manifests"] == 0


def test_too_many_lost_manifests_is_exit_3_and_a_racing_writer_is_exit_3(tmp_path):
    from jobs.remove_unexisting_manifests import remove_unexisting_manifests
    from jobs.runtime.errors import SafetyRefusal
    from paimon_format.errors import CommitConflictError

    table = build_sample_table(str(tmp_path / "wh"), commits=4)
    lose_manifest(table)
    with pytest.raises(SafetyRefusal, match="max_missing_ratio"):
        remove_unexisting_manifests(table, max_missing_ratio=0.0)
    assert table.snapshot_manager.latest_id() == 4

    real = SnapshotCommit.commit

    def rival_first(self, *args, **kwargs):  # a writer commits between planning and the commit
        patch.setattr(SnapshotCommit, "commit", real)
        append_rows(open_table(str(tmp_path / "wh")), batch(900, 3))
        return real(self, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SnapshotCommit, "commit", rival_first)
        with pytest.raises(CommitConflictError, match="another writer committed"):
            remove_unexisting_manifests(table, max_missing_ratio=1.0)
    assert table.snapshot_manager.latest_id() == 5  # the rival's, nothing of ours


@pytest.mark.java
def test_java_reads_its_table_after_a_lost_manifest_is_removed(java_paimon, tmp_path):
    from jobs.remove_unexisting_manifests import remove_unexisting_manifests

    path = str(tmp_path / "wh" / "db.db" / "t")
    java_paimon.create_table(path, [("dt", "STRING NOT NULL"), ("id", "BIGINT NOT NULL")], ["dt"])
    java_paimon.write(path, [{"dt": "a", "id": 1}, {"dt": "b", "id": 2}])
    java_paimon.write(path, [{"dt": "a", "id": 3}])
    java_paimon.write(path, [{"dt": "b", "id": 4}])
    table = Table(FileIO.for_path(path), path)
    _name, lost = lose_manifest(table)
    assert lost == {4}
    record = remove_unexisting_manifests(table, max_missing_ratio=0.5)
    assert record.counts["manifests_removed"] == 1
    assert java_paimon.read(path) == [{"dt": "a", "id": 1}, {"dt": "a", "id": 3}, {"dt": "b", "id": 2}]


@pytest.mark.parametrize("fault", ["write:1:halt", "write:2:halt", "create:1:halt", "write:3:halt"])
def test_a_crash_anywhere_in_the_commit_then_a_rerun_repairs(tmp_path, fault):
    from jobs.remove_unexisting_manifests import remove_unexisting_manifests
    from paimon_format.storage import faults

    warehouse = str(tmp_path / "wh")
    table = build_sample_table(warehouse, commits=3)
    before = {row["id"] for row in our_read(table.path, ("snapshot", "3"))}
    _name, lost = lose_manifest(table)
    with faults.injected(fault) as plan:
        try:
            remove_unexisting_manifests(open_table(warehouse), max_missing_ratio=0.5)
        except faults.SimulatedCrash:
            pass
        crashed = bool(faults.hits(plan))
    assert crashed, f"{fault}: the fault never hit"
    record = remove_unexisting_manifests(open_table(warehouse), max_missing_ratio=0.5)
    latest = open_table(warehouse).snapshot_manager.latest_id()
    assert latest == 4 and record.counts["missing_manifests"] in (0, 1)
    assert {row["id"] for row in our_read(table.path, ("snapshot", "4"))} == before - lost


def test_a_kept_manifest_deleting_a_lost_file_is_rewritten_without_that_delete(tmp_path):
    """Snapshot 4 overwrites dt=2024-01-01: its delta deletes the files there that manifests 1-3
    added. With manifest 1 lost, that DELETE would have no ADD (our reader refuses such a snapshot,
    Java's next overwrite there fails): the delta manifest is rewritten without it."""
    from jobs.remove_unexisting_manifests import remove_unexisting_manifests
    from paimon_format.commit import CommitMessage
    from paimon_format.data.writer import write_table_files
    from paimon_format.model.binary_row import deserialize_row

    warehouse = str(tmp_path / "wh")
    table = build_sample_table(warehouse, commits=3)
    written = write_table_files(table.file_io, table.path, table.schema, batch(700, 2, days=1), 9000)
    SnapshotCommit(table).overwrite(
        [CommitMessage(partition, bucket, -1, files) for partition, bucket, files in written],
        partition_filter=lambda p: deserialize_row(p, table.partition_types) == ["2024-01-01"],
    )
    before = {row["id"] for row in our_read(table.path, ("snapshot", "4"))}
    _name, lost = lose_manifest(table, 0)
    assert lost - before  # the lost manifest added files that snapshot 4 deleted
    record = remove_unexisting_manifests(open_table(warehouse), max_missing_ratio=0.5)
    rows = our_read(table.path, ("snapshot", "5"))
    assert {row["id"] for row in rows} == before - lost
    assert record.counts["dangling_deletes_dropped"] == 1 and record.counts["manifests_rewritten"] == 1
    assert open_table(warehouse).snapshot_manager.snapshot(5).total_record_count == len(rows)
    # and the table takes the next overwrite of that partition (its conflict check merges the base)
    again = write_table_files(table.file_io, table.path, table.schema, batch(800, 2, days=1), 9100)
    SnapshotCommit(open_table(warehouse)).overwrite(
        [CommitMessage(partition, bucket, -1, files) for partition, bucket, files in again],
        partition_filter=lambda p: deserialize_row(p, table.partition_types) == ["2024-01-01"],
    )


def test_a_lost_manifest_that_deleted_files_is_refused_unless_reviving_them_is_accepted(tmp_path):
    """Snapshot 4 overwrites dt=2024-01-01 and its delta manifest is lost: the files it deleted would
    be read again beside nothing that replaced them, so the repair refuses (exit 2, nothing
    committed) until `revive_deleted_files` accepts it."""
    from jobs.remove_unexisting_manifests import remove_unexisting_manifests
    from jobs.runtime.errors import BadInputError
    from paimon_format.commit import CommitMessage
    from paimon_format.data.writer import write_table_files
    from paimon_format.model.binary_row import deserialize_row

    warehouse = str(tmp_path / "wh")
    table = build_sample_table(warehouse, commits=3)
    written = write_table_files(table.file_io, table.path, table.schema, batch(700, 2, days=1), 9000)
    SnapshotCommit(table).overwrite(
        [CommitMessage(partition, bucket, -1, files) for partition, bucket, files in written],
        partition_filter=lambda p: deserialize_row(p, table.partition_types) == ["2024-01-01"],
    )
    lose_manifest(table, -1)  # snapshot 4's delta: the overwrite's DELETEs and ADDs
    with pytest.raises(BadInputError, match=r"deleted \d+ data files.*revive_deleted_files"):
        remove_unexisting_manifests(open_table(warehouse), max_missing_ratio=0.5)
    with pytest.raises(BadInputError, match="revive_deleted_files"):
        remove_unexisting_manifests(open_table(warehouse), max_missing_ratio=0.5, dry_run=True)
    assert open_table(warehouse).snapshot_manager.latest_id() == 4
    record = remove_unexisting_manifests(
        open_table(warehouse), max_missing_ratio=0.5, revive_deleted_files=True
    )
    assert record.snapshot_ids["committed"] == 5 and record.counts["deleted_entries_lost"] > 0
