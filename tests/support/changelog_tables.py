"""Tables whose changelog outlives their snapshots (Paimon's decoupled changelog retention,
`changelog.num-retained.*` above `snapshot.num-retained.*`), with compactions among the snapshots."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pyarrow.parquet as pq

from paimon_format.commit import COMPACT, CommitMessage, SnapshotCommit
from paimon_format.data.writer import write_table_files
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.table import Table
from tests.support.factories import make_table, partition_of
from tests.support.table_states import TABLE_OPTIONS, append_rows, batch, table_root

DECOUPLED = {
    "snapshot.num-retained.min": "2",
    "snapshot.num-retained.max": "2",
    "changelog.num-retained.min": "4",
    "changelog.num-retained.max": "4",
}


def compact_partition(table, day: str) -> None:
    """A COMPACT commit that rewrites the live files of one partition into one compacted file."""
    latest = table.snapshot_manager.latest()
    partition = partition_of(table, day)
    old_entries = [e for e in live_entries(table, latest) if e.partition == partition]
    parts = [pq.ParquetFile(table.data_file_path(e)).read(columns=["id", "v"]) for e in old_entries]
    merged = pa.concat_tables(parts)
    rows = pa.table({"id": merged["id"], "dt": [day] * merged.num_rows, "v": merged["v"]})
    written = write_table_files(
        table.file_io, table.path, table.schema, rows, latest.total_record_count + 10_000
    )
    messages = [
        CommitMessage(p, bucket, -1, [dataclasses.replace(f, file_source=1, level=1) for f in files])
        for p, bucket, files in written
    ]
    adds = [entry for m in messages for entry in m.entries()]
    deletes = [entry.as_delete() for entry in old_entries]
    SnapshotCommit(table).commit(lambda _ctx: deletes + adds, kind=COMPACT)


def decoupled_table(warehouse: str, **options: str) -> Table:
    """Snapshots 1-4 append, 5 and 6 compact partition 2024-01-01 (5's output is compacted again by
    6), 7 and 8 append; tag t3 on snapshot 3."""
    table = make_table(table_root(warehouse), options={**TABLE_OPTIONS, **DECOUPLED, **options})
    for i in range(4):
        append_rows(table, batch(10 * i, 6))
    table.tag_manager.create_tag("t3", table.snapshot_manager.snapshot(3))
    compact_partition(table, "2024-01-01")
    compact_partition(table, "2024-01-01")
    for i in range(2):
        append_rows(table, batch(100 + 10 * i, 6))
    return table
