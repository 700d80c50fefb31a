"""System tables on S3 (moto behind the project's proxy): what `$files` costs in requests, and a
failed read is an error, never a smaller table."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator

import pytest

from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.errors import StorageError
from paimon_format.scan.snapshot_scan import data_manifests, live_entries
from paimon_format.storage.fileio import FileIO
from paimon_format.system_tables import system_table, system_table_batches
from paimon_format.system_tables.metadata_tables import local_time
from paimon_format.table import Table
from tests.s3.proxy import ThrottlingProxy
from tests.support.table_states import build_sample_table


@pytest.fixture(scope="module")
def proxy(moto_s3) -> Iterator[ThrottlingProxy]:
    with ThrottlingProxy(moto_s3[0]) as running:
        yield running


@pytest.fixture
def table_on_s3(moto_s3, proxy) -> Table:
    """The sample table with one file deleted by a later commit (so one manifest counts a DELETE)."""
    _, bucket, options = moto_s3
    options = {**options, "endpoint_url": proxy.endpoint_url}
    table = build_sample_table(f"s3://{bucket}/systables-{uuid.uuid4().hex[:12]}", storage_options=options)
    gone = live_entries(table, table.snapshot_manager.latest())[0]
    SnapshotCommit(table).append([CommitMessage(gone.partition, gone.bucket, -1, [], [gone.file])])
    return Table(FileIO.for_path(table.path, options), table.path)


def _manifest_gets(proxy: ThrottlingProxy) -> Counter[str]:
    return Counter(
        r.path.rsplit("/", 1)[1]
        for r in proxy.requests
        if r.kind == "GET" and "/manifest/manifest-" in r.path and "/manifest-list-" not in r.path
    )


def test_files_read_each_manifest_once_and_those_with_deletes_twice(table_on_s3: Table, proxy) -> None:
    latest = table_on_s3.snapshot_manager.latest()
    manifests = data_manifests(table_on_s3, latest)
    live = len(live_entries(table_on_s3, latest))
    proxy.reset()
    rows = system_table(Table(table_on_s3.file_io, table_on_s3.path), "files")
    assert rows.num_rows == live
    expected = {m.file_name: 2 if m.num_deleted_files else 1 for m in manifests}
    assert dict(_manifest_gets(proxy)) == expected
    assert sum(1 for m in manifests if m.num_deleted_files) == 1  # the second pass costs one GET here


def test_a_manifest_read_that_fails_raises_instead_of_leaving_files_out(table_on_s3: Table, proxy) -> None:
    first = data_manifests(table_on_s3, table_on_s3.snapshot_manager.latest())[0].file_name
    proxy.reset(deny=lambda method, key, query: method == "GET" and key.endswith(first))
    fresh = Table(table_on_s3.file_io, table_on_s3.path)
    with pytest.raises(StorageError, match=first):
        list(system_table_batches(fresh, "files"))
    with pytest.raises(StorageError, match=first):
        system_table(fresh, "partitions")


def test_a_branch_on_s3_is_as_old_as_its_first_schema(table_on_s3: Table) -> None:
    """S3 has no directories (a listing gives them no time): a branch's `create_time` is then the
    time its `schema/` was written, when the branch was made."""
    io = table_on_s3.file_io
    schema_file = io.join(table_on_s3.path, "schema", "schema-0")
    io.write_bytes(
        io.join(table_on_s3.path, "branch", "branch-x", "schema", "schema-0"), io.read_bytes(schema_file)
    )
    (status,) = [s for s in io.list_dir(io.join(table_on_s3.path, "branch", "branch-x", "schema"))]
    (row,) = system_table(table_on_s3, "branches").to_pylist()
    assert row == {"branch_name": "x", "create_time": local_time(status.modification_time_ms)}
    assert row["create_time"].year >= 2024  # not the epoch a directory's missing time would give
