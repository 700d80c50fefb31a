"""`df.write.format("paimon")` leaves nothing behind from attempts whose result Spark dropped (a
speculative duplicate, a killed attempt): every file name carries the write and the task attempt, and
`commit` (after the snapshot landed) and `abort` list the directories the messages name and remove the
write's files no message names; other writers' files stay. On S3 that costs one LIST per directory.
Driven as Spark drives the writer, without Spark (task attempts are `TaskContext` stand-ins)."""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from jobs.source.write_leftovers import DRIVER_ATTEMPT, attempt_of
from jobs.source.writer import WrittenFiles, make_writer
from paimon_format.scan.snapshot_scan import index_entries, live_entries
from paimon_format.storage.fileio import FileIO
from paimon_format.storage.paths import DATA_FILE_RE, INDEX_FILE_RE
from paimon_format.table import Table
from tests.java.oracle import sort_key
from tests.s3.proxy import ThrottlingProxy
from tests.support.pypaimon_reads import pypaimon_rows

SPARK_SCHEMA = StructType(
    [StructField("k", LongType()), StructField("dt", StringType()), StructField("v", StringType())]
)
ARROW_SCHEMA = pa.schema([("k", pa.int64()), ("dt", pa.string()), ("v", pa.string())])
TABLES = [
    pytest.param({"partition": "dt"}, id="append"),
    pytest.param({"primary-key": "dt,k", "partition": "dt", "bucket": "2"}, id="fixed-bucket-pk"),
    pytest.param({"primary-key": "dt,k", "partition": "dt"}, id="dynamic-bucket-pk"),
]


class _Attempt:
    """What `TaskContext.get()` answers in one attempt of task `partition`."""

    def __init__(self, partition: int, attempt: int) -> None:
        self.partition, self.attempt = partition, attempt

    def partitionId(self) -> int:  # noqa: N802 - Spark's name
        return self.partition

    def taskAttemptId(self) -> int:  # noqa: N802 - Spark's name
        return self.attempt


def _batches(rows: list[tuple]) -> Iterator[pa.RecordBatch]:
    for row in rows:  # one batch per row: with a tiny target-file-size, a file per row
        yield pa.RecordBatch.from_pylist(
            [dict(zip(ARROW_SCHEMA.names, row, strict=True))], schema=ARROW_SCHEMA
        )


def _attempt(monkeypatch: Any, writer: Any, partition: int, attempt: int, rows: list[tuple]) -> WrittenFiles:
    monkeypatch.setattr("pyspark.TaskContext.get", lambda: _Attempt(partition, attempt))
    return writer.write(_batches(rows))


def _files(root: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, _, names in os.walk(root) for n in names}


def _referenced(root: str) -> set[str]:
    """Data and index files the latest snapshot names, relative to the table."""
    table = Table(FileIO.for_path(root), root)
    latest = table.snapshot_manager.latest()
    data = {
        f"{table.bucket_relpath(e.partition, e.bucket)}/{e.file.file_name}"
        for e in live_entries(table, latest)
    }
    return data | {f"index/{e.file_name}" for e in index_entries(table, latest)}


TASK_0 = [(k, "ab"[k % 2], f"v{k}") for k in range(6)]
TASK_1 = [(k, "ab"[k % 2], f"w{k}") for k in range(6, 10)]


@pytest.mark.parametrize("create", TABLES)
def test_commit_removes_the_files_of_dropped_attempts_and_keeps_other_writers(monkeypatch, tmp_path, create):
    warehouse = str(tmp_path / "wh")
    root = f"{warehouse}/db.db/t"
    options = {"warehouse": warehouse, "path": "db.t", "target-file-size": "1 b", **create}
    writer = make_writer(options, SPARK_SCHEMA, False)
    dropped = _attempt(monkeypatch, writer, 0, 7, TASK_0)  # the speculative copy that lost
    kept = [_attempt(monkeypatch, writer, 0, 8, TASK_0), _attempt(monkeypatch, writer, 1, 9, TASK_1)]
    foreign = f"dt=a/bucket-0/data-{uuid.uuid4()}-0.parquet"  # another writer's, not yet committed
    os.makedirs(os.path.dirname(f"{root}/{foreign}"), exist_ok=True)
    with open(f"{root}/{foreign}", "wb") as out:
        out.write(b"theirs")
    written = {row["path"] for row in dropped.rows} | {i for m in [dropped] for i in _index_paths(m)}
    assert written and written <= _files(root)

    writer.commit(kept)

    files = _files(root)
    assert files.isdisjoint(written)
    assert foreign in files
    on_disk = {f for f in files if DATA_FILE_RE.fullmatch(f.rpartition("/")[2]) or f.startswith("index/")}
    assert on_disk == _referenced(root) | {foreign}
    rows = TASK_0 + TASK_1
    assert pypaimon_rows(warehouse, "db.t") == sorted(
        (dict(zip(ARROW_SCHEMA.names, r, strict=True)) for r in rows), key=sort_key
    )


