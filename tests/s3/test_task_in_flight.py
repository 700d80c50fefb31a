"""Spark tasks keep their data-file reads in flight on S3 (issue #26), with the same rows, a data
file that cannot be read still fails the job, and the write job's source costs a GET a file.

Measured at the proxy (moto behind it, a latency on every request as a store's time to first byte):
from the ledger, how many GETs of data files were in flight at once. `local[2]` runs two tasks at
a time, so a task reading its files one after another keeps at most two data-file GETs in flight
overall; the table's 21 data files in 3 buckets give each task 7 files, which its read-ahead
(`paimon_format.data.prefetch`) fetches at once. Nothing here waits on a timer: the latency only
makes each GET last long enough for the ledger to show the overlap. The write job reads each
Parquet source file with the size its listing gave: one GET, no HEAD.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.read import read_table
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.scan.split_read import read_split
from paimon_format.scan.splits import plan_splits
from paimon_format.storage.fileio import FileIO
from tests.s3.proxy import ThrottlingProxy
from tests.support.cli_runs import run_job
from tests.support.table_states import IDENTIFIER, batch, build_sample_table, open_table

LATENCY_S = 0.05
COMMITS = 7  # 7 files in each of the 3 partitions
SPARK_CORES = 2  # pytest-spark's local[2]: tasks at once


def data_file_gets_in_flight(proxy: ThrottlingProxy, latency_s: float) -> int:
    """The most GETs of data files the proxy held at once, from the ledger: each from its arrival
    (its forward to moto less the added latency) to its answer."""
    events: list[tuple[float, int]] = []
    for request in list(proxy.requests):
        if request.kind == "GET" and "/data-" in request.path:
            events.append((request.upstream_start - latency_s, 1))
            events.append((request.upstream_start + request.upstream_seconds, -1))
    peak = running = 0
    for _moment, step in sorted(events):
        running += step
        peak = max(peak, running)
    return peak


def expected_rows() -> list[dict]:
    rows = pa.concat_tables([batch(i * 6, 6) for i in range(COMMITS)]).to_pylist()
    return sorted(rows, key=lambda row: row["id"])


@pytest.fixture
def s3_table(s3) -> tuple[str, dict, ThrottlingProxy]:
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    build_sample_table(warehouse, commits=COMMITS, storage_options=options)
    proxy.reset()
    return warehouse, options, proxy


def test_read_table_tasks_read_their_files_ahead_and_return_the_same_rows(spark_session, s3_table):
    warehouse, options, proxy = s3_table
    frame = read_table(spark_session, warehouse, IDENTIFIER, storage_options=options)
    proxy.reset(latency_s=LATENCY_S)  # what the executors send, after planning on the driver
    rows = [row.asDict() for row in frame.collect()]
    peak = data_file_gets_in_flight(proxy, LATENCY_S)
    proxy.reset()
    assert sorted(rows, key=lambda row: row["id"]) == expected_rows()
    assert peak > SPARK_CORES


def test_compact_tasks_read_their_files_ahead_and_keep_the_rows(spark_session, s3_table, tmp_path, capsys):
    warehouse, options, proxy = s3_table
    proxy.reset(latency_s=LATENCY_S)
    config = {"warehouse": warehouse, "table": IDENTIFIER, "storage_options": options}
    code, record = run_job(tmp_path, "compact", config, capsys)
    peak = data_file_gets_in_flight(proxy, LATENCY_S)
    proxy.reset()
    assert code == 0, record["error"]
    assert record["counts"]["files_rewritten"] == 3 * COMMITS
    assert peak > SPARK_CORES
    table = open_table(warehouse, options)
    latest = table.snapshot_manager.latest()
    assert len(list(live_entries(table, latest))) == 3
    rows = [
        row for split in plan_splits(table, latest) for b in read_split(table, split) for row in b.to_pylist()
    ]
    assert sorted(rows, key=lambda row: row["id"]) == expected_rows()


def _drop_one_data_file(warehouse: str, options: dict) -> str:
    table = open_table(warehouse, options)
    entry = next(iter(live_entries(table, table.snapshot_manager.latest())))
    path = table.file_io.join(
        table.path, table.bucket_relpath(entry.partition, entry.bucket), entry.file.file_name
    )
    assert FileIO.for_path(path, options).delete(path)
    return entry.file.file_name


def test_a_data_file_that_cannot_be_read_fails_read_table(spark_session, s3_table):
    warehouse, options, _proxy = s3_table
    name = _drop_one_data_file(warehouse, options)
    frame = read_table(spark_session, warehouse, IDENTIFIER, storage_options=options)
    with pytest.raises(Exception, match=name):
        frame.collect()


def test_a_data_file_that_cannot_be_read_fails_compact_and_commits_nothing(
    spark_session, s3_table, tmp_path, capsys
):
    warehouse, options, _proxy = s3_table
    name = _drop_one_data_file(warehouse, options)
    before = open_table(warehouse, options).snapshot_manager.latest().id
    config = {"warehouse": warehouse, "table": IDENTIFIER, "storage_options": options}
    code, record = run_job(tmp_path, "compact", config, capsys)
    assert code != 0 and record["status"] == "failed"
    assert name in record["error"]
    assert open_table(warehouse, options).snapshot_manager.latest().id == before


def test_the_write_job_reads_each_source_file_with_one_get_and_no_head(spark_session, s3, tmp_path, capsys):
    prefix, options, proxy = s3
    source = f"{prefix}/incoming"
    file_io = FileIO.for_path(source, options)
    for i in range(4):
        sink = pa.BufferOutputStream()
        pq.write_table(batch(i * 5, 5), sink)
        file_io.write_bytes(f"{source}/part-{i}.parquet", sink.getvalue().to_pybytes())
    proxy.reset()
    config = {
        "warehouse": f"{prefix}/wh",
        "table": IDENTIFIER,
        "source": {"format": "parquet", "path": source},
        "create": {"partition_keys": ["dt"]},
        "storage_options": options,
    }
    code, record = run_job(tmp_path, "write", config, capsys)
    source_requests = [r for r in proxy.requests if "/incoming" in r.path or "incoming" in r.query]
    proxy.reset()
    assert code == 0, record["error"]
    assert record["details"]["path"].startswith("direct") and record["counts"]["rows_written"] == 20
    kinds = sorted(r.kind for r in source_requests)
    assert kinds == ["GET"] * 5 + ["LIST"]  # one listing, the schema's footer, each file once; no HEAD


def test_an_output_file_that_cannot_be_stored_fails_compact_and_commits_nothing(
    spark_session, s3_table, tmp_path, capsys
):
    warehouse, options, proxy = s3_table
    before = open_table(warehouse, options).snapshot_manager.latest().id
    proxy.reset(deny=lambda method, path, query: method == "PUT" and "/data-" in path)  # 403 AccessDenied
    config = {"warehouse": warehouse, "table": IDENTIFIER, "storage_options": options}
    code, record = run_job(tmp_path, "compact", config, capsys)
    proxy.reset()
    assert code != 0 and record["status"] == "failed"
    assert "data-" in record["error"]
    table = open_table(warehouse, options)
    assert table.snapshot_manager.latest().id == before
    assert len(list(live_entries(table, table.snapshot_manager.latest()))) == 3 * COMMITS
