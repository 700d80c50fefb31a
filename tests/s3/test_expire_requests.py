"""expire-snapshots and expire-tags on S3 read each metadata file once per run (issue #26).

Counted through the proxy, by key: a snapshot, tag, schema or manifest list is fetched at most once
however many passes look at it (`paimon_format.maintenance.read_memo`); a file the run listed or
read is never HEADed (every HEAD the run sends is an absence check, answered 404); snapshot files
go one request each (no HEAD first), tag files in one DeleteObjects. And the memo never turns a
failed read into an absent file or an old copy.
"""

from __future__ import annotations

import collections
import re

import pytest

from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.writer import write_table_files
from paimon_format.errors import MissingFileError, StorageError
from paimon_format.maintenance.read_memo import ReadMemoFileIO
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.s3.proxy import ThrottlingProxy
from tests.support.cli_runs import run_job
from tests.support.table_states import (
    IDENTIFIER,
    append_rows,
    batch,
    build_sample_table,
    missing_needed,
    open_table,
    unreferenced,
)

FUTURE = "2100-01-01 00:00:00"
_IMMUTABLE = re.compile(r"/(snapshot/snapshot-\d+|tag/tag-[^/]+|schema/schema-\d+|manifest/manifest-[^/]+)$")


def gets_by_key(proxy: ThrottlingProxy) -> collections.Counter:
    return collections.Counter(
        r.path for r in proxy.requests if r.kind == "GET" and _IMMUTABLE.search(r.path)
    )


def overwrite(table: Table, first_id: int) -> None:
    written = write_table_files(table.file_io, table.path, table.schema, batch(first_id, 6), 10_000)
    SnapshotCommit(table).overwrite([CommitMessage(p, b, -1, files) for p, b, files in written])


def test_expire_snapshots_reads_each_metadata_file_once(spark_session, s3, tmp_path, capsys):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    table = build_sample_table(warehouse, commits=3, storage_options=options)  # 1-3, tag t2 on 2
    overwrite(table, 100)  # 4: the expiring deltas delete files, so both sides read manifests
    table.tag_manager.create_tag("t4", table.snapshot_manager.snapshot(4))
    append_rows(table, batch(200, 3))  # 5
    proxy.reset()

    config = {"warehouse": warehouse, "table": IDENTIFIER, "storage_options": options}
    config["lock"] = {"dir": str(tmp_path / "locks")}  # count the table alone (test_table_lock_on_s3)
    code, record = run_job(
        tmp_path, "expire-snapshots", {**config, "retain_min": 2, "older_than": FUTURE}, capsys
    )

    assert code == 0, record["error"]
    assert record["counts"]["snapshots_expired"] == 3 and record["counts"]["files_deleted"] > 0
    read_twice = {key: n for key, n in gets_by_key(proxy).items() if n > 1}
    assert read_twice == {}
    assert all(r.status == 404 for r in proxy.requests if r.kind == "HEAD")  # absence checks only
    # snapshots 1-3 one request each (one-key DeleteObjects, no HEAD first), the rest in batches
    assert proxy.count("DELETE") == 0
    assert sum(1 for r in proxy.requests if r.kind == "DeleteObjects" and r.deleted_keys == 1) >= 3
    retained = open_table(warehouse, options)
    assert retained.snapshot_manager.snapshot_ids() == [4, 5]
    assert missing_needed(retained) == set()  # tags t2, t4 and the retained snapshots stay whole
    assert unreferenced(retained) == set()  # and what only the expired snapshots needed is gone


