"""Smoke tests of the pypaimon oracle helpers (`tests.interop.oracle`).

The sample tables pypaimon writes must read back exactly the rows written at every snapshot and
tag, and the files pypaimon plans must be the data files on disk (minus the overwritten/dropped
ones).  Other interop tests rely on these helpers, so these checks pin their behaviour.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pypaimon = pytest.importorskip("pypaimon")

from tests.interop import oracle  # noqa: E402

EXPECTED_SNAPSHOTS = {
    "append_plain": 3,
    "append_parted": 5,
    "pk_fixed": 4,
    "pk_dynamic": 3,
    "fmt_orc": 2,
    "fmt_avro": 2,
    "fmt_parquet": 2,
    "dropped_part": 4,
    "all_types": 2,
}


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> tuple[str, dict[str, oracle.TableInfo]]:
    warehouse = str(tmp_path_factory.mktemp("oracle-wh"))
    return warehouse, oracle.create_sample_tables(warehouse)


def test_every_sample_table_is_created_with_its_snapshots(samples):
    warehouse, tables = samples
    assert set(tables) == set(EXPECTED_SNAPSHOTS)
    for name, info in tables.items():
        assert info.identifier == f"db.{name}"
        assert info.path == os.path.join(warehouse, "db.db", name)
        assert info.snapshot_ids == list(range(1, EXPECTED_SNAPSHOTS[name] + 1))
        assert oracle.snapshot_ids(info.path) == info.snapshot_ids
        assert sorted(info.expected) == info.snapshot_ids
    assert tables["pk_fixed"].primary_keys == ["id"] and tables["pk_fixed"].options["bucket"] == "4"
    assert tables["pk_dynamic"].partition_keys == ["dt"] and tables["pk_dynamic"].kind == "pk_dynamic"
    assert [tables[f"fmt_{f}"].file_format for f in ("orc", "avro", "parquet")] == ["orc", "avro", "parquet"]
    assert tables["dropped_part"].commit_kinds == {1: "APPEND", 2: "APPEND", 3: "OVERWRITE", 4: "OVERWRITE"}


@pytest.mark.parametrize("name", sorted(EXPECTED_SNAPSHOTS))
def test_pypaimon_reads_the_rows_written_at_every_snapshot(samples, name):
    warehouse, tables = samples
    info = tables[name]
    for snapshot_id in info.snapshot_ids:
        expected = info.expected_rows(snapshot_id)
        assert expected, f"{name}@{snapshot_id}: the model holds no rows"
        assert oracle.read_rows(warehouse, info.identifier, snapshot_id) == expected, f"{name}@{snapshot_id}"
    # Latest by default, through the catalog or straight from the table directory.
    assert oracle.read_rows(warehouse, info.identifier) == info.expected_rows()
    assert oracle.read_rows(info.path) == info.expected_rows()


def test_primary_key_tables_read_the_newest_value_per_key(samples):
    _, tables = samples
    rows = tables["pk_fixed"].expected_rows()
    assert [r["id"] for r in rows] == sorted({r["id"] for r in rows}, key=str)
    assert {r["id"]: r["v"] for r in rows}[7] == "r3-7"  # written by commits 1..4, newest wins
    assert len(tables["pk_fixed"].expected_rows(1)) == 8 and len(rows) == 14


def test_all_types_round_trip_as_plain_python(samples):
    _, tables = samples
    info = tables["all_types"]
    rows = oracle.read_rows(info.path)
    assert rows == info.expected_rows() and len(rows) == 8
    full = next(r for r in rows if r["c_int"] == 7)
    assert set(full) == set(oracle.ALL_TYPES_SCHEMA.names)
    assert {k: type(v).__name__ for k, v in full.items()} == {
        "c_int": "int",
        "c_bigint": "int",
        "c_double": "float",
        "c_string": "str",
        "c_boolean": "bool",
        "c_date": "date",
        "c_timestamp": "datetime",
        "c_decimal": "Decimal",
        "c_tinyint": "int",
        "c_smallint": "int",
        "c_float": "float",
        "c_bytes": "bytes",
        "c_decimal38": "Decimal",
        "c_timestamp3": "datetime",
        "c_timestamp_ltz": "datetime",
        "p": "date",
    }
    assert sum(r["c_int"] is None for r in rows) == 2
    # DATE partition directories use partition.legacy-name (days since epoch).
    assert {p for p, _b, _f in oracle.planned_files(info.path)} == {(("p", "19723"),), (("p", "19724"),)}


def test_planned_files_of_append_plain_are_the_data_files_on_disk(samples):
    warehouse, tables = samples
    info = tables["append_plain"]
    planned = oracle.planned_files(warehouse, info.identifier)
    on_disk = {f for f in Path(info.path, "bucket-0").iterdir()}
    assert len(planned) == 3
    assert planned == {((), 0, f.name) for f in on_disk}
    assert planned == oracle.data_files_on_disk(info.path)
    assert oracle.planned_file_paths(info.path) == {str(f) for f in on_disk}
    assert oracle.planned_files(info.path) == planned


@pytest.mark.parametrize("name", sorted(EXPECTED_SNAPSHOTS))
def test_planned_files_grow_with_snapshots_and_exist_on_disk(samples, name):
    _, tables = samples
    info = tables[name]
    on_disk = oracle.data_files_on_disk(info.path)
    previous: set = set()
    for snapshot_id in info.snapshot_ids:
        planned = oracle.planned_files(info.path, snapshot_id=snapshot_id)
        assert planned, f"{name}@{snapshot_id}"
        assert planned <= on_disk
        assert all(os.path.isfile(p) for p in oracle.planned_file_paths(info.path, snapshot_id=snapshot_id))
        if info.commit_kinds[snapshot_id] == "APPEND":
            assert previous < planned, f"{name}@{snapshot_id}: an append keeps every file and adds some"
        previous = planned
    if name != "dropped_part":  # nothing is ever deleted: the latest snapshot plans every file
        assert oracle.planned_files(info.path) == on_disk


def test_overwrite_and_drop_partition_remove_files_from_the_plan(samples):
    _, tables = samples
    info = tables["dropped_part"]

    def partitions(snapshot_id: int) -> list[str]:
        return sorted(dict(p)["dt"] for p, _b, _f in oracle.planned_files(info.path, snapshot_id=snapshot_id))

    assert partitions(2) == ["a", "a", "b", "b", "c"]
    assert partitions(3) == ["a", "b", "b", "c"]  # dt=a overwritten by one new file
    assert partitions(4) == ["a", "c"]  # dt=b dropped
    new_a = {f for f in oracle.planned_files(info.path, snapshot_id=3) if dict(f[0])["dt"] == "a"}
    assert not new_a & oracle.planned_files(info.path, snapshot_id=2)
    assert [r["v"] for r in oracle.read_rows(info.path) if r["dt"] == "a"] == ["new6"]


def test_tag_time_travel(samples):
    warehouse, tables = samples
    info = tables["append_parted"]
    assert info.tags == {"t3": 3}
    tag_file = Path(info.path, "tag", "tag-t3")
    snapshot_file = Path(info.path, "snapshot", "snapshot-3")
    assert json.loads(tag_file.read_text()) == json.loads(snapshot_file.read_text())
    assert oracle.load_table(info.path).list_tags() == ["t3"]
    assert oracle.read_rows(warehouse, info.identifier, tag="t3") == info.expected_rows(tag="t3")
    assert info.expected_rows(tag="t3") == info.expected_rows(3) != info.expected_rows()
    assert oracle.planned_files(info.path, tag="t3") == oracle.planned_files(info.path, snapshot_id=3)
    assert oracle.planned_files(info.path, tag="t3") < oracle.planned_files(info.path)


def test_dynamic_bucket_table_writes_hash_index_files(samples):
    _, tables = samples
    info = tables["pk_dynamic"]
    assert len(list(Path(info.path, "index").iterdir())) >= 2
    snapshots = [
        json.loads(Path(info.path, "snapshot", f"snapshot-{i}").read_text()) for i in info.snapshot_ids
    ]
    assert all(s.get("indexManifest") for s in snapshots)
    assert len({s["indexManifest"] for s in snapshots}) == len(snapshots)  # new keys each commit
    assert {b for _p, b, _f in oracle.planned_files(info.path)} == {0}


def test_bad_time_travel_is_refused(samples):
    warehouse, tables = samples
    info = tables["append_plain"]
    with pytest.raises(ValueError):
        oracle.read_rows(warehouse, info.identifier, snapshot_id=99)
    with pytest.raises(ValueError):
        oracle.planned_files(info.path, tag="nope")
    with pytest.raises(ValueError):
        oracle.read_rows(info.path, snapshot_id=1, tag="t3")
