"""Requests the store does not answer: a read timeout or a dropped connection, on moto behind the proxy.

The proxy (`tests.s3.proxy.Stall`) holds chosen requests until the client's read timeout fires, or cuts
their connection, before or after moto applied them; the storage options set a short read timeout, so
a stalled attempt costs a test about a second. Nothing of ours is mocked: botocore, s3fs, our retry
hook (`s3_client.hook_retries`) and the ambiguous create-if-absent (`s3_client.put_if_absent`) run as
in production.

Before the hook, botocore's retry quota (500 tokens per client, 10 per timeout) let ~50 timeouts at
once be retried and raised the rest unretried: the 1,000,000-object orphan run failed so.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from jobs.runtime.table_lock import TableLock, default_lock_dir, lock_path
from paimon_format.storage.fileio import FileIO
from paimon_format.storage.in_flight import allowed_in_flight, map_in_flight, timed_out_requests
from tests.s3.proxy import Stall, ThrottlingProxy
from tests.support.cli_runs import run_job
from tests.support.table_states import (
    IDENTIFIER,
    append_rows,
    batch,
    build_sample_table,
    listed_files,
    missing_referenced,
)

READ_TIMEOUT_S = 1.0


def impatient(options: dict[str, Any], retries: int = 10) -> dict[str, Any]:
    """`options` with a short read timeout and `retries` retries after the first attempt."""
    kwargs = {"read_timeout": READ_TIMEOUT_S, "retries": {"max_attempts": retries, "mode": "standard"}}
    return {**options, "config_kwargs": kwargs}


def _recover() -> None:
    """Grow this process's in-flight window back after the timeouts, so later tests run at full width."""
    while allowed_in_flight(64) < 64:
        list(map_in_flight(lambda x: x, range(256), 64))


def is_list(method: str, path: str, query: str) -> bool:
    return method == "GET" and "list-type=2" in query


def first_of(*rules: Any, each: int = 1) -> Any:
    """A match that picks the first `each` requests each rule picks."""
    picked = [0] * len(rules)

    def match(method: str, path: str, query: str) -> bool:
        for index, rule in enumerate(rules):
            if picked[index] < each and rule(method, path, query):
                picked[index] += 1
                return True
        return False

    return match


def stalled(proxy: ThrottlingProxy) -> list[Any]:
    assert proxy.wait_idle()  # a request the client gave up on is booked once the proxy sees it leave
    return [r for r in proxy.requests if r.fault]


def test_a_list_and_a_get_whose_connections_drop_are_retried(s3) -> None:
    """aiohttp itself sends a GET again once when its connection closes without an answer (unseen by
    botocore, uncounted); a drop reaches botocore when that second try is dropped too. (Read timeouts:
    the orphan run below.)"""
    prefix, options, proxy = s3
    each = 2
    file_io = FileIO.for_path(prefix, impatient(options))
    file_io.write_bytes(f"{prefix}/d/a", b"a")
    expected = file_io.list_dir(f"{prefix}/d")
    before = timed_out_requests()
    is_get = lambda method, path, query: method == "GET" and path.endswith("/d/a")  # noqa: E731
    proxy.reset(stall=Stall(first_of(is_list, is_get, each=each), times=2 * each, drop=True), scope=prefix)

    assert file_io.list_dir(f"{prefix}/d") == expected
    assert file_io.read_bytes(f"{prefix}/d/a") == b"a"

    faults = stalled(proxy)
    assert [(r.kind, r.status) for r in faults] == [("LIST", 0)] * each + [("GET", 0)] * each
    assert [(r.kind, r.status) for r in proxy.requests if not r.fault] == [("LIST", 200), ("GET", 200)]
    assert timed_out_requests() - before == 2
    assert allowed_in_flight(64) < 64  # the pools narrowed, as for a 503
    _recover()


def test_many_timeouts_at_once_are_all_retried(s3) -> None:
    """80 LISTs in flight all time out together: each is retried. botocore's quota alone retried ~50
    (500 tokens, 10 a timeout) and raised the rest at once: the failure of the 1M-object run."""
    prefix, options, proxy = s3
    file_io = FileIO.for_path(prefix, impatient(options), io_parallelism=80)
    file_io.write_bytes(f"{prefix}/d/a", b"a")
    expected = file_io.list_dir(f"{prefix}/d")
    proxy.reset(stall=Stall(is_list, times=80), scope=prefix)

    with ThreadPoolExecutor(80) as pool:
        listings = list(pool.map(lambda _: file_io.list_dir(f"{prefix}/d"), range(80)))

    assert listings == [expected] * 80
    assert len(stalled(proxy)) == 80
    assert proxy.count("GET", "list-type=2", status=200) >= 80  # more only if moto itself was slow
    _recover()


