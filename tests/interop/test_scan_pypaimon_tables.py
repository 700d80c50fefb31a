"""Tables written by pypaimon (the official Python writer), scanned by paimon_format.

For every kind of table — append, partitioned, fixed-bucket and dynamic-bucket primary key (with
hash index files), ORC/Avro/Parquet, a dropped partition, a tag — our scan must yield exactly the
files pypaimon plans to read, and `referenced_files` must name every file on disk (nothing more).
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

from paimon_format.maintenance.references import referenced_files
from paimon_format.scan.snapshot_scan import live_entries, resolve_snapshot
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table

pypaimon = pytest.importorskip("pypaimon")

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])
PK_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("dt", pa.string()), ("v", pa.string())])


def _write(table, rows: list[tuple], schema: pa.Schema, overwrite: dict | None = None) -> None:
    builder = table.new_batch_write_builder()
    if overwrite is not None:
        builder = builder.overwrite(overwrite)
    write, commit = builder.new_write(), builder.new_commit()
    data = pa.table({name: [r[i] for r in rows] for i, name in enumerate(schema.names)}, schema=schema)
    write.write_arrow(data)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def _create(catalog, name: str, schema: pa.Schema, partition_keys=(), primary_keys=(), options=None):
    pypaimon_schema = pypaimon.Schema.from_pyarrow_schema(
        schema, partition_keys=list(partition_keys), primary_keys=list(primary_keys), options=options or {}
    )
    catalog.create_table(f"db.{name}", pypaimon_schema, False)
    return catalog.get_table(f"db.{name}")


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("pypaimon-wh"))
    catalog = pypaimon.CatalogFactory.create({"warehouse": root})
    catalog.create_database("db", True)

    plain = _create(catalog, "append_plain", SCHEMA)
    for i in range(3):
        _write(plain, [(i, "x", f"v{i}")], SCHEMA)

    parted = _create(catalog, "append_parted", SCHEMA, partition_keys=["dt"])
    for i in range(5):
        _write(parted, [(i, f"2024-01-0{i % 3 + 1}", f"v{i}"), (i + 100, "2024-01-09", "w")], SCHEMA)
    parted.create_tag("t3", snapshot_id=3)

    pk_fixed = _create(catalog, "pk_fixed", PK_SCHEMA, primary_keys=["id"], options={"bucket": "4"})
    for round_ in range(3):
        _write(pk_fixed, [(k, "d", f"r{round_}-{k}") for k in range(round_, 10)], PK_SCHEMA)

    pk_dynamic = _create(catalog, "pk_dynamic", PK_SCHEMA, partition_keys=["dt"], primary_keys=["id", "dt"])
    for round_ in range(2):
        _write(pk_dynamic, [(k, f"p{k % 2}", f"r{round_}") for k in range(6)], PK_SCHEMA)

    for file_format in ("orc", "avro", "parquet"):
        table = _create(catalog, f"fmt_{file_format}", SCHEMA, options={"file.format": file_format})
        _write(table, [(1, "a", "x"), (2, "b", "y")], SCHEMA)

    dropped = _create(catalog, "dropped_part", SCHEMA, partition_keys=["dt"])
    _write(dropped, [(1, "a", "x"), (2, "b", "y")], SCHEMA)
    _write(dropped, [(3, "a", "z")], SCHEMA)
    _write(dropped, [(4, "a", "new")], SCHEMA, overwrite={"dt": "a"})
    return root


TABLES = [
    "append_plain",
    "append_parted",
    "pk_fixed",
    "pk_dynamic",
    "fmt_orc",
    "fmt_avro",
    "fmt_parquet",
    "dropped_part",
]


def pypaimon_planned(
    warehouse: str, name: str, snapshot_id: int | None = None, tag: str | None = None
) -> set:
    table = pypaimon.CatalogFactory.create({"warehouse": warehouse}).get_table(f"db.{name}")
    if snapshot_id is not None:
        table = table.copy({"scan.snapshot-id": str(snapshot_id)})
    if tag is not None:
        table = table.copy({"scan.tag-name": tag})
    planned = set()
    for split in table.new_read_builder().new_scan().plan().splits():
        keys = table.partition_keys
        partition = tuple(str(split.partition.get_field(i)) for i in range(len(keys))) if keys else ()
        planned.update((partition, split.bucket, f.file_name) for f in split.files)
    return planned


def our_planned(warehouse: str, name: str, snapshot_id: int | None = None, tag: str | None = None) -> set:
    root = f"{warehouse}/db.db/{name}"
    table = Table(FileIO.for_path(root), root)
    snapshot = resolve_snapshot(table, snapshot_id, tag)
    return {
        (tuple(str(v) for v in table.partition_values(e.partition)), e.bucket, e.file.file_name)
        for e in live_entries(table, snapshot)
    }


@pytest.mark.parametrize("name", TABLES)
def test_every_snapshot_scans_to_the_files_pypaimon_plans(warehouse, name):
    root = f"{warehouse}/db.db/{name}"
    snapshot_ids = Table(FileIO.for_path(root), root).snapshot_manager.snapshot_ids()
    assert snapshot_ids
    for snapshot_id in snapshot_ids:
        ours = our_planned(warehouse, name, snapshot_id)
        assert ours == pypaimon_planned(warehouse, name, snapshot_id), f"{name} snapshot {snapshot_id}"
        assert ours, f"{name} snapshot {snapshot_id} has no files"


def test_a_tag_scans_to_the_files_pypaimon_plans(warehouse):
    assert our_planned(warehouse, "append_parted", tag="t3") == pypaimon_planned(
        warehouse, "append_parted", tag="t3"
    )
    assert our_planned(warehouse, "append_parted", tag="t3") == our_planned(warehouse, "append_parted", 3)


def test_the_dropped_partition_is_gone_only_from_the_newest_snapshot(warehouse):
    latest = {(p, f) for p, _b, f in our_planned(warehouse, "dropped_part")}
    second = {(p, f) for p, _b, f in our_planned(warehouse, "dropped_part", 2)}
    assert len([p for p, _ in latest if p == ("a",)]) == 1
    assert len([p for p, _ in second if p == ("a",)]) == 2


def test_dynamic_bucket_table_has_index_files(warehouse):
    root = f"{warehouse}/db.db/pk_dynamic"
    assert any(Path(root, "index").iterdir())
    assert any(p.startswith("index/") for p in referenced_files(Table(FileIO.for_path(root), root)))


@pytest.mark.parametrize("name", TABLES)
def test_referenced_files_are_exactly_the_files_on_disk(warehouse, name):
    root = f"{warehouse}/db.db/{name}"
    on_disk = set()
    for directory, _dirs, files in os.walk(root):
        for file_name in files:
            relative = os.path.relpath(os.path.join(directory, file_name), root)
            if file_name not in ("LATEST", "EARLIEST"):
                on_disk.add(relative)
    assert referenced_files(Table(FileIO.for_path(root), root)) == on_disk
