"""Jobs against a real S3-compatible server (moto on loopback) through s3fs and the YAML's storage_options.

Every request goes through `ThrottlingProxy`, so the tests see what went over the wire: conditional
puts for commits, DeleteObjects batches, listing pages, 503 SlowDown answers and their retries, and
which access key signed. Credentials come from the AWS environment or a profile, never the YAML.
"""

from __future__ import annotations

import io
import threading
from concurrent.futures import ThreadPoolExecutor

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from jobs.runtime.config import TableJobConfig, load_config
from paimon_format.snapshot import SnapshotManager
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.support.cli_runs import run_job
from tests.support.s3_copies import download
from tests.support.table_states import (
    IDENTIFIER,
    append_rows,
    batch,
    build_sample_table,
    missing_referenced,
    row_ids,
    view,
)


def put_parquet(prefix: str, options: dict, data: pa.Table) -> str:
    sink = io.BytesIO()
    pq.write_table(data, sink)
    path = f"{prefix}/input/part-0.parquet"
    FileIO.for_path(path, options).write_bytes(path, sink.getvalue())
    return f"{prefix}/input"


def test_write_and_compact_manifests_run_on_s3_and_pypaimon_reads_the_result(
    spark_session, s3, tmp_path, capsys
):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    base = {"warehouse": warehouse, "table": IDENTIFIER, "storage_options": options}
    for round_ in range(2):
        source = put_parquet(f"{prefix}/in{round_}", options, batch(round_ * 10, 10))
        write = {
            **base,
            "source": {"format": "parquet", "path": source},
            "create": {"partition_keys": ["dt"]},
        }
        code, record = run_job(tmp_path, "write", write, capsys)
        assert code == 0, record["error"]
        assert record["snapshot_ids"]["committed"] == round_ + 1
    commits = [r for r in proxy.requests if r.conditional and "/snapshot/snapshot-" in r.path]
    assert len(commits) == 2 and all(r.status == 200 for r in commits)  # If-None-Match puts
    assert {r.key_id for r in proxy.requests} == {"testing"}  # signed with the environment's key

    proxy.reset()
    code, record = run_job(tmp_path, "compact-manifests", {**base, "mode": "full"}, capsys, "--dry-run")
    assert code == 0 and record["counts"]["manifests_rewritten"] == 2
    assert proxy.count("PUT") == proxy.count("POST") == proxy.count("DELETE") == 0  # a dry run writes nothing

    code, record = run_job(tmp_path, "compact-manifests", {**base, "mode": "full"}, capsys)
    assert code == 0 and record["snapshot_ids"]["committed"] == 3 and record["counts"]["manifests_after"] == 1

    local = download(warehouse, options, tmp_path / "copy")
    state = view(local)
    assert state.latest == 3 and row_ids(state.latest_rows) == list(range(20))
    assert {i: len(rows) for i, rows in state.rows_by_snapshot.items()} == {1: 10, 2: 20, 3: 20}
    assert not missing_referenced(Table.open(warehouse, IDENTIFIER, options))


def test_two_writers_racing_for_one_snapshot_id_both_land(s3):
    """Both committers try snapshot-2 at the same moment: the conditional put lets exactly one win,
    the other gets 412, retries at snapshot-3, and both commits are in the table."""
    prefix, options, proxy = s3
    table = build_sample_table(f"{prefix}/wh", commits=1, storage_options=options)
    original = SnapshotManager.try_commit
    barrier = threading.Barrier(2, timeout=30)
    first_try = threading.local()

    def together(manager, snapshot):
        if not getattr(first_try, "done", False):
            first_try.done = True
            barrier.wait()  # both hold a snapshot-2 in hand before either puts it
        return original(manager, snapshot)

    proxy.reset()
    results = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SnapshotManager, "try_commit", together)
        with ThreadPoolExecutor(2) as pool:
            futures = [
                pool.submit(append_rows, Table.open(f"{prefix}/wh", IDENTIFIER, options), batch(first, 5))
                for first in (100, 200)
            ]
            results = sorted(future.result() for future in futures)
    assert results == [2, 3]
    puts = [r for r in proxy.requests if r.conditional and r.path.endswith("/snapshot/snapshot-2")]
    assert sorted(r.status for r in puts) == [200, 412]
    manager = table.snapshot_manager
    assert manager.snapshot_ids() == [1, 2, 3] and manager.latest_id() == 3
    assert len({manager.snapshot(i).commit_user for i in (2, 3)}) == 2
    assert manager.snapshot(3).total_record_count == 6 + 5 + 5
    assert not missing_referenced(table)


