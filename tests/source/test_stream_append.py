"""`spark.readStream.format("paimon")` over an append table: every committed row exactly once, across
appends between micro-batches, a restart from the checkpoint, a compaction (it delivers nothing)
and an overwrite; `consumer-id` pins what the stream still needs against expire-snapshots.

Oracle: the ids the table's batch read returns (`rows_at`) and the ids we appended.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pytest

from jobs.expire_snapshots import ExpiryRequest, expire_snapshots
from jobs.source import register
from jobs.source.location import SourceOptionError
from jobs.source.stream import batch_splits, initial_offset, latest_offset_of, stream_options
from paimon_format.commit import COMPACT, CommitMessage, SnapshotCommit
from paimon_format.consumers import ConsumerManager
from paimon_format.data.writer import write_table_files
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.scan.split_read import read_split
from paimon_format.scan.splits import plan_splits
from tests.support.stream_runs import run_available_now
from tests.support.table_states import IDENTIFIER, append_rows, batch, build_sample_table

FUTURE = "2100-01-01 00:00:00"


@pytest.fixture(scope="module")
def spark(spark_session: Any) -> Any:
    register(spark_session)
    return spark_session


def run_stream(spark: Any, warehouse: str, checkpoint: str, **options: str) -> list[int]:
    """One availableNow run of the stream from `checkpoint`: the ids it delivered, in batch order."""
    delivered: list[int] = []

    def collect(frame: Any, _batch_id: int) -> None:
        delivered.extend(row["id"] for row in frame.select("id").collect())

    reader = spark.readStream.format("paimon").option("warehouse", warehouse)
    for key, value in options.items():
        reader = reader.option(key.replace("_", "-"), value)
    run_available_now(reader, IDENTIFIER, checkpoint, collect)
    return delivered


def compact_all(table: Any) -> None:
    """A COMPACT snapshot rewriting every live file into new files with the same rows."""
    snapshot = table.snapshot_manager.latest()
    entries = live_entries(table, snapshot)
    rows = [
        row
        for split in plan_splits(table, snapshot)
        for part in read_split(table, split)
        for row in part.to_pylist()
    ]
    data = pa.Table.from_pylist(rows, schema=batch(0, 1).schema)
    first_sequence = snapshot.total_record_count + 5000
    written = write_table_files(table.file_io, table.path, table.schema, data, first_sequence)
    deleted: dict[tuple[bytes, int], list] = {}
    for entry in entries:
        deleted.setdefault((entry.partition, entry.bucket), []).append(entry.file)
    messages = [CommitMessage(p, b, -1, files, deleted.pop((p, b), [])) for p, b, files in written]
    messages += [CommitMessage(p, b, -1, [], files) for (p, b), files in deleted.items()]
    SnapshotCommit(table).commit(lambda _ctx: [e for m in messages for e in m.entries()], COMPACT)


def test_every_row_exactly_once_across_appends_restarts_and_a_compaction(spark, tmp_path):
    warehouse = str(tmp_path / "wh")
    table = build_sample_table(warehouse, commits=2)  # ids 0..11 in snapshots 1, 2
    checkpoint = str(tmp_path / "checkpoint")
    stream = {"consumer_id": "s1"}

    first = run_stream(spark, warehouse, checkpoint, **stream)
    assert sorted(first) == list(range(12))  # latest-full: snapshot 2 whole
    consumers = ConsumerManager(table.file_io, table.path)
    assert consumers.consumer("s1") == 2  # the last batch of a run is not committed to it yet

    append_rows(table, batch(100, 4))
    append_rows(table, batch(200, 3))
    second = run_stream(spark, warehouse, checkpoint, **stream)  # a restart from the checkpoint
    assert sorted(second) == [100, 101, 102, 103, 200, 201, 202]
    assert consumers.consumer("s1") == 3

    compact_all(table)  # snapshot 5: the same rows in new files; 6 appends 300, 301
    append_rows(table, batch(300, 2))
    third = run_stream(spark, warehouse, checkpoint, **stream)
    assert sorted(third) == [300, 301]
    assert run_stream(spark, warehouse, checkpoint, **stream) == []  # nothing new: no batch
    assert consumers.consumer("s1") == 7  # the empty run started after snapshot 6


def test_consumer_keeps_the_snapshots_the_stream_still_needs(spark, tmp_path):
    warehouse = str(tmp_path / "wh")
    table = build_sample_table(warehouse, commits=3)
    run_stream(spark, warehouse, str(tmp_path / "cp"), consumer_id="s1")
    for i in range(3):
        append_rows(table, batch(100 + 10 * i, 2))  # snapshots 4, 5, 6: not read yet
    expire_snapshots(spark, table, ExpiryRequest(retain_min=1, older_than=FUTURE))
    # the run's last batch (snapshot 3) is not committed to the consumer yet (Spark commits a
    # batch when it plans the next): the consumer keeps it, conservatively
    assert table.snapshot_manager.snapshot_ids() == [3, 4, 5, 6]
    # a new query (no checkpoint) with the same consumer resumes at its next snapshot: 3's delta on
    resumed = run_stream(spark, warehouse, str(tmp_path / "cp2"), consumer_id="s1")
    assert sorted(resumed) == [*range(12, 18), 100, 101, 110, 111, 120, 121]


def test_start_modes_and_bad_options(tmp_path):
    table = build_sample_table(str(tmp_path / "wh"), commits=3)
    where = {"path": table.path}
    assert initial_offset(table, stream_options(where)) == {"snapshot": 2, "full": 3}
    assert initial_offset(table, stream_options({**where, "scan.mode": "latest"})) == {"snapshot": 3}
    from_two = {**where, "scan.mode": "from-snapshot", "scan.snapshot-id": "2"}
    assert initial_offset(table, stream_options(from_two)) == {"snapshot": 1}
    assert latest_offset_of(table, {"snapshot": 3}) == {"snapshot": 3}
    assert latest_offset_of(table, {"snapshot": 1}) == {"snapshot": 3}
    with pytest.raises(SourceOptionError, match="'scan.mode' = 'incremental'"):
        stream_options({**where, "scan.mode": "incremental"})
    with pytest.raises(SourceOptionError, match="scan.snapshot-id"):
        stream_options({**where, "scan.mode": "from-snapshot"})


def test_an_expired_snapshot_the_stream_needs_fails_naming_it(tmp_path):
    table = build_sample_table(str(tmp_path / "wh"), commits=3)
    os.remove(f"{table.path}/snapshot/snapshot-2")  # expired by a run that saw no consumer
    assert {s.snapshot_id for s in batch_splits(table, {"snapshot": 2}, {"snapshot": 3})} == {3}
    with pytest.raises(SourceOptionError, match="needs snapshot 2.*consumer-id"):
        batch_splits(table, {"snapshot": 1}, {"snapshot": 3})