def _orphan_table(s3: Any, age_s3_objects: Any, tmp_path: Any, retries: int) -> tuple[Any, dict, set[str]]:
    """A small table with one old orphan on S3, its job config (short timeouts, the lock on local
    disk so the ledger holds the table's requests only) and its listed files."""
    prefix, options, _ = s3
    warehouse = f"{prefix}/wh"
    table = build_sample_table(warehouse, commits=2, storage_options=options)
    orphan = f"dt=2024-01-01/bucket-0/data-{uuid.uuid4()}-0.parquet"
    table.file_io.write_bytes(f"{table.path}/{orphan}", b"left behind")
    listed = listed_files(table)
    age_s3_objects([f"{table.path}/{path}" for path in listed], 2 * 86_400)
    config = {
        "warehouse": warehouse,
        "table": IDENTIFIER,
        "storage_options": impatient(options, retries),
        "lock": {"dir": str(tmp_path / "locks")},
    }
    return table, config, listed


def test_an_orphan_run_whose_list_and_get_time_out_once_finds_the_same(
    s3, age_s3_objects, tmp_path, capsys
) -> None:
    prefix, _, proxy = s3
    _, config, _ = _orphan_table(s3, age_s3_objects, tmp_path, retries=10)
    proxy.reset(scope=prefix)
    code, clean = run_job(tmp_path, "remove-orphan-files", config, capsys, "--dry-run")
    assert code == 0, clean["error"]
    assert proxy.wait_idle()
    clean_bill = proxy.summary()["by_kind"]

    is_range = lambda method, path, query: is_list(method, path, query) and "start-after" in query  # noqa: E731
    is_manifest = lambda method, path, query: method == "GET" and "/manifest/manifest-" in path  # noqa: E731
    proxy.reset(stall=Stall(first_of(is_range, is_manifest), times=2), scope=prefix)
    code, record = run_job(tmp_path, "remove-orphan-files", config, capsys, "--dry-run")

    assert code == 0, record["error"]
    assert record["counts"] == clean["counts"] and record["counts"]["orphan_files"] == 1
    assert record["samples"] == clean["samples"]
    faults = stalled(proxy)
    assert sorted(r.kind for r in faults) == ["GET", "LIST"]  # the manifest may be read during the listing
    for fault in faults:  # each sent again, and answered
        again = [r for r in proxy.requests if (r.path, r.query) == (fault.path, fault.query) and not r.fault]
        assert again and all(r.status == 200 for r in again)
    # the same requests as the clean run, plus the two that got no answer
    assert proxy.summary()["by_kind"] == {
        **clean_bill,
        "LIST": clean_bill["LIST"] + 1,
        "GET": clean_bill["GET"] + 1,
    }
    assert record["details"]["storage"]["timed_out_requests"] == 2
    _recover()


def test_a_listing_that_never_answers_fails_the_run_and_deletes_nothing(
    s3, age_s3_objects, tmp_path, capsys
) -> None:
    prefix, _, proxy = s3
    table, config, listed = _orphan_table(s3, age_s3_objects, tmp_path, retries=1)
    is_range = lambda method, path, query: is_list(method, path, query) and "start-after" in query  # noqa: E731
    proxy.reset(stall=Stall(is_range, times=0), scope=prefix)

    code, record = run_job(tmp_path, "remove-orphan-files", config, capsys)

    faults = stalled(proxy)
    deletes = proxy.count("POST", "delete") + proxy.count("DELETE")
    proxy.reset()
    assert code == 1
    assert "ReadTimeoutError" in record["error"] and "keys after" in record["error"], record["error"]
    assert table.path.removeprefix("s3://") in record["error"]  # which listing, of which table
    assert len(faults) == 2  # the first attempt and its one retry: bounded, then an error
    assert deletes == 0
    assert record["details"]["storage"]["timed_out_requests"] == 2
    table.file_io.fs.invalidate_cache()
    assert listed_files(table) == listed
    _recover()


