"""`compact` with `strategy: minor` on a primary-key table: Paimon's universal compaction picking.

A deduplicate table whose buckets hold one big top-level run (after a full compaction) and five new
level-0 runs: the minor compaction rewrites only the small runs, into level 4 (one below the big
run), keeping the retraction of a deleted key (level 5 still holds the key's older row); reads stay
equal (pypaimon as the oracle) before, after, and after a full compaction on top.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from jobs.compact import compact
from jobs.compaction.run import CompactRequest
from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.reader import read_data_file
from paimon_format.data.writer import write_table_files
from paimon_format.manifest.entries import ADD, DELETE
from paimon_format.model.file_layout import VALUE_KIND
from paimon_format.scan.snapshot_scan import live_entries, read_entries, read_list
from paimon_format.table import Table
from tests.support.factories import make_table
from tests.support.pypaimon_reads import pypaimon_rows

pytest.importorskip("pypaimon")

BUCKETS = 2


def _commit(table: Table, data: pa.Table, first_sequence: int) -> None:
    written = write_table_files(table.file_io, table.path, table.schema, data, first_sequence)
    SnapshotCommit(table).append([CommitMessage(p, b, BUCKETS, files) for p, b, files in written])


def _rows(ids: list[int], version: str, kinds: list[int] | None = None) -> pa.Table:
    columns = {
        "id": pa.array(ids, pa.int64()),
        "dt": ["d"] * len(ids),
        "v": [f"{version}-{k}" * 20 for k in ids],
    }
    if kinds is not None:
        columns["_VALUE_KIND"] = pa.array(kinds, pa.int8())
    return pa.table(columns)


def _by_id(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda row: row["id"])


def test_minor_compaction_rewrites_only_the_new_small_runs(spark_session, tmp_path) -> None:
    warehouse = str(tmp_path / "wh")
    table = make_table(
        f"{warehouse}/db.db/pk", partition_keys=(), primary_keys=("id",), options={"bucket": str(BUCKETS)}
    )
    _commit(table, _rows(list(range(2000)), "base"), 0)
    compact(spark_session, table, CompactRequest(strategy="full"))
    big = {e.file.file_name for e in live_entries(table, table.snapshot_manager.latest())}
    assert all(e.file.level == 5 for e in live_entries(table, table.snapshot_manager.latest()))
    deleted = 250
    for step in range(5):  # five small upserts: five level-0 runs per bucket
        ids = list(range(step * 3, 2000, 250))
        kinds = [3 if k == deleted else 0 for k in ids] if step == 0 else None
        _commit(table, _rows(ids, f"u{step}", kinds), 10_000 + step * 100)
    expected = _by_id(pypaimon_rows(warehouse, "db.pk"))
    assert deleted not in {row["id"] for row in expected}
    planned = table.snapshot_manager.latest()

    record = compact(spark_session, table, CompactRequest(strategy="minor"))

    snapshot = table.snapshot_manager.latest()
    assert snapshot.id == planned.id + 1 and snapshot.commit_kind == "COMPACT"
    delta = list(read_entries(table, read_list(table, snapshot.delta_manifest_list)))
    removed = [e.file for e in delta if e.kind == DELETE]
    added = [e.file for e in delta if e.kind == ADD]
    # only the level-0 runs were rewritten; the big top-level files are untouched
    assert removed and all(f.level == 0 for f in removed) and not big & {f.file_name for f in removed}
    assert len(removed) == 5 * BUCKETS and record.counts["files_rewritten"] == 5 * BUCKETS
    assert record.bytes["files_rewritten"] == sum(f.file_size for f in removed)
    assert all(f.level == 4 and f.file_source == 1 for f in added)
    # the deleted key's retraction is kept: the big run at level 5 below still holds its old row
    kinds = [
        kind
        for e in delta
        if e.kind == ADD
        for batch in read_data_file(table, e.partition, e.bucket, e.file, system_columns=True)
        for kind in batch.column(VALUE_KIND).to_pylist()
    ]
    assert kinds.count(3) == 1
    assert _by_id(pypaimon_rows(warehouse, "db.pk")) == expected
    assert _by_id(pypaimon_rows(warehouse, "db.pk", planned.id)) == expected

    again = compact(spark_session, table, CompactRequest(strategy="minor"))
    assert again.counts["bins"] == 0  # two runs per bucket now: below the trigger
    compact(spark_session, table, CompactRequest(strategy="full"))
    after = live_entries(table, table.snapshot_manager.latest())
    assert len(after) == BUCKETS and all(e.file.level == 5 for e in after)
    assert _by_id(pypaimon_rows(warehouse, "db.pk")) == expected
