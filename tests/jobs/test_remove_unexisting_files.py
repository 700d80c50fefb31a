"""remove-unexisting-files: lost data files leave the latest snapshot by one commit; pypaimon reads it."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import yaml

from jobs.__main__ import main
from jobs.remove_unexisting_files import remove_unexisting_files
from jobs.runtime.errors import SafetyRefusal
from paimon_format.scan.snapshot_scan import live_entries
from tests.support.pypaimon_reads import pypaimon_rows
from tests.support.table_states import (
    IDENTIFIER,
    build_sample_table,
    copy_warehouse,
    fingerprint,
    open_table,
    row_ids,
    view,
)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> str:
    warehouse = str(tmp_path_factory.mktemp("unexisting") / "wh")
    build_sample_table(warehouse, commits=4)  # 4 appends over 3 partitions: 12 data files
    return warehouse


def lose_files(warehouse: str, count: int) -> set[int]:
    """Delete `count` live data files of the latest snapshot; the row ids they held."""
    table = open_table(warehouse)
    lost: set[int] = set()
    for entry in live_entries(table, table.snapshot_manager.latest())[:count]:
        path = table.data_file_path(entry)
        lost |= set(pq.ParquetFile(path).read(columns=["id"]).column("id").to_pylist())
        table.file_io.delete(path)
    return lost


def test_missing_files_are_reported_then_removed_and_pypaimon_reads_the_rest(
    spark_session, template, tmp_path, capsys
):
    warehouse = copy_warehouse(template, str(tmp_path / "wh"))
    before = view(warehouse)
    lost = lose_files(warehouse, 1)
    untouched = fingerprint(warehouse)
    config = tmp_path / "repair.yaml"
    config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, "max_missing_ratio": 0.2}))

    assert main(["remove-unexisting-files", "--config", str(config), "--dry-run"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert fingerprint(warehouse) == untouched
    assert dry["counts"]["missing_files"] == 1 and dry["counts"]["rows_lost"] == len(lost)
    assert dry["counts"]["live_files"] == 12 and len(dry["details"]["missing"]) == 1

    assert main(["remove-unexisting-files", "--config", str(config)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["snapshot_ids"]["committed"] == 5 and record["counts"]["files_removed"] == 1
    table = open_table(warehouse)  # older snapshots still name the lost file: only the latest reads
    assert table.snapshot_manager.latest().commit_kind == "OVERWRITE"
    after = pypaimon_rows(warehouse, IDENTIFIER)
    assert row_ids(after) == sorted(set(row_ids(before.latest_rows)) - lost) and lost

    assert main(["remove-unexisting-files", "--config", str(config)]) == 0  # nothing left to repair
    again = json.loads(capsys.readouterr().out)
    assert again["counts"]["missing_files"] == 0 and open_table(warehouse).snapshot_manager.latest_id() == 5


def test_too_many_missing_files_is_refused(spark_session, template, tmp_path):
    warehouse = copy_warehouse(template, str(tmp_path / "wh"))
    lose_files(warehouse, 4)  # a third of the table: an outage, not a loss
    untouched = fingerprint(warehouse)
    with pytest.raises(SafetyRefusal, match="4 of 12 live files"):
        remove_unexisting_files(spark_session, open_table(warehouse), max_missing_ratio=0.1)
    assert fingerprint(warehouse) == untouched


def test_deletion_vectors_of_lost_files_leave_the_index(spark_session, tmp_path):
    """A lost file's deletion vector leaves the repaired snapshot: an index file naming only lost
    files is dropped, one also naming a live file is rewritten with the live file's vector alone."""
    from pyroaring import BitMap

    from paimon_format.index.deletion_vectors import deletion_vectors, write_index_file
    from paimon_format.model.schema import new_table_schema
    from paimon_format.model.type_parsing import parse_type
    from paimon_format.scan.snapshot_scan import index_entries
    from paimon_format.table import Table
    from tests.support.dv_tables import commit_index_entries
    from tests.support.table_states import append_rows, batch

    warehouse = str(tmp_path / "wh")
    table = Table.open(warehouse, IDENTIFIER)
    columns = [("id", parse_type("BIGINT")), ("dt", parse_type("STRING")), ("v", parse_type("STRING"))]
    schema = new_table_schema(columns, partition_keys=["dt"], options={"deletion-vectors.enabled": "true"})
    table.schema_manager.create_table(schema)
    table.refresh()
    for commit in range(3):
        append_rows(table, batch(commit * 4, 4, days=2))  # 3 files in each of 2 partitions
    entries = sorted(live_entries(table, table.snapshot_manager.latest()), key=lambda e: e.file.file_name)
    first = entries[0]
    other = next(e for e in entries[1:] if e.partition == first.partition)
    elsewhere = next(e for e in entries if e.partition != first.partition)
    shared = write_index_file(
        table, first.partition, 0, {first.file.file_name: BitMap([0]), other.file.file_name: BitMap([1])}
    )
    alone = write_index_file(table, elsewhere.partition, 0, {elsewhere.file.file_name: BitMap([0])})
    commit_index_entries(table, [shared, alone])
    before = row_ids(pypaimon_rows(warehouse, IDENTIFIER))
    lost: set[int] = set()
    for entry in (first, elsewhere):
        path = table.data_file_path(entry)
        lost |= set(pq.ParquetFile(path).read(columns=["id"]).column("id").to_pylist())
        table.file_io.delete(path)

    dry = remove_unexisting_files(spark_session, open_table(warehouse), max_missing_ratio=0.5, dry_run=True)
    assert dry.counts["deletion_vector_files_to_drop"] == 2 and "committed" not in dry.snapshot_ids
    record = remove_unexisting_files(spark_session, open_table(warehouse), max_missing_ratio=0.5)

    assert record.counts["files_removed"] == 2 and record.counts["deletion_vector_files_dropped"] == 2
    table = open_table(warehouse)
    latest = table.snapshot_manager.latest()
    vectors = [e for e in index_entries(table, latest) if e.index_type == "DELETION_VECTORS"]
    assert len(vectors) == 1 and vectors[0].file_name not in (shared.file_name, alone.file_name)
    assert deletion_vectors(table, latest, first.partition, 0) == {other.file.file_name: BitMap([1])}
    assert deletion_vectors(table, latest, elsewhere.partition, 0) == {}
    # the lost rows are gone, the live file's deleted row stays deleted
    assert row_ids(pypaimon_rows(warehouse, IDENTIFIER)) == sorted(set(before) - lost)