def _index_paths(message: WrittenFiles) -> list[str]:
    return [f"index/{entry.file_name}" for entry in message.index]


def test_file_names_carry_the_write_and_the_task_attempt(monkeypatch, tmp_path):
    warehouse = str(tmp_path / "wh")
    options = {"warehouse": warehouse, "path": "db.t", "primary-key": "dt,k", "partition": "dt"}
    writer = make_writer(options, SPARK_SCHEMA, False)
    messages = [
        _attempt(monkeypatch, writer, 0, 41, TASK_0),
        _attempt(monkeypatch, writer, 1, 2**40 - 2, TASK_1),
    ]
    for message, attempt in zip(messages, [41, 2**40 - 2], strict=True):
        names = [row["path"].rpartition("/")[2] for row in message.rows] + [
            e.file_name for e in message.index
        ]
        assert all(DATA_FILE_RE.fullmatch(n) or INDEX_FILE_RE.fullmatch(n) for n in names), names
        assert {attempt_of(n, writer.write_id) for n in names} == {attempt}
    writer.commit(messages)
    table = Table(FileIO.for_path(f"{warehouse}/db.db/t"), f"{warehouse}/db.db/t")
    merged = [e.file_name for e in index_entries(table, table.snapshot_manager.latest())]
    assert merged and {attempt_of(n, writer.write_id) for n in merged} == {DRIVER_ATTEMPT}
    assert attempt_of(f"data-{uuid.uuid4()}-0.parquet", writer.write_id) is None


def test_abort_removes_every_file_of_the_write_and_nothing_else(monkeypatch, tmp_path):
    """(In the directories the finished tasks wrote: those are what `abort` lists.)"""
    warehouse = str(tmp_path / "wh")
    options = {"warehouse": warehouse, "path": "db.t", "primary-key": "dt,k", "partition": "dt"}
    first = make_writer(options, SPARK_SCHEMA, False)
    first.commit([_attempt(monkeypatch, first, 0, 1, [(100, "a", "x"), (101, "b", "y")])])
    root = f"{warehouse}/db.db/t"
    before = _files(root)
    writer = make_writer({**options, "target-file-size": "1 b"}, SPARK_SCHEMA, False)
    _attempt(monkeypatch, writer, 1, 7, TASK_1)  # killed: its message never came; Spark retried it
    finished = _attempt(monkeypatch, writer, 1, 8, TASK_1)  # (task 0 then failed: the job aborts)
    assert len(_files(root)) > len(before)
    writer.abort([None, finished])
    assert _files(root) == before


@pytest.fixture(scope="module")
def proxy(moto_s3: Any) -> Iterator[ThrottlingProxy]:
    with ThrottlingProxy(moto_s3[0]) as running:
        yield running


@pytest.mark.parametrize("create", TABLES[1:])
def test_on_s3_the_commit_lists_each_directory_once(monkeypatch, moto_s3, proxy, create):
    storage = {"endpoint_url": proxy.endpoint_url, "client_kwargs": {"region_name": "us-east-1"}}
    root = f"s3://{moto_s3[1]}/leftovers-{uuid.uuid4().hex[:12]}/db.db/t"
    options = {"path": root, "storage_options": json.dumps(storage), "target-file-size": "1 b", **create}
    writer = make_writer(options, SPARK_SCHEMA, False)
    dropped = _attempt(monkeypatch, writer, 0, 7, TASK_0)
    kept = [_attempt(monkeypatch, writer, 0, 8, TASK_0), _attempt(monkeypatch, writer, 1, 9, TASK_1)]
    directories = {row["path"].rpartition("/")[0] for m in kept for row in m.rows}
    directories |= {"index" for m in kept if m.index}
    proxy.reset()
    writer.commit(kept)
    kinds = Counter(request.kind for request in proxy.requests)
    prefixes = [parse_qs(r.query)["prefix"][0] for r in proxy.requests if r.kind == "LIST"]
    ours = [p.split("/db.db/t/", 1)[1] for p in prefixes if writer.write_id in p]
    listed = Counter(prefix.rsplit("/", 1)[0] for prefix in ours)
    assert listed == dict.fromkeys(directories, 1)  # one LIST per directory (the commit lists its own too)
    # one batch of the dropped attempt's files, one of the kept attempts' delta HASH files (merged)
    assert kinds["DeleteObjects"] == 1 + ("index" in directories)
    file_io = FileIO.for_path(root, storage)
    left = {s.path.rpartition("/")[2] for s in file_io.list_files_recursive(root)}
    gone = {row["path"].rpartition("/")[2] for row in dropped.rows} | {e.file_name for e in dropped.index}
    assert gone and left.isdisjoint(gone)