def test_expire_tags_reads_each_file_once_but_the_tags_it_deletes_twice_and_deletes_them_in_one_batch(
    spark_session, s3, tmp_path, capsys
):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    table = build_sample_table(warehouse, commits=2, storage_options=options)
    latest = table.snapshot_manager.snapshot(2)
    for day in ("2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"):
        table.tag_manager.create_tag(day, latest)
    proxy.reset()

    config = {"warehouse": warehouse, "table": IDENTIFIER, "storage_options": options, "num_retained_max": 1}
    config["lock"] = {"dir": str(tmp_path / "locks")}  # count the table alone (test_table_lock_on_s3)
    code, record = run_job(tmp_path, "expire-tags", config, capsys)

    assert code == 0, record["error"]
    assert record["counts"]["tags_deleted"] == 3
    # every file is read once, but the tags that go: once to plan, once more right before they are
    # deleted, past the run's memo (a tag another writer replaced meanwhile is not deleted)
    expired = {
        f"{table.tag_manager.tag_path(day)}".split("://", 1)[-1]
        for day in ("2024-01-01", "2024-01-02", "2024-01-03")
    }
    twice = {key: n for key, n in gets_by_key(proxy).items() if n > 1}
    assert twice == {key: 2 for key in twice} and {k.lstrip("/") for k in twice} == {
        k.lstrip("/") for k in expired
    }
    assert all(r.status == 404 for r in proxy.requests if r.kind == "HEAD")
    assert proxy.count("DELETE") == 0 and sum(r.deleted_keys for r in proxy.requests) == 3
    assert open_table(warehouse, options).tag_manager.tag_names() == ["2024-01-04", "t2"]


def test_the_memo_never_keeps_a_failed_read_or_an_absent_file(s3):
    prefix, options, proxy = s3
    memo = ReadMemoFileIO(FileIO.for_path(prefix, options))
    path = f"{prefix}/snapshot/snapshot-1"
    proxy.reset(deny=lambda method, key, query: method == "GET" and key.endswith("snapshot-1"))
    memo.inner.write_bytes(path, b"one")
    with pytest.raises(StorageError):
        memo.read_bytes(path)
    proxy.reset()
    assert memo.read_bytes(path) == b"one" and memo.read_bytes(path) == b"one"
    assert proxy.count("GET") == 1  # asked again after the failure, then remembered

    absent = f"{prefix}/snapshot/snapshot-2"
    assert not memo.file_exists(absent)
    memo.inner.write_bytes(absent, b"two")  # committed by someone else meanwhile
    assert memo.file_exists(absent) and memo.read_bytes(absent) == b"two"
    memo.delete_many([path])
    with pytest.raises(MissingFileError):
        memo.read_bytes(path)  # deleted through the memo: asked, and gone


def test_a_listing_is_one_request_and_forgets_what_it_no_longer_shows(s3):
    prefix, options, proxy = s3
    plain = FileIO.for_path(prefix, options)
    memo = ReadMemoFileIO(plain)
    for name in ("snapshot/snapshot-1", "snapshot/snapshot-2", "snapshot/sub/x", "snapshot/LATEST"):
        plain.write_bytes(f"{prefix}/{name}", b"1")
    proxy.reset()

    def as_set(statuses: list) -> set:
        return {(s.path, s.size, s.is_dir) for s in statuses}

    assert as_set(memo.list_dir(f"{prefix}/snapshot")) == as_set(plain.list_dir(f"{prefix}/snapshot"))
    with pytest.raises(MissingFileError):
        memo.list_dir(f"{prefix}/branch")
    lists = [r for r in proxy.requests if r.kind == "LIST"]
    assert sum(1 for r in lists if "branch" in r.query) == 1  # no second LIST of the table root

    proxy.reset()
    assert memo.file_exists(f"{prefix}/snapshot/snapshot-2") and len(proxy.requests) == 0  # listed
    plain.delete(f"{prefix}/snapshot/snapshot-2")  # expired by another run
    memo.list_dir(f"{prefix}/snapshot")
    assert not memo.file_exists(f"{prefix}/snapshot/snapshot-2")  # the listing no longer shows it


def test_a_tag_replaced_meanwhile_is_read_again_after_a_listing_shows_it_changed(s3):
    prefix, options, proxy = s3
    plain = FileIO.for_path(prefix, options)
    memo = ReadMemoFileIO(plain)
    tag = f"{prefix}/tag/tag-t1"
    plain.write_bytes(tag, b'{"id": 1}')
    memo.list_dir(f"{prefix}/tag")
    assert memo.read_bytes(tag) == b'{"id": 1}'
    plain.write_bytes(tag, b'{"id": 22}')  # replace_tag by another process
    assert memo.read_bytes(tag) == b'{"id": 1}'  # no listing since: this run's first read
    memo.list_dir(f"{prefix}/tag")  # e.g. the re-check of the tags before anything is deleted
    assert memo.read_bytes(tag) == b'{"id": 22}'