@pytest.mark.parametrize(
    ("drop", "times", "retries"),
    [(False, 1, 10), (True, 1, 10), (False, 0, 1)],
    ids=["answer-lost-once", "connection-dropped-once", "never-answered"],
)
def test_a_commit_whose_conditional_put_was_applied_but_unanswered_commits_once(
    s3, drop: bool, times: int, retries: int
) -> None:
    """moto applies the create-if-absent of snapshot 2; its answer is lost (once, or on every attempt:
    then the retries end without an answer). The put is ours: the commit is snapshot 2, exactly once,
    never "someone else won", which would remove the manifests snapshot 2 names and retry as 3."""
    prefix, options, proxy = s3
    table = build_sample_table(f"{prefix}/wh", commits=1, storage_options=impatient(options, retries))

    def is_snapshot_2(method: str, path: str, query: str) -> bool:
        return method == "PUT" and path.endswith("/snapshot/snapshot-2")

    proxy.reset(stall=Stall(is_snapshot_2, times=times, drop=drop, applied=True), scope=prefix)
    assert append_rows(table, batch(100, 3)) == 2

    faults = stalled(proxy)
    puts = [r for r in proxy.requests if r.conditional and "/snapshot/snapshot-" in r.path]
    proxy.reset()
    assert faults and all(r.path.endswith("/snapshot-2") and r.status == 0 for r in faults)
    if times == 1:  # the retry met our own object (412), read back as ours
        assert [r.status for r in puts] == [0, 412]
    else:
        assert [r.status for r in puts] == [0, 0]
    assert all(r.path.endswith("/snapshot-2") for r in puts)  # no snapshot 3 was tried
    table.file_io.fs.invalidate_cache()
    snapshots = sorted(s.path.rsplit("/", 1)[1] for s in table.file_io.list_dir(f"{table.path}/snapshot"))
    assert [name for name in snapshots if name.startswith("snapshot-")] == ["snapshot-1", "snapshot-2"]
    assert table.snapshot_manager.latest().id == 2
    assert missing_referenced(table) == set()  # its manifests and data files are all there
    manager = table.snapshot_manager
    assert manager.latest().total_record_count == manager.snapshot(1).total_record_count + 3
    _recover()


def test_a_lock_whose_create_was_applied_but_never_answered_is_held(s3) -> None:
    """The table lock's create-if-absent is applied but no attempt gets an answer: the lock read back
    is ours, so the run holds it (and releases it), instead of failing and leaving its own lock to
    block every run until it expires."""
    prefix, options, proxy = s3
    directory = default_lock_dir(f"{prefix}/wh")
    path = lock_path(directory, IDENTIFIER)
    lock = TableLock(FileIO.for_path(directory, impatient(options, retries=1)), path, 60_000, "a@host")
    proxy.reset(stall=Stall(lambda method, p, query: method == "PUT", times=0, applied=True), scope=prefix)

    assert lock.acquire().held

    assert [(r.kind, r.status) for r in stalled(proxy)] == [("PUT", 0), ("PUT", 0)]
    assert [r.kind for r in proxy.requests if not r.fault] == ["GET"]  # read back: our bytes
    proxy.reset()
    assert lock.release()
    assert lock.read() is None
    _recover()


def test_a_create_if_absent_that_met_a_conflict_is_sent_again_as_it_is(s3) -> None:
    """S3 answers 409 while a conditional write to the key is in progress, which may be our own lost
    attempt: the put is sent again (after a back-off) rather than taken for a lost race, which would
    remove the attempt's manifests and build the commit anew."""
    prefix, options, proxy = s3
    table = build_sample_table(f"{prefix}/wh", commits=1, storage_options=options)

    def is_snapshot_2(method: str, path: str, query: str) -> bool:
        return method == "PUT" and path.endswith("/snapshot/snapshot-2")

    proxy.reset(stall=Stall(is_snapshot_2, times=1, conflict=True), scope=prefix)
    assert append_rows(table, batch(100, 3)) == 2

    puts = [r for r in proxy.requests if r.conditional and "/snapshot/snapshot-" in r.path]
    lists = [r for r in proxy.requests if r.kind == "PUT" and "/manifest/manifest-list-" in r.path]
    deletes = proxy.count("DELETE") + proxy.count("POST", "delete")
    proxy.reset()
    assert [(r.path.rsplit("/", 1)[1], r.status) for r in puts] == [("snapshot-2", 409), ("snapshot-2", 200)]
    assert puts[0].bytes_in == puts[1].bytes_in and deletes == 0
    assert len(lists) == 2  # the base and delta lists of one attempt, written once
    assert missing_referenced(table) == set()
