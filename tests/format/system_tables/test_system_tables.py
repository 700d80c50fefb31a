"""System tables (`$snapshots`, `$files`, ...) on our own small tables, each value checked against the
metadata it comes from (snapshot files, manifests, tags, branches, consumers), never hard-coded.
Paimon's own answers on Java's tables: tests/java/test_system_tables_java.py."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import Counter

import pyarrow as pa
import pytest

from paimon_format.commit import SnapshotCommit
from paimon_format.consumers import ConsumerManager
from paimon_format.errors import InvalidTableStateError, SnapshotNotFoundError, TableNotFoundError
from paimon_format.manifest.codec import encode_manifest_list
from paimon_format.model.binary_row import deserialize_row
from paimon_format.scan.snapshot_scan import changelog_manifests, data_manifests, live_entries
from paimon_format.storage.fileio import FileIO
from paimon_format.system_tables import (
    SYSTEM_TABLES,
    UnknownSystemTableError,
    system_table,
    system_table_batches,
    system_table_schema,
    time_travel,
)
from paimon_format.system_tables.file_tables import live_entries_by_manifest
from paimon_format.system_tables.java_text import partition_path_text, row_cast_text
from paimon_format.system_tables.metadata_tables import local_time
from paimon_format.table import Table
from tests.support.factories import data_file, make_table, message
from tests.support.table_states import branch_from_t2, build_sample_table


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Table:
    """4 APPEND snapshots over 3 partitions, tag t2, and branch b (an append, a partition overwrite,
    an append); never modified by the tests that share it."""
    table = build_sample_table(str(tmp_path_factory.mktemp("wh")))
    branch_from_t2(table)
    return Table(FileIO.for_path(table.path), table.path)


def _file_keys(table: Table, snapshot) -> Counter:
    return Counter(
        (table.data_file_path(e), e.bucket, e.file.row_count, e.file.file_size)
        for e in live_entries(table, snapshot)
    )


def _rows_keys(rows: pa.Table) -> Counter:
    return Counter(
        (r["file_path"], r["bucket"], r["record_count"], r["file_size_in_bytes"]) for r in rows.to_pylist()
    )


def test_every_table_has_paimons_columns_even_when_empty(tmp_path) -> None:
    table = make_table(str(tmp_path / "db.db" / "t"))
    for name in SYSTEM_TABLES:
        result = system_table(table, name)
        assert result.schema == system_table_schema(table, f"${name}")
        assert result.num_rows == (1 if name == "schemas" else 0), name
    assert system_table_schema(table, "files").names[:4] == [
        "partition",
        "bucket",
        "file_path",
        "file_format",
    ]
    assert not system_table_schema(table, "snapshots").field("snapshot_id").nullable


def test_snapshots_are_the_snapshot_files(sample: Table) -> None:
    rows = system_table(sample, "snapshots").to_pylist()
    manager = sample.snapshot_manager
    assert [r["snapshot_id"] for r in rows] == manager.snapshot_ids()
    for row in rows:
        snapshot = manager.snapshot(row["snapshot_id"])
        assert row["commit_kind"] == snapshot.commit_kind
        assert row["commit_user"] == snapshot.commit_user
        assert row["total_record_count"] == snapshot.total_record_count
        assert row["delta_record_count"] == snapshot.delta_record_count
        assert row["base_manifest_list"] == snapshot.base_manifest_list
        # a wall-clock time of this process's zone, to the millisecond
        assert row["commit_time"].astimezone(dt.timezone.utc).timestamp() * 1000 == snapshot.time_millis


def test_schemas_and_options_are_the_schema_files(sample: Table) -> None:
    (row,) = system_table(sample, "schemas").to_pylist()
    schema = sample.schema
    assert row["schema_id"] == schema.id
    assert json.loads(row["fields"]) == [f.to_json() for f in schema.fields]
    assert json.loads(row["partition_keys"]) == list(schema.partition_keys)
    assert json.loads(row["options"]) == schema.options and " " not in row["fields"]
    assert row["update_time"] == local_time(schema.time_millis)
    options = system_table(sample, "options").to_pylist()
    assert {o["key"]: o["value"] for o in options} == schema.options


def test_files_are_the_live_files_of_the_snapshot_asked_for(sample: Table) -> None:
    manager = sample.snapshot_manager
    assert _rows_keys(system_table(sample, "files")) == _file_keys(sample, manager.latest())
    assert _rows_keys(system_table(sample, "files", snapshot_id=1)) == _file_keys(sample, manager.snapshot(1))
    assert _rows_keys(system_table(sample, "files", tag="t2")) == _file_keys(
        sample, sample.tag_manager.tag("t2")
    )
    assert system_table(sample, "files", snapshot_id=1).num_rows < system_table(sample, "files").num_rows


def test_files_of_a_branch_leave_out_what_its_overwrite_deleted(sample: Table) -> None:
    branch = sample.for_branch("b")
    latest = branch.snapshot_manager.latest()
    assert any(meta.num_deleted_files for meta in data_manifests(branch, latest))  # the overwrite's DELETEs
    rows = system_table(branch, "files")
    assert _rows_keys(rows) == _file_keys(branch, latest)
    assert _rows_keys(system_table(sample, "branch_b$files")) == _rows_keys(rows)
    assert _rows_keys(rows) != _rows_keys(system_table(sample, "files"))


def test_files_stream_one_batch_per_manifest_with_live_files(sample: Table) -> None:
    branch = sample.for_branch("b")
    latest = branch.snapshot_manager.latest()
    batches = list(system_table_batches(branch, "files"))
    per_manifest = [len(entries) for entries in live_entries_by_manifest(branch, latest)]
    assert [b.num_rows for b in batches] == per_manifest and len(batches) > 1
    assert sum(per_manifest) == len(live_entries(branch, latest))
    assert pa.Table.from_batches(batches).equals(system_table(branch, "files"))


def test_file_row_texts_follow_paimon(sample: Table) -> None:
    row = system_table(sample, "files").to_pylist()[0]
    entry = next(
        e
        for e in live_entries(sample, sample.snapshot_manager.latest())
        if sample.data_file_path(e) == row["file_path"]
    )
    types = sample.partition_types
    assert row["partition"] == row_cast_text(deserialize_row(entry.partition, types), types)
    assert row["partition"].startswith("{2024-01-0") and row["file_format"] == "parquet"
    assert row["min_key"] is None  # an append table has no keys
    fields = sample.schema.fields
    low = deserialize_row(entry.file.value_stats.min_values, [f.type for f in fields])
    pairs = sorted(zip(fields, low, strict=True), key=lambda pair: pair[0].name)
    expected = "{" + ", ".join(f"{f.name}={v}" for f, v in pairs) + "}"
    assert row["min_value_stats"] == expected
    assert row["creation_time"] == entry.file.creation_time.replace(
        microsecond=entry.file.creation_time.microsecond // 1000 * 1000
    )
    assert row["file_source"] == "APPEND" and row["level"] == entry.file.level


def test_manifests_are_the_snapshots_manifest_lists(sample: Table) -> None:
    snapshot = sample.tag_manager.tag("t2")
    rows = system_table(sample, "manifests", tag="t2").to_pylist()
    metas = data_manifests(sample, snapshot) + changelog_manifests(sample, snapshot)
    assert [(r["file_name"], r["file_size"], r["num_added_files"]) for r in rows] == [
        (m.file_name, m.file_size, m.num_added_files) for m in metas
    ]
    assert all(r["min_partition_stats"] <= r["max_partition_stats"] for r in rows)


def _sums(files: pa.Table, key) -> dict:
    sums: dict = {}
    for row in files.to_pylist():
        totals = sums.setdefault(key(row), [0, 0, 0])
        totals[0] += row["record_count"]
        totals[1] += row["file_size_in_bytes"]
        totals[2] += 1
    return sums


@pytest.mark.parametrize("travel", [{}, {"snapshot_id": 2}, {"tag": "t2"}])
def test_partitions_and_buckets_sum_the_files(sample: Table, travel) -> None:
    files = system_table(sample, "files", **travel)
    keys, types = list(sample.schema.partition_keys), sample.partition_types
    spelled = {
        row_cast_text([v], types): partition_path_text([v], keys, types, "x")
        for v in ("2024-01-01", "2024-01-02", "2024-01-03")
    }
    partitions = system_table(sample, "partitions", **travel).to_pylist()
    assert {
        p["partition"]: [p["record_count"], p["file_size_in_bytes"], p["file_count"]] for p in partitions
    } == {spelled[k]: v for k, v in _sums(files, lambda r: r["partition"]).items()}
    assert [p["partition"] for p in partitions] == sorted(p["partition"] for p in partitions)
    assert all(p["last_update_time"] is not None and p["created_by"] is None for p in partitions)
    buckets = system_table(sample, "buckets", **travel).to_pylist()
    assert {
        (b["partition"], b["bucket"]): [b["record_count"], b["file_size_in_bytes"], b["file_count"]]
        for b in buckets
    } == _sums(files, lambda r: (r["partition"], r["bucket"]))


def test_partitions_leave_out_a_partition_whose_files_are_all_deleted(sample: Table) -> None:
    branch = sample.for_branch("b")  # its overwrite of dt=2024-01-01 replaced every file there by one
    partitions = {p["partition"]: p["file_count"] for p in system_table(branch, "partitions").to_pylist()}
    files = Counter(r["partition"] for r in system_table(branch, "files").to_pylist())
    assert partitions["dt=2024-01-01"] == files["{2024-01-01}"]


def test_tags_branches_and_consumers(tmp_path) -> None:
    table = build_sample_table(str(tmp_path / "wh"))
    table.tag_manager.create_tag("kept", table.snapshot_manager.snapshot(3), time_retained_ms=90 * 60 * 1000)
    ConsumerManager(table.file_io, table.path).reset_consumer("reader-b", 3)
    ConsumerManager(table.file_io, table.path).reset_consumer("reader-a", 2)
    branch_from_t2(table)

    tags = system_table(table, "tags").to_pylist()
    assert [t["tag_name"] for t in tags] == ["kept", "t2"]
    kept = table.tag_manager.tag("kept")
    assert tags[0]["snapshot_id"] == 3 and tags[0]["record_count"] == kept.total_record_count
    assert tags[0]["time_retained"] == "PT1H30M" and tags[0]["create_time"] == kept.tag_create_time.replace(
        microsecond=kept.tag_create_time.microsecond // 1000 * 1000
    )
    assert tags[1]["time_retained"] is None and tags[1]["create_time"] is None

    (branch,) = system_table(table, "branches").to_pylist()
    mtime = os.stat(os.path.join(table.path, "branch", "branch-b")).st_mtime_ns // 1_000_000
    assert branch == {"branch_name": "b", "create_time": local_time(mtime)}

    consumers = system_table(table, "consumers").to_pylist()
    assert consumers == [
        {"consumer_id": "reader-a", "next_snapshot_id": 2},
        {"consumer_id": "reader-b", "next_snapshot_id": 3},
    ]
    assert [t["tag_name"] for t in system_table(table, "branch_b$tags").to_pylist()] == ["t2"]


def test_bad_requests_name_what_is_wrong(sample: Table, tmp_path) -> None:
    with pytest.raises(UnknownSystemTableError, match=r"no system table 'audit_log'.*\$snapshots"):
        system_table(sample, "audit_log")
    with pytest.raises(UnknownSystemTableError, match=r"\$snapshots describes the table's metadata now"):
        system_table(sample, "snapshots", snapshot_id=1)
    with pytest.raises(SnapshotNotFoundError, match="tag 'nope' does not exist"):
        system_table(sample, "files", tag="nope")
    with pytest.raises(SnapshotNotFoundError, match="snapshot 99 does not exist"):
        list(system_table_batches(sample, "files", snapshot_id=99))
    missing = str(tmp_path / "db.db" / "none")
    with pytest.raises(TableNotFoundError, match="not a Paimon table"):
        system_table(Table(FileIO.for_path(missing), missing), "snapshots")


def test_time_travel_options_use_paimons_names() -> None:
    assert time_travel({"scan.snapshot-id": "3"}) == (3, None)
    assert time_travel({"scan.tag-name": "t2", "path": "db.t$files"}) == (None, "t2")
    assert time_travel({"snapshot-id": "4"}) == (4, None) and time_travel({}) == (None, None)
    with pytest.raises(ValueError, match="'scan.snapshot-id' must be a snapshot id"):
        time_travel({"scan.snapshot-id": "latest"})
    with pytest.raises(ValueError, match="both a snapshot id and a tag"):
        time_travel({"snapshot-id": "1", "tag": "t"})


def _table_with_a_delete(root: str) -> Table:
    table = make_table(root)
    committer = SnapshotCommit(table)
    committer.append([message(table, ["a"], data_file("data-1.parquet"), data_file("data-2.parquet"))])
    committer.append(
        [message(table, ["a"], data_file("data-3.parquet"), deleted=[data_file("data-1.parquet")])]
    )
    return Table(FileIO.for_path(root), root)


def test_a_delete_whose_add_is_missing_is_broken_metadata_not_a_smaller_table(tmp_path) -> None:
    root = str(tmp_path / "db.db" / "t")
    table = _table_with_a_delete(root)
    assert sorted(r["file_path"].rsplit("/", 1)[1] for r in system_table(table, "files").to_pylist()) == [
        "data-2.parquet",
        "data-3.parquet",
    ]
    # Drop the manifest that added data-1 from the latest snapshot's base list: its DELETE dangles.
    latest = table.snapshot_manager.latest()
    base = table.manifest_list(latest.base_manifest_list)
    table.file_io.write_bytes(table.manifest_path(latest.base_manifest_list), encode_manifest_list(base[1:]))
    broken = Table(FileIO.for_path(root), root)
    with pytest.raises(InvalidTableStateError, match="trying to delete file data-1.parquet"):
        list(system_table_batches(broken, "files"))


def test_a_delete_in_a_manifest_that_counts_none_is_refused(tmp_path) -> None:
    root = str(tmp_path / "db.db" / "t")
    table = _table_with_a_delete(root)
    latest = table.snapshot_manager.latest()
    delta = table.manifest_list(latest.delta_manifest_list)
    for meta in delta:
        meta.num_deleted_files = 0
    table.file_io.write_bytes(table.manifest_path(latest.delta_manifest_list), encode_manifest_list(delta))
    broken = Table(FileIO.for_path(root), root)
    with pytest.raises(InvalidTableStateError, match="counts no deleted files"):
        system_table(broken, "files")
