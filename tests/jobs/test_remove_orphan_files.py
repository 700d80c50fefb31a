"""remove-orphan-files on local Spark: planted orphans go, every snapshot, tag and branch keeps its files.

Every test ages the whole table first (all files two days old), so it is the referenced set, the name
rules and the listing order that protect files, not the age filter (except where that is the point).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.__main__ import main
from jobs.deletion.listing import list_table_files
from jobs.deletion.referenced import DRIVER_ROOTS, referenced_paths
from jobs.remove_orphan_files import OrphanSettings, remove_orphan_files
from jobs.runtime.errors import SafetyRefusal, exit_code_for
from paimon_format.errors import StorageError
from paimon_format.maintenance.orphan_rules import FileNaming
from paimon_format.maintenance.references import referenced_files, snapshot_sources
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.interop import oracle
from tests.support.planted_files import age_tree, files_on_disk, plant, plant_orphans, uid

pypaimon = pytest.importorskip("pypaimon")

DAY_MS = 86_400_000


def write_rows(spark, warehouse: str, rows: list[tuple], mode: str = "append") -> None:
    from jobs.write import write_dataframe
    from jobs.writing.settings import WriteSettings

    write_dataframe(
        spark.createDataFrame(rows, "id long, dt string, v string"),
        WriteSettings(warehouse, "db.t", mode=mode, partition_keys=["dt"]),
    )


def table_with_history(spark, warehouse: str) -> Table:
    """4 snapshots (the last an overwrite of dt=a), tag t2 at snapshot 2, branch b from snapshot 1;
    snapshots 1 and 2 then removed from main as an expiry would, so only the tag and the branch
    still need their files."""
    write_rows(spark, warehouse, [(1, "a", "x"), (2, "b", "x")])
    write_rows(spark, warehouse, [(3, "a", "y"), (4, "c", "y")])
    write_rows(spark, warehouse, [(5, "b", "z")])
    write_rows(spark, warehouse, [(6, "a", "new")], mode="overwrite")
    table = Table.open(warehouse, "db.t")
    manager = table.snapshot_manager
    table.tag_manager.create_tag("t2", manager.snapshot(2))
    branch_root = Path(table.path) / "branch" / "branch-b"
    (branch_root / "schema").mkdir(parents=True)
    (branch_root / "snapshot").mkdir()
    shutil.copy(Path(table.path) / "schema" / "schema-0", branch_root / "schema" / "schema-0")
    shutil.copy(Path(table.path) / "snapshot" / "snapshot-1", branch_root / "snapshot" / "snapshot-1")
    os.remove(Path(table.path) / "snapshot" / "snapshot-1")
    os.remove(Path(table.path) / "snapshot" / "snapshot-2")
    manager.write_earliest_hint(3)
    assert table.branch_manager.branch_names() == ["b"]
    return table


@pytest.fixture(scope="module")
def history(spark_session, tmp_path_factory) -> str:
    """A warehouse with `table_with_history`'s table, written on Spark once for the module; a test
    that changes it works on a copy."""
    warehouse = str(tmp_path_factory.mktemp("orphan-history") / "wh")
    table_with_history(spark_session, warehouse)
    return warehouse


def readings(warehouse: str) -> dict[str, list]:
    """What pypaimon reads at every snapshot and tag of main."""
    out = {f"snapshot {i}": oracle.read_rows(warehouse, "db.t", snapshot_id=i) for i in (3, 4)}
    out["tag t2"] = oracle.read_rows(warehouse, "db.t", tag="t2")
    out["latest"] = oracle.read_rows(warehouse, "db.t")
    return out


def every_live_file(table: Table) -> set[str]:
    """Data files every snapshot, tag and branch snapshot reads (our own scan)."""
    return {
        path
        for source in snapshot_sources(table)
        for entry in live_entries(source.table, source.snapshot)
        for path in table.entry_relpaths(entry)
    }


def test_planted_orphans_go_and_every_snapshot_tag_and_branch_keeps_its_files(
    spark_session, history, tmp_path
):
    warehouse = shutil.copytree(history, str(tmp_path / "wh"))
    table = Table.open(warehouse, "db.t")
    age_tree(table.path)
    orphans, keep = plant_orphans(table.path)
    before = readings(warehouse)
    needed = referenced_files(table) | every_live_file(table)
    hints = {"snapshot/EARLIEST", "snapshot/LATEST"} & files_on_disk(table.path)
    assert orphans.isdisjoint(needed)

    record = remove_orphan_files(spark_session, table, OrphanSettings(max_orphan_ratio=0.9))

    remaining = files_on_disk(table.path)
    assert remaining.isdisjoint(orphans), sorted(orphans & remaining)
    assert needed | keep | hints <= remaining, sorted((needed | keep | hints) - remaining)
    assert readings(warehouse) == before
    assert record.counts["files_deleted"] == record.counts["orphan_files"] == len(orphans)
    assert record.counts["too_young_files"] == 1
    assert record.counts["foreign_files"] >= 6
    assert record.details["orphans_by_kind"]["temp"] == 3


def test_distributed_referenced_set_equals_the_single_process_scan(
    spark_session, history, tmp_path, monkeypatch
):
    """Both ways of reading the roots (on the driver when few, on the executors when many) give the
    set the single-process scan gives."""
    warehouse = str(tmp_path / "wh")
    tables = oracle.create_sample_tables(warehouse)
    ours = Table.open(history, "db.t")  # only read
    for driver_roots in (DRIVER_ROOTS, 0):
        monkeypatch.setattr("jobs.deletion.referenced.DRIVER_ROOTS", driver_roots)
        for table in [Table.open(warehouse, info.identifier) for info in tables.values()] + [ours]:
            found = referenced_paths(spark_session, table)
            paths = {row["path"] for row in found.paths.select("path").distinct().collect()}
            assert paths == referenced_files(table), (table.path, driver_roots)
            assert found.manifests > 0 and found.roots > 0, table.path


def test_pypaimon_tables_keep_every_file_including_dynamic_bucket_index_files(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    tables = oracle.create_sample_tables(warehouse)
    age_tree(warehouse)
    # One of each layout (the referenced-set equality test above covers every sample table).
    for name in ("append_parted", "pk_fixed", "pk_dynamic", "dropped_part", "fmt_orc"):
        info = tables[name]
        table = Table.open(warehouse, info.identifier)
        before = {
            **{i: oracle.read_rows(warehouse, info.identifier, snapshot_id=i) for i in info.snapshot_ids},
            **{t: oracle.read_rows(warehouse, info.identifier, tag=t) for t in info.tag_names},
        }
        needed = referenced_files(table)
        orphan_data = plant(table.path, f"bucket-0/data-{uid()}-0.parquet")
        orphan_index = plant(table.path, f"index/index-{uid()}-0")
        if info.kind == "pk_dynamic":
            assert any(path.startswith("index/") for path in needed), "the sample has HASH index files"

        remove_orphan_files(spark_session, table, OrphanSettings(max_orphan_ratio=1.0))

        remaining = files_on_disk(table.path)
        assert needed <= remaining, (name, sorted(needed - remaining))
        assert orphan_data not in remaining and orphan_index not in remaining, name
        after = {
            **{i: oracle.read_rows(warehouse, info.identifier, snapshot_id=i) for i in info.snapshot_ids},
            **{t: oracle.read_rows(warehouse, info.identifier, tag=t) for t in info.tag_names},
        }
        assert after == before, name


def test_a_commit_landing_after_the_listing_loses_nothing(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    write_rows(spark_session, warehouse, [(1, "a", "x"), (2, "b", "x")])
    table = Table.open(warehouse, "db.t")
    age_tree(table.path)
    orphan = plant(table.path, f"dt=a/bucket-0/data-{uid()}-0.parquet")
    listed_before_commit = files_on_disk(table.path)

    def commit_meanwhile() -> None:
        write_rows(spark_session, warehouse, [(3, "a", "late"), (4, "d", "late")])
        age_tree(table.path)  # even with old timestamps, the new files must survive

    record = remove_orphan_files(
        spark_session,
        table,
        OrphanSettings(older_than_ms=0, force=True),
        after_listing=commit_meanwhile,
    )

    remaining = files_on_disk(table.path)
    new_files = remaining - listed_before_commit
    assert table.snapshot_manager.latest_id() == 2
    assert any(path.startswith("dt=d/") for path in new_files) and any("manifest-" in p for p in new_files)
    assert referenced_files(table) <= remaining
    assert orphan not in remaining and record.counts["files_deleted"] == 1
    assert {row["id"] for row in oracle.read_rows(warehouse, "db.t")} == {1, 2, 3, 4}


class UnlistableDirFileIO(FileIO):
    """Local storage where listing one directory fails, as a permission or network error would."""

    def __init__(self, broken_suffix: str) -> None:
        super().__init__("file")
        self.broken_suffix = broken_suffix

    def list_dir(self, path: str) -> list:
        if path.rstrip("/").endswith(self.broken_suffix):
            raise StorageError(f"list {path}: PermissionError: [Errno 13] Permission denied")
        return super().list_dir(path)


def test_an_unlistable_directory_fails_the_job_and_deletes_nothing(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    write_rows(spark_session, warehouse, [(1, "a", "x"), (2, "b", "x")])
    opened = Table.open(warehouse, "db.t")
    table = Table(UnlistableDirFileIO("/dt=b"), opened.path)
    age_tree(table.path)
    orphan = plant(table.path, f"dt=a/bucket-0/data-{uid()}-0.parquet")
    with pytest.raises(Exception, match="dt=b") as failure:
        remove_orphan_files(spark_session, table, OrphanSettings(max_orphan_ratio=1.0))
    assert exit_code_for(failure.value) != 0
    assert orphan in files_on_disk(table.path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can list any directory")
def test_a_directory_without_permission_fails_the_listing(spark_session, tmp_path):
    root = tmp_path / "t"
    plant(root, "dt=a/bucket-0/x")
    (root / "dt=a").chmod(0)
    try:
        with pytest.raises(Exception, match="cannot list"):
            list_table_files(spark_session, FileIO("file"), str(root), FileNaming())
    finally:
        (root / "dt=a").chmod(0o755)


OPERATION_NAME = "remove-orphan-files"


def test_the_circuit_breaker_trips_on_too_many_orphans(spark_session, tmp_path, config_file):
    warehouse = str(tmp_path / "wh")
    write_rows(spark_session, warehouse, [(1, "a", "x")])
    table = Table.open(warehouse, "db.t")
    age_tree(table.path)
    listed = len(files_on_disk(table.path))
    orphans = {plant(table.path, f"dt=a/bucket-0/data-{uid()}-0.parquet") for _ in range(listed + 1)}
    path = config_file(f"warehouse: {warehouse}\ntable: db.t\nmax_orphan_ratio: 0.5\n")
    code = main([OPERATION_NAME, "--config", path, "--output", str(tmp_path / "r.json")])
    record = json.loads((tmp_path / "r.json").read_text())
    assert code == 3 and record["status"] == "refused" and "max_orphan_ratio" in record["error"]
    assert orphans <= files_on_disk(table.path)

    code = main(
        [OPERATION_NAME, "--config", path, "--set", "force=true", "--output", str(tmp_path / "r.json")]
    )
    assert code == 0 and files_on_disk(table.path).isdisjoint(orphans)


def test_the_circuit_breaker_trips_when_nothing_is_referenced(spark_session, tmp_path):
    from tests.support.factories import make_table

    table = make_table(str(tmp_path / "wh" / "db.db" / "t"))  # a schema, no snapshot
    orphan = plant(table.path, f"dt=a/bucket-0/data-{uid()}-0.parquet")
    age_tree(table.path)
    with pytest.raises(SafetyRefusal, match="referenced set is empty"):
        remove_orphan_files(spark_session, table, OrphanSettings(max_orphan_ratio=1.0))
    assert orphan in files_on_disk(table.path)


def test_a_dry_run_reports_and_deletes_nothing(spark_session, tmp_path, config_file):
    warehouse = str(tmp_path / "wh")
    write_rows(spark_session, warehouse, [(1, "a", "x"), (2, "b", "y")])
    table = Table.open(warehouse, "db.t")
    age_tree(table.path)
    orphans = {plant(table.path, f"dt=a/bucket-0/data-{uid()}-0.parquet", b"12345") for _ in range(2)}
    before = files_on_disk(table.path)
    listing = tmp_path / "candidates"
    path = config_file(f"warehouse: {warehouse}\ntable: db.t\ncandidates_output: {listing}\n")
    code = main([OPERATION_NAME, "--config", path, "--dry-run", "--output", str(tmp_path / "r.json")])
    record = json.loads((tmp_path / "r.json").read_text())
    assert code == 0 and record["dry_run"] is True
    assert files_on_disk(table.path) == before
    assert record["counts"]["orphan_files"] == 2 and record["bytes"]["orphans"] == 10
    assert set(record["samples"]["orphan_files"]) == orphans
    assert "files_deleted" not in record["counts"]
    written = {
        row["path"]
        for part in listing.glob("part-*.csv")
        for row in csv.DictReader(part.open(encoding="utf-8"))
    }
    assert written == orphans


def test_older_than_below_the_floor_is_refused_without_force(tmp_path, config_file):
    path = config_file(f"warehouse: {tmp_path}\ntable: db.t\nolder_than: 10min\n")
    assert main([OPERATION_NAME, "--config", path, "--output", str(tmp_path / "r.json")]) == 2
    assert "floor" in json.loads((tmp_path / "r.json").read_text())["error"]


def test_an_inventory_replaces_the_listing(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    write_rows(spark_session, warehouse, [(1, "a", "x"), (2, "b", "y")])
    table = Table.open(warehouse, "db.t")
    age_tree(table.path)
    orphan = plant(table.path, f"dt=b/bucket-0/data-{uid()}-0.parquet")
    not_in_inventory = plant(table.path, f"dt=a/bucket-0/data-{uid()}-0.parquet")
    rows = []
    for relative in files_on_disk(table.path) - {not_in_inventory}:
        info = os.stat(os.path.join(table.path, relative))
        rows.append((f"{table.path}/{relative}", info.st_size, int(info.st_mtime * 1000)))
    rows.append(("/elsewhere/data.parquet", 1, 0))
    inventory = tmp_path / "inventory.parquet"
    pq.write_table(
        pa.table(
            {
                name: list(col)
                for name, col in zip(
                    ("path", "size", "modification_time_ms"), zip(*rows, strict=True), strict=True
                )
            }
        ),
        inventory,
    )
    record = remove_orphan_files(spark_session, table, OrphanSettings(inventory=str(inventory)))
    remaining = files_on_disk(table.path)
    assert orphan not in remaining and not_in_inventory in remaining
    assert record.details["source"] == "inventory" and record.counts["files_deleted"] == 1
    assert referenced_files(table) <= remaining


def test_empty_bucket_and_partition_directories_are_removed_on_request(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    write_rows(spark_session, warehouse, [(1, "a", "x"), (2, "b", "y")])
    table = Table.open(warehouse, "db.t")
    age_tree(table.path)
    plant(table.path, f"dt=gone/bucket-0/data-{uid()}-0.parquet")
    plant(table.path, f"dt=gone/bucket-1/data-{uid()}-0.parquet")
    plant(table.path, f"dt=a/bucket-0/data-{uid()}-0.parquet")
    record = remove_orphan_files(
        spark_session, table, OrphanSettings(delete_empty_dirs=True, max_orphan_ratio=1.0)
    )
    assert not (Path(table.path) / "dt=gone").exists()
    assert (Path(table.path) / "dt=a" / "bucket-0").is_dir()
    assert record.counts["directories_removed"] == 3
