"""merge-branch on S3 (moto behind the counting proxy): one pass over the metadata it checks, one
create-if-absent of the new snapshot, no PUT at all in a dry run, and a listing that fails is an
error with nothing written, never a branch taken for empty."""

from __future__ import annotations

import re
from collections import Counter

from tests.s3.proxy import ThrottlingProxy
from tests.support.cli_runs import run_job
from tests.support.merge_tables import BRANCH, BRANCH_IDS, MAIN_IDS, build_mergeable_table
from tests.support.s3_copies import download
from tests.support.table_states import IDENTIFIER, row_ids, view

# read twice by design: the branch's schema (open_branch checks it exists, then the plan reads it),
# and main's LATEST hint and latest snapshot (the commit looks afresh at what it commits on)
READ_TWICE = {"branch/branch-b/schema/schema-0", "snapshot/LATEST", "snapshot/snapshot-3"}


def table_requests(proxy: ThrottlingProxy, root: str, kind: str) -> Counter[str]:
    """Answered requests of `kind` on the table's own keys, by table-relative key (the lock lives
    outside the table; a 503 SlowDown answer and its retry count once)."""
    key = root.removeprefix("s3://").split("/", 1)[1] + "/"
    return Counter(
        request.path.split(key, 1)[1]
        for request in proxy.requests
        if request.kind == kind and key in request.path and request.status != 503
    )


def test_merge_branch_on_s3_reads_each_file_once_and_creates_one_snapshot(s3, tmp_path, capsys):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    table = build_mergeable_table(warehouse, storage_options=options)
    config = {
        "warehouse": warehouse,
        "table": IDENTIFIER,
        "storage_options": options,
        "source_branch": BRANCH,
    }

    proxy.reset()
    code, record = run_job(tmp_path, "merge-branch", config, capsys, "--dry-run")
    assert code == 0 and record["counts"]["files_to_add"] == 6, record.get("error")
    assert not table_requests(proxy, table.path, "PUT") and not table_requests(proxy, table.path, "DELETE")

    proxy.reset()
    code, record = run_job(tmp_path, "merge-branch", config, capsys)
    assert code == 0 and record["snapshot_ids"]["committed"] == 4, record.get("error")
    gets = table_requests(proxy, table.path, "GET")
    assert {key: n for key, n in gets.items() if n > (2 if key in READ_TWICE else 1)} == {}, gets
    assert gets["branch/branch-b/snapshot/snapshot-1"] == 1  # the history check reads every snapshot
    puts = table_requests(proxy, table.path, "PUT")
    named = Counter(re.sub(r"-[0-9a-f-]{36}-\d+$", "", key) for key in puts.elements())
    assert named == {
        "manifest/manifest": 1,
        "manifest/manifest-list": 2,
        "snapshot/snapshot-4": 1,
        "snapshot/LATEST": 1,
    }
    snapshot_puts = [r for r in proxy.requests if r.kind == "PUT" and r.path.endswith("/snapshot/snapshot-4")]
    assert all(request.conditional for request in snapshot_puts)  # create-if-absent
    state = view(download(warehouse, options, tmp_path / "after"))
    assert row_ids(state.latest_rows) == sorted(MAIN_IDS + BRANCH_IDS)


def test_a_listing_that_fails_is_an_error_and_nothing_is_written(s3, tmp_path, capsys):
    prefix, options, proxy = s3
    warehouse = f"{prefix}/wh"
    table = build_mergeable_table(warehouse, storage_options=options)
    config = {
        "warehouse": warehouse,
        "table": IDENTIFIER,
        "storage_options": options,
        "source_branch": BRANCH,
    }

    def deny_branch_snapshot_listing(method: str, path: str, query: str) -> bool:
        listing = method == "GET" and "list-type=2" in query
        return listing and ("branch-b%2Fsnapshot" in query or "branch-b/snapshot" in query)

    proxy.reset(deny=deny_branch_snapshot_listing)  # 403 AccessDenied
    code, record = run_job(tmp_path, "merge-branch", config, capsys)
    denied = proxy.count(status=403)
    puts = table_requests(proxy, table.path, "PUT")
    proxy.reset()
    assert denied >= 1 and code == 1, record.get("error")
    assert "branch-b/snapshot" in record["error"], record["error"]
    assert not puts
