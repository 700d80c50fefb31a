"""Planning splits and reading them (merge-on-read), against pypaimon's reads of the same tables.

Tables are written by our writer and committed by SnapshotCommit: upserts and deletes across
commits give primary-key buckets overlapping level-0 files, which must be merged by key.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest
from pyroaring import BitMap

from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.writer import write_table_files
from paimon_format.errors import UnsupportedOperationError
from paimon_format.manifest.entries import DataFileMeta
from paimon_format.model.binary_row import serialize_row
from paimon_format.model.file_layout import table_arrow_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.scan.split_read import read_split
from paimon_format.scan.splits import key_sections, plan_splits, sorted_runs
from paimon_format.table import Table
from tests.interop import oracle
from tests.support.dv_tables import delete_rows
from tests.support.factories import data_file, make_table, partition_of

PK_COLUMNS = (("id", "BIGINT NOT NULL"), ("dt", "STRING NOT NULL"), ("v", "STRING"))


def commit_rows(table: Table, rows: list[dict], first_sequence: int, level: int = 0) -> None:
    schema = table.schema
    data = pa.Table.from_pylist(rows)
    data = pa.Table.from_arrays(
        [data.column(f.name).cast(f.type) for f in table_arrow_schema(schema)]
        + ([data.column("_VALUE_KIND")] if "_VALUE_KIND" in data.column_names else []),
        names=schema.field_names() + (["_VALUE_KIND"] if "_VALUE_KIND" in data.column_names else []),
    )
    results = write_table_files(table.file_io, table.path, schema, data, first_sequence)
    buckets = table.options.bucket
    messages = [
        CommitMessage(p, b, buckets, [dataclasses.replace(f, level=level) for f in files])
        for p, b, files in results
    ]
    SnapshotCommit(table).append(messages)


def read_all(table: Table, splits, **kwargs) -> list[dict]:
    rows = []
    for split in splits:
        rows.extend(pa.Table.from_batches(list(read_split(table, split, **kwargs))).to_pylist())
    return oracle.sort_rows(rows)


@pytest.fixture
def pk_table(tmp_path: Path) -> Table:
    """Fixed 2-bucket PK table, 3 commits: inserts, upserts + a delete, more upserts; parquet."""
    table = make_table(
        str(tmp_path / "db.db" / "pk"), PK_COLUMNS, primary_keys=("id", "dt"), options={"bucket": "2"}
    )
    commit_rows(table, [{"id": n, "dt": d, "v": f"a{n}"} for n in range(20) for d in ("x", "y")], 0)
    changes = [{"id": n, "dt": "x", "v": f"b{n}", "_VALUE_KIND": "+I"} for n in range(0, 20, 3)]
    changes += [{"id": 4, "dt": "y", "v": None, "_VALUE_KIND": "-D"}]
    commit_rows(table, changes, 100)
    commit_rows(table, [{"id": n, "dt": "y", "v": f"c{n}"} for n in (1, 2, 30)], 200)
    return table


def test_primary_key_splits_merge_like_pypaimon_at_every_snapshot(pk_table: Table):
    for snapshot_id in (1, 2, 3):
        snapshot = pk_table.snapshot_manager.snapshot(snapshot_id)
        splits = plan_splits(pk_table, snapshot)
        # One split per partition and bucket.
        assert len({(s.partition, s.bucket) for s in splits}) == len(splits) == 4
        if snapshot_id > 1:
            assert not all(s.raw for s in splits), "overlapping level-0 files must be merged"
        assert read_all(pk_table, splits) == oracle.read_rows(pk_table.path, snapshot_id=snapshot_id)
    rows = read_all(pk_table, plan_splits(pk_table, snapshot))
    assert {"id": 4, "dt": "y", "v": "a4"} not in rows  # deleted in snapshot 2
    assert {"id": 3, "dt": "x", "v": "b3"} in rows


def test_merge_reads_in_small_batches_and_projects_columns(pk_table: Table):
    splits = plan_splits(pk_table, pk_table.snapshot_manager.latest())
    batches = [b for s in splits for b in read_split(pk_table, s, columns=["v", "id"], batch_rows=4)]
    assert all(b.num_rows <= 4 and b.schema.names == ["v", "id"] for b in batches)
    expected = [{"v": r["v"], "id": r["id"]} for r in oracle.read_rows(pk_table.path)]
    assert oracle.sort_rows(pa.Table.from_batches(batches).to_pylist()) == oracle.sort_rows(expected)
    with pytest.raises(UnsupportedOperationError, match="nope"):
        list(read_split(pk_table, splits[0], columns=["nope"]))


def test_partition_filter_keeps_only_accepted_partitions(pk_table: Table):
    wanted = partition_of(pk_table, "y")
    splits = plan_splits(pk_table, pk_table.snapshot_manager.latest(), lambda p: p == wanted)
    assert {s.partition for s in splits} == {wanted}
    expected = [r for r in oracle.read_rows(pk_table.path) if r["dt"] == "y"]
    assert read_all(pk_table, splits) == expected


@pytest.mark.parametrize("file_format", ["parquet", "orc", "avro"])
def test_append_splits_are_packed_and_read_like_pypaimon(tmp_path: Path, file_format: str):
    table = make_table(str(tmp_path / "db.db" / "t"), options={"file.format": file_format})
    for start in (0, 10, 20):
        commit_rows(
            table,
            [{"id": n, "dt": "a" if n % 2 else "b", "v": str(n)} for n in range(start, start + 10)],
            start,
        )

    one_file_each = plan_splits(table, table.snapshot_manager.latest(), target_split_size=1)
    assert len(one_file_each) == 6 and all(len(s.files) == 1 and s.raw for s in one_file_each)
    packed = plan_splits(table, table.snapshot_manager.latest())
    assert len(packed) == 2  # one per partition (bucket-unaware: bucket 0)
    assert read_all(table, packed) == read_all(table, one_file_each) == oracle.read_rows(table.path)


def test_single_file_sections_without_retractions_are_raw(tmp_path: Path):
    table = make_table(
        str(tmp_path / "db.db" / "pk"), PK_COLUMNS, primary_keys=("id", "dt"), options={"bucket": "1"}
    )
    commit_rows(table, [{"id": n, "dt": "x", "v": "a"} for n in range(5)], 0)
    (split,) = plan_splits(table, table.snapshot_manager.latest())
    assert split.raw
    commit_rows(table, [{"id": 1, "dt": "x", "v": None, "_VALUE_KIND": "-D"}], 10)
    (split,) = plan_splits(table, table.snapshot_manager.latest())
    assert not split.raw
    assert [r["id"] for r in read_all(table, [split])] == [0, 2, 3, 4]


def test_deletion_vector_tables_skip_level0_and_apply_vectors(tmp_path: Path):
    """As Paimon's batch scan: level-0 files are invisible, level >= 1 files are read raw minus deletes."""
    table = make_table(
        str(tmp_path / "db.db" / "pk"),
        PK_COLUMNS,
        primary_keys=("id", "dt"),
        options={"bucket": "1", "deletion-vectors.enabled": "true"},
    )
    commit_rows(table, [{"id": n, "dt": "x", "v": "old"} for n in range(6)], 0, level=5)
    commit_rows(table, [{"id": 2, "dt": "x", "v": "new"}], 10)  # level 0: not yet visible
    ((compacted,),) = [
        [f for f in s.files if f.level == 5] for s in plan_splits(table, table.snapshot_manager.latest())
    ]
    delete_rows(table, partition_of(table, "x"), 0, {compacted.file_name: BitMap([0, 3])})

    (split,) = plan_splits(table, table.snapshot_manager.latest())

    assert split.raw and [f.level for f in split.files] == [5]
    assert set(split.deletion_files) == {compacted.file_name}
    rows = read_all(table, [split])
    assert [r["id"] for r in rows] == [1, 2, 4, 5] and {r["v"] for r in rows} == {"old"}
    assert rows == oracle.read_rows(table.path)
    (everything,) = plan_splits(table, table.snapshot_manager.latest(), all_levels=True)
    assert sorted(f.level for f in everything.files) == [0, 5]


