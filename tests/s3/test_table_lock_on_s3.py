"""The table lock on S3, counted through the proxy: what the lock adds to every table-management run
(a conditional PUT to take it; a GET and a DELETE to release it: the GET showed it is a file, so
the delete sends no HEAD), and that a held lock
refuses the job (exit 3) before it sends one request to the table."""

from __future__ import annotations

from jobs.runtime.table_lock import TableLock, default_lock_dir, lock_path
from paimon_format.storage.fileio import FileIO
from tests.support.cli_runs import run_job
from tests.support.table_states import IDENTIFIER, build_sample_table


def _lock(warehouse: str, options: dict, owner: str) -> TableLock:
    directory = default_lock_dir(warehouse)
    return TableLock(FileIO.for_path(directory, options), lock_path(directory, IDENTIFIER), 60_000, owner)


def test_taking_and_releasing_the_lock_is_four_requests_on_its_key(s3):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    lock = _lock(warehouse, options, "a@host")
    proxy.reset()
    assert lock.acquire().held and lock.release()
    lock_key = lock_path(default_lock_dir(warehouse), IDENTIFIER).removeprefix("s3:/")
    assert [(r.method, r.path, r.conditional, r.status) for r in proxy.requests] == [
        ("PUT", lock_key, True, 200),  # create-if-absent
        ("GET", lock_key, False, 200),  # still ours?
        ("DELETE", lock_key, False, 204),
    ]


def test_a_job_on_a_locked_table_sends_nothing_to_the_table(s3, tmp_path, capsys):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    build_sample_table(warehouse, commits=2, storage_options=options)
    holder = _lock(warehouse, options, "nightly@host")
    assert holder.acquire().held
    proxy.reset()

    config = {"warehouse": warehouse, "table": IDENTIFIER, "storage_options": options, "tag": "x"}
    code, record = run_job(tmp_path, "create-tag", config, capsys)

    assert code == 3 and "locked by nightly@host until " in record["error"]
    lock_key = lock_path(default_lock_dir(warehouse), IDENTIFIER).removeprefix("s3:/")
    assert [(r.method, r.path, r.status) for r in proxy.requests] == [
        ("PUT", lock_key, 412),  # the create-if-absent finds the holder's lock
        ("GET", lock_key, 200),  # not our own bytes (a retried put of ours would be)
        ("GET", lock_key, 200),  # whose owner and expiry the error names
    ]
    assert holder.release()
