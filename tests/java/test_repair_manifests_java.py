"""remove-unexisting-manifests on Java-written tables: the metadata besides the data manifests.

- a lost index manifest (``pk_dynamic``'s hash index) is exit 2 naming it: no commit can rebuild it,
  and Paimon's own repair would keep naming the missing file;
- a lost changelog (``pk_changelog``, ``changelog-producer: input``) alone is exit 2 naming it;
  alongside a lost data manifest the repair goes on, as Paimon's, and the new snapshot has none;
- a kept manifest that deletes a file whose ADD was lost is rewritten without that DELETE (our reader
  refuses such a DELETE; Java's skips it), and the recounted total carries into Java's next commit
  (Java adds its delta to the latest total: on a total kept as it was, Java's counts stay wrong).
"""

from __future__ import annotations

import pytest

from jobs.remove_unexisting_manifests import remove_unexisting_manifests
from paimon_format.scan.snapshot_scan import changelog_manifests, data_manifests, live_entries
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.helpers import our_read, run_job
from tests.java.oracle import JavaPaimon, sort_key
from tests.java.tables import _pk_rows

pytestmark = pytest.mark.java


def open_path(path: str) -> Table:
    return Table(FileIO.for_path(path), path)


def config(warehouse: str, name: str) -> dict:
    return {"warehouse": warehouse, "table": f"db.{name}", "max_missing_ratio": 1.0}


def job(warehouse: str) -> dict:
    return config(warehouse, "pk_changelog")


def test_a_lost_index_manifest_is_exit_2_naming_it(java_warehouse, tmp_path):
    table = open_path(f"{java_warehouse}/db.db/pk_dynamic")
    latest = table.snapshot_manager.latest()
    assert latest.index_manifest
    table.file_io.delete(table.manifest_path(latest.index_manifest))
    code, record = run_job(tmp_path, "remove-unexisting-manifests", config(java_warehouse, "pk_dynamic"))
    assert code == 2 and latest.index_manifest in str(record)
    assert open_path(table.path).snapshot_manager.latest_id() == latest.id


def test_a_lost_changelog_alone_is_exit_2_and_beside_a_lost_manifest_the_repair_goes_on(
    java_paimon: JavaPaimon, java_warehouse, tmp_path
):
    table = open_path(f"{java_warehouse}/db.db/pk_changelog")
    java_paimon.write(table.path, _pk_rows(range(30, 33), 7), options={"write-only": "true"})
    latest = table.snapshot_manager.latest()
    lost_changelog = changelog_manifests(table, latest)[0].file_name
    table.file_io.delete(table.manifest_path(lost_changelog))
    code, record = run_job(
        tmp_path / "a", "remove-unexisting-manifests", config(java_warehouse, "pk_changelog")
    )
    assert code == 2 and lost_changelog in str(record) and "reset-consumer" in str(record)
    assert open_path(table.path).snapshot_manager.latest_id() == latest.id

    lost_data = data_manifests(table, latest)[-1].file_name
    table.file_io.delete(table.manifest_path(lost_data))
    code, record = run_job(
        tmp_path / "b", "remove-unexisting-manifests", config(java_warehouse, "pk_changelog")
    )
    assert code == 0, record
    assert record["counts"]["missing_changelog_manifests"] == 1
    assert record["samples"]["missing_manifests"] == [lost_data]
    repaired = open_path(table.path).snapshot_manager.latest()
    assert repaired.id == latest.id + 1 and repaired.changelog_manifest_list is None
    assert repaired.total_record_count == sum(entry.file.row_count for entry in live_entries(table, repaired))
    rows = java_paimon.read(table.path, snapshot_id=repaired.id)
    assert rows == sorted(our_read(table.path, ("snapshot", str(repaired.id))), key=sort_key)


def test_java_overwrites_a_partition_whose_deleted_files_a_lost_manifest_added(java_paimon, tmp_path):
    path = str(tmp_path / "wh" / "db.db" / "t")
    java_paimon.create_table(path, [("dt", "STRING NOT NULL"), ("id", "BIGINT NOT NULL")], ["dt"])
    java_paimon.write(path, [{"dt": "a", "id": 1}, {"dt": "b", "id": 2}])
    java_paimon.write(path, [{"dt": "b", "id": 3}])
    java_paimon.write(path, [{"dt": "a", "id": 4}], overwrite={"dt": "a"})  # deletes id 1's file
    table = open_path(path)
    first = data_manifests(table, table.snapshot_manager.latest())[0]
    assert first.num_added_files == 2
    table.file_io.delete(table.manifest_path(first.file_name))
    record = remove_unexisting_manifests(table, max_missing_ratio=1.0)
    assert record.counts["dangling_deletes_dropped"] == 1
    assert java_paimon.read(path) == [{"dt": "a", "id": 4}, {"dt": "b", "id": 3}]
    java_paimon.write(path, [{"dt": "a", "id": 5}], overwrite={"dt": "a"})
    assert java_paimon.read(path) == [{"dt": "a", "id": 5}, {"dt": "b", "id": 3}]
    assert open_path(path).snapshot_manager.latest().total_record_count == 2