def _file(name: str, level: int, low: int, high: int, max_sequence: int) -> DataFileMeta:
    types = [parse_type("BIGINT")]
    meta = data_file(name, level=level, sequence=max_sequence)
    return dataclasses.replace(
        meta, min_key=serialize_row([low], types), max_key=serialize_row([high], types)
    )


def test_sorted_runs_oldest_first_and_key_sections():
    types = [parse_type("BIGINT")]
    files = [
        _file("l0-new", 0, 5, 9, 50),
        _file("l0-old", 0, 1, 3, 40),
        _file("l2-b", 2, 100, 200, 5),
        _file("l2-a", 2, 10, 20, 6),
        _file("l4", 4, 0, 1000, 1),
    ]

    runs = [[f.file_name for f in run] for run in sorted_runs(files, types)]

    assert runs == [["l4"], ["l2-a", "l2-b"], ["l0-old"], ["l0-new"]]
    # Without key types a level's files are separate runs (still correct for the merge).
    assert [[f.file_name for f in run] for run in sorted_runs(files)] == [
        ["l4"],
        ["l2-b"],
        ["l2-a"],
        ["l0-old"],
        ["l0-new"],
    ]
    sections = key_sections(
        [_file("a", 0, 1, 3, 1), _file("b", 0, 3, 4, 2), _file("c", 0, 10, 12, 3), _file("d", 1, 11, 11, 4)],
        types,
    )
    assert [[f.file_name for f in s] for s in sections] == [["a", "b"], ["c", "d"]]


def test_data_evolution_tables_are_refused(tmp_path: Path):
    table = make_table(
        str(tmp_path / "t"), options={"data-evolution.enabled": "true", "row-tracking.enabled": "true"}
    )
    commit_rows(table, [{"id": 1, "dt": "a", "v": "x"}], 0)
    with pytest.raises(UnsupportedOperationError, match="data-evolution"):
        plan_splits(table, table.snapshot_manager.latest())