def test_deletes_go_in_batches_of_1000_and_listings_paginate(moto_s3, s3):
    endpoint_url, bucket, _ = moto_s3
    prefix, options, proxy = s3
    client = boto3.client("s3", endpoint_url=endpoint_url, region_name="us-east-1")
    key_prefix = prefix.removeprefix(f"s3://{bucket}/")
    count = 1100
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda i: client.put_object(Bucket=bucket, Key=f"{key_prefix}/d/f-{i:05d}", Body=b"x"),
                range(count),
            )
        )
    file_io = FileIO.for_path(prefix, options)

    proxy.reset()
    listed = [status.path for status in file_io.list_files_recursive(f"{prefix}/d")]
    assert len(listed) == count == len(set(listed))
    assert proxy.count("GET", "list-type=2") == 2  # 1000 + 100 keys

    proxy.reset()
    deleted = file_io.delete_many(listed)
    assert sorted(deleted) == sorted(listed)
    assert proxy.count("POST", "delete") == 2 and proxy.count("DELETE") == 0  # 1000 + 100 keys
    with pytest.raises(Exception, match="d"):
        list(file_io.list_files_recursive(f"{prefix}/d"))  # gone: a missing prefix is an error, not []


def test_throttled_requests_are_retried_and_the_job_succeeds(spark_session, s3, tmp_path, capsys):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    build_sample_table(warehouse, commits=4, storage_options=options)
    config = {"warehouse": warehouse, "table": IDENTIFIER, "storage_options": options, "mode": "full"}

    proxy.reset(throttle_first=2, throttle_every=6, scope=prefix)  # 503 to the first 2 and every 6th
    code, record = run_job(tmp_path, "compact-manifests", config, capsys)
    throttled = proxy.count(status=503)
    proxy.reset()
    assert code == 0, record["error"]
    assert throttled >= 4 and record["snapshot_ids"]["committed"] == 5
    local = download(warehouse, options, tmp_path / "copy")
    state = view(local)
    assert row_ids(state.latest_rows) == list(range(24)) and row_ids(state.rows_by_tag["t2"]) == list(
        range(12)
    )


def test_conditional_put_and_batch_delete_are_retried_when_throttled(s3):
    prefix, options, proxy = s3
    file_io = FileIO.for_path(prefix, options)
    proxy.reset(throttle_first=2, scope=prefix)
    assert file_io.create_if_absent(f"{prefix}/snapshot-1", b"one")
    assert not file_io.create_if_absent(f"{prefix}/snapshot-1", b"two")  # 412, never overwritten
    assert file_io.read_bytes(f"{prefix}/snapshot-1") == b"one"
    proxy.reset(throttle_first=2, scope=prefix)
    assert file_io.delete_many([f"{prefix}/snapshot-1"]) == [f"{prefix}/snapshot-1"]
    assert proxy.count(status=503) == 2 and proxy.count("POST", "delete", status=200) == 1


def test_credentials_come_from_a_profile_or_variables_never_clear_text(s3, tmp_path, monkeypatch):
    prefix, options, proxy = s3
    options = {**options, "skip_instance_cache": True}  # fsspec caches clients built with other keys
    credentials = tmp_path / "credentials"
    credentials.write_text("[lake]\naws_access_key_id = PROFILEKEY\naws_secret_access_key = profile-secret\n")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_PROFILE", "lake")
    proxy.reset()
    FileIO.for_path(prefix, options).write_bytes(f"{prefix}/a", b"x")
    assert {r.key_id for r in proxy.requests} == {"PROFILEKEY"}

    # `${VAR}` in the YAML is the way to hand over a credential explicitly
    monkeypatch.setenv("LAKE_KEY", "VARKEY")
    monkeypatch.setenv("LAKE_SECRET", "var-secret")
    config = tmp_path / "job.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "warehouse": f"{prefix}/wh",
                "table": IDENTIFIER,
                "storage_options": {**options, "key": "${LAKE_KEY}", "secret": "${LAKE_SECRET}"},
            }
        )
    )
    loaded = load_config(str(config), [], TableJobConfig)
    proxy.reset()
    FileIO.for_path(prefix, loaded.storage_options).read_bytes(f"{prefix}/a")
    assert {r.key_id for r in proxy.requests} == {"VARKEY"}
    assert "VARKEY" not in repr(FileIO.for_path(prefix, loaded.storage_options))
