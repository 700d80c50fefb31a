"""Tables committed by our SnapshotCommit, with data files written by plain pyarrow, read by pypaimon.

The oracle is the official reader: at every snapshot it must return exactly the rows we wrote,
through appends, partition and whole-table overwrites, and automatic manifest merges.
"""

from __future__ import annotations

import datetime as dt
import io
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.manifest.codec import read_manifest_list
from paimon_format.manifest.entries import DataFileMeta, SimpleStats
from paimon_format.model.binary_row import EMPTY_ROW
from paimon_format.table import Table
from tests.support.factories import make_table, partition_of

pypaimon = pytest.importorskip("pypaimon")

ARROW_SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])


def write_parquet(table: Table, dt_value: str, rows: list[tuple[int, str]], sequence: int) -> CommitMessage:
    """A data file written with pyarrow alone, and the commit message that adds it."""
    data = pa.table(
        {"id": [r[0] for r in rows], "dt": [dt_value] * len(rows), "v": [r[1] for r in rows]},
        schema=ARROW_SCHEMA,
    )
    buffer = io.BytesIO()
    pq.write_table(data, buffer, compression="zstd")
    payload = buffer.getvalue()
    name = f"data-{uuid.uuid4()}-0.parquet"
    partition = partition_of(table, dt_value)
    table.file_io.write_bytes(table.full_path(f"{table.bucket_relpath(partition, 0)}/{name}"), payload)
    meta = DataFileMeta(
        file_name=name,
        file_size=len(payload),
        row_count=len(rows),
        min_key=EMPTY_ROW,
        max_key=EMPTY_ROW,
        key_stats=SimpleStats.empty(),
        value_stats=SimpleStats.empty(),
        min_sequence_number=sequence,
        max_sequence_number=sequence + len(rows) - 1,
        schema_id=0,
        level=0,
        extra_files=[],
        creation_time=dt.datetime.now(),
        delete_row_count=0,
        file_source=0,
        value_stats_cols=[],
    )
    return CommitMessage(partition, 0, -1, [meta])


def pypaimon_rows(warehouse: str, snapshot_id: int) -> list[tuple]:
    catalog = pypaimon.CatalogFactory.create({"warehouse": warehouse})
    table = catalog.get_table("db.t").copy({"scan.snapshot-id": str(snapshot_id)})
    builder = table.new_read_builder()
    result = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return sorted(zip(*(result.column(name).to_pylist() for name in ("id", "dt", "v")), strict=True))


def test_pypaimon_reads_every_snapshot_we_commit(tmp_path):
    warehouse = str(tmp_path)
    table = make_table(f"{warehouse}/db.db/t", options={"manifest.merge-min-count": "3"})
    committer = SnapshotCommit(table)
    expected: dict[int, set[tuple]] = {}
    current: set[tuple] = set()
    sequence = 0

    for i in range(5):  # appends; the third and later trigger minor manifest merges
        day = f"2024-01-0{i % 2 + 1}"
        rows = [(i * 10 + k, f"v{i}-{k}") for k in range(3)]
        snapshot = committer.append([write_parquet(table, day, rows, sequence)])
        sequence += 3
        current |= {(r[0], day, r[1]) for r in rows}
        expected[snapshot.id] = set(current)

    target = partition_of(table, "2024-01-01")
    snapshot = committer.overwrite(
        [write_parquet(table, "2024-01-01", [(100, "new")], sequence)], partition_filter=lambda p: p == target
    )
    current = {r for r in current if r[1] != "2024-01-01"} | {(100, "2024-01-01", "new")}
    expected[snapshot.id] = set(current)

    snapshot = committer.append([write_parquet(table, "2024-01-03", [(200, "x")], sequence + 1)])
    current |= {(200, "2024-01-03", "x")}
    expected[snapshot.id] = set(current)

    snapshot = committer.overwrite([write_parquet(table, "2024-01-09", [(300, "only")], sequence + 2)])
    expected[snapshot.id] = {(300, "2024-01-09", "only")}

    base = read_manifest_list(
        table.file_io, table.manifest_path(table.snapshot_manager.snapshot(5).base_manifest_list)
    )
    assert len(base) < 4, "the merge rules should have merged the first manifests"
    for snapshot_id, rows in expected.items():
        assert set(pypaimon_rows(warehouse, snapshot_id)) == rows, f"snapshot {snapshot_id}"
        assert len(pypaimon_rows(warehouse, snapshot_id)) == len(rows)
