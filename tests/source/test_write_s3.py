"""`df.write.format("paimon")`'s writer on S3 (moto behind the project's proxy), driven as Spark drives
it: storage options reach the plan, the tasks and the commit; a task sends one PUT per file it wrote
and nothing else; the commit lands through 503 answers, and the rows read back."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from jobs.source.writer import make_writer
from paimon_format.scan.snapshot_scan import resolve_snapshot
from paimon_format.scan.split_read import read_split
from paimon_format.scan.splits import plan_splits
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.s3.proxy import ThrottlingProxy

SPARK_SCHEMA = StructType(
    [StructField("k", LongType()), StructField("dt", StringType()), StructField("v", StringType())]
)
ARROW_SCHEMA = pa.schema([("k", pa.int64()), ("dt", pa.string()), ("v", pa.string())])


@pytest.fixture(scope="module")
def proxy(moto_s3: Any) -> Iterator[ThrottlingProxy]:
    with ThrottlingProxy(moto_s3[0]) as running:
        yield running


class _Task:
    def __init__(self, number: int) -> None:
        self.number = number

    def partitionId(self) -> int:  # noqa: N802 - Spark's name
        return self.number

    def taskAttemptId(self) -> int:  # noqa: N802 - Spark's name
        return self.number


def _batch(rows: list[tuple]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [dict(zip(ARROW_SCHEMA.names, row, strict=True)) for row in rows], schema=ARROW_SCHEMA
    )


@pytest.mark.parametrize(
    "create",
    [
        pytest.param({"bucket": "2"}, id="fixed-bucket-pk"),
        pytest.param({"dynamic-bucket.assigner-parallelism": "2"}, id="dynamic-bucket-pk"),
    ],
)
def test_tasks_put_only_their_files_and_the_commit_lands_through_503s(monkeypatch, moto_s3, proxy, create):
    storage = {"endpoint_url": proxy.endpoint_url, "client_kwargs": {"region_name": "us-east-1"}}
    root = f"s3://{moto_s3[1]}/write-{uuid.uuid4().hex[:12]}/db.db/t"
    options = {
        "path": root,
        "storage_options": json.dumps(storage),
        "primary-key": "dt,k",
        "partition": "dt",
        **create,
    }
    writer = make_writer(options, SPARK_SCHEMA, False)
    tasks = [
        [(k, f"d{k % 2}", f"v{k}") for k in range(0, 12)],
        [(k, f"d{k % 2}", f"w{k}") for k in range(8, 20)],
    ]
    messages = []
    for number, rows in enumerate(tasks):
        monkeypatch.setattr("pyspark.TaskContext.get", lambda number=number: _Task(number))
        proxy.reset()
        message = writer.write(iter([_batch(rows)]))
        kinds = Counter(request.kind for request in proxy.requests)
        assert kinds == {"PUT": len(message.rows) + len(message.index)}  # no GET, HEAD or LIST
        messages.append(message)

    proxy.reset(throttle_ratio=0.2, seed=3)
    writer.commit(messages)
    assert proxy.count(status=503) > 0
    proxy.reset()

    table = Table(FileIO.for_path(root, storage), root)
    snapshot = resolve_snapshot(table)
    assert snapshot is not None and snapshot.id == 1
    batches = [b for split in plan_splits(table, snapshot) for b in read_split(table, split)]
    rows = sorted(pa.Table.from_batches(batches).select(["k", "dt", "v"]).to_pylist(), key=lambda r: r["k"])
    # keys 8..11 came from both tasks: which one wins is Spark's order (none); every key once
    assert [r["k"] for r in rows] == list(range(20))
    assert all(r["v"] == (f"v{r['k']}" if r["k"] < 8 else r["v"]) for r in rows)
    assert all(r["v"] == f"w{r['k']}" for r in rows if r["k"] >= 12)
