"""read_split against pypaimon 2.1.0's reader on tables it cannot both write and merge the same way
we do: pypaimon-written primary-key tables of every merge engine it writes (with -D/-U rows), and a
table whose schema evolved between its files (added, renamed, widened, dropped columns)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.writer import write_table_files
from paimon_format.model.file_layout import table_arrow_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.model.types import DataField
from paimon_format.scan.split_read import read_split
from paimon_format.scan.splits import plan_splits
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.interop import oracle
from tests.support.factories import make_table
from tests.support.pypaimon_merge_tables import CASES, write_merge_tables

pytest.importorskip("pypaimon")


def our_rows(table: Table, snapshot_id: int | None = None) -> list[dict]:
    snapshot = (
        table.snapshot_manager.snapshot(snapshot_id) if snapshot_id else table.snapshot_manager.latest()
    )
    schema = table.schema_by_id(snapshot.schema_id)
    rows = []
    for split in plan_splits(table, snapshot):
        rows.extend(
            pa.Table.from_batches(
                list(read_split(table, split, read_schema=schema, batch_rows=5))
            ).to_pylist()
        )
    return oracle.sort_rows(rows)


@pytest.fixture(scope="module")
def tables(tmp_path_factory) -> dict[str, str]:
    return write_merge_tables(str(tmp_path_factory.mktemp("merge-wh")))


@pytest.mark.parametrize("case", sorted(CASES))
def test_merge_on_read_of_pypaimon_tables(tables: dict[str, str], case: str):
    table = Table(FileIO.for_path(tables[case]), tables[case])
    splits = plan_splits(table, table.snapshot_manager.latest())
    assert splits and not any(s.raw for s in splits)
    for snapshot_id in (2, 4):
        expected = oracle.read_rows(tables[case], snapshot_id=snapshot_id)
        assert len(expected) > 20 and our_rows(table, snapshot_id) == expected


def _commit(table: Table, rows: list[dict], first_sequence: int) -> None:
    data = pa.Table.from_pylist(rows, schema=table_arrow_schema(table.schema))
    results = write_table_files(table.file_io, table.path, table.schema, data, first_sequence)
    SnapshotCommit(table).append([CommitMessage(p, b, -1, files) for p, b, files in results])


def test_schema_evolution_reads_like_pypaimon(tmp_path: Path):
    table = make_table(
        str(tmp_path / "db.db" / "t"),
        (("id", "BIGINT"), ("dt", "STRING"), ("a", "INT"), ("b", "FLOAT"), ("c", "STRING")),
    )
    _commit(table, [{"id": n, "dt": "x", "a": n, "b": n + 0.5, "c": f"c{n}"} for n in range(4)], 0)
    old = {f.name: f for f in table.schema.fields}
    schema = dataclasses.replace(
        table.schema,
        id=1,
        fields=(
            old["id"],
            old["dt"],
            DataField(old["a"].id, "a", parse_type("BIGINT")),
            DataField(old["b"].id, "b2", parse_type("DOUBLE")),
            DataField(10, "d", parse_type("STRING")),
        ),
        highest_field_id=10,
    )
    assert table.schema_manager.commit_new_schema(schema)
    table.refresh()
    _commit(table, [{"id": 10, "dt": "y", "a": 2**40, "b2": 0.25, "d": "new"}], 10)

    rows = our_rows(table)

    assert rows == oracle.read_rows(table.path)
    assert {"id": 0, "dt": "x", "a": 0, "b2": 0.5, "d": None} in rows
    # Time travel to snapshot 1 reads with schema 0.
    assert our_rows(table, 1) == oracle.read_rows(table.path, snapshot_id=1)
